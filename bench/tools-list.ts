/**
 * Row 4: GET /tools for a tenant with 20 streamable-HTTP servers x 25
 * tools (real fixture servers in one child process on loopback, registered through the REST API;
 * EGRESS_ALLOW opens 127.0.0.1 to the SSRF guard).
 * - 4.1 warm, sequential: p50 and p99, interleaved with GET /healthz on the same gateway (the
 *   floor of any request: HTTP, auth, rate limit, logging);
 * - 4.1b the floor of 4.1: a bare Fastify route sending the same bytes, vs its own /healthz, in the
 *   same interleaved rounds;
 * - 4.2 warm under load: autocannon, 8 connections;
 * - 4.3 cold: the first GET after a registry change (PUT of a 21st server, then GET naming it),
 *   against the warm p50.
 */
import { writeFile } from 'node:fs/promises'
import path from 'node:path'
import { closeHttp, cpuMs, gatewayEnv, http, httpOk, load, startBareFastify, startGateway, startMcpServers } from './fixtures/procs.js'
import { makeRow, median, percentile, round, timeInterleaved, timeMs } from './stats.js'
import type { BenchContext, Row } from './types.js'

const SERVERS = 20
const TOOLS = 25
const TENANT = 'bench1'
const COLD_REPS = 7
/**
 * Warm requests per side. A p99 is the 1%-largest: over 1,000 requests the 10th largest, which one
 * machine hiccup moves; the rows' p99 swung 2-5x between runs of 1,000 (the bare route's too).
 */
const WARM_REPS = 5000

const sid = (i: number): string => `s${String(i).padStart(2, '0')}`

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const { urls } = await startMcpServers(ctx, SERVERS, TOOLS)
  const gw = await startGateway(ctx, gatewayEnv(ctx, { EGRESS_ALLOW: '127.0.0.1/32' }))
  for (let i = 0; i < SERVERS; i++) {
    await httpOk('PUT', `${gw.url}/users/${TENANT}/mcp/servers/${sid(i)}`, { type: 'streamable_http', url: urls[i] })
  }
  const ids = Array.from({ length: SERVERS }, (_, i) => sid(i))
  const toolsUrl = (extra: string[] = []): string => `${gw.url}/tools?userId=${TENANT}&mcp=${[...ids, ...extra].join(',')}`
  const list = async (url: string, expect: number): Promise<void> => {
    const r = await http('GET', url)
    if (r.status !== 200) throw new Error(`GET /tools -> ${r.status}: ${r.body.slice(0, 300)}`)
    const json = JSON.parse(r.body) as { tools: unknown[], unavailable: unknown[] }
    if (json.tools.length !== expect) throw new Error(`GET /tools listed ${json.tools.length} tools, expected ${expect}; unavailable ${JSON.stringify(json.unavailable).slice(0, 300)}`)
  }
  const first = await timeMs(() => list(toolsUrl(), SERVERS * TOOLS))
  ctx.log(`first listing (connect ${SERVERS} servers): ${round(first)} ms`)
  const body = (await http('GET', toolsUrl())).body
  const bytes = body.length

  // The floor: the same bytes from a bare Fastify route (bench/fixtures/bare-fastify.ts).
  const listingFile = path.join(ctx.tmpDir, 'listing.json')
  await writeFile(listingFile, body)
  const bare = await startBareFastify(ctx, { BARE_LISTING_FILE: listingFile })
  const bareUrl = bare.url
  const bareList = async (): Promise<void> => {
    const r = await http('GET', `${bareUrl}/tools`)
    if (r.status !== 200 || r.body.length !== bytes) throw new Error(`bare GET /tools -> ${r.status}, ${r.body.length} bytes (expected ${bytes})`)
  }
  const bareHealthz = async (): Promise<void> => {
    const r = await http('GET', `${bareUrl}/healthz`)
    if (r.status !== 200) throw new Error(`bare healthz ${r.status}`)
  }

  const healthz = async (): Promise<void> => {
    const r = await http('GET', `${gw.url}/healthz`)
    if (r.status !== 200) throw new Error(`healthz ${r.status}`)
  }
  // Warm timings check status and size only: parsing 200 KiB here would be timed too.
  const warmList = async (): Promise<void> => {
    const r = await http('GET', toolsUrl())
    if (r.status !== 200 || r.body.length !== bytes) throw new Error(`GET /tools -> ${r.status}, ${r.body.length} bytes (expected ${bytes})`)
  }
  const cpu0 = await cpuMs(gw.pid)
  const warm = await timeInterleaved({ tools: warmList, healthz, bareTools: bareList, bareHealthz }, { warmup: 50, reps: WARM_REPS, signal: ctx.signal })
  const warmCpuMs = (await cpuMs(gw.pid) - cpu0) / (warm.tools.length + 50)
  ctx.log(`bare: /tools p50 ${round(median(warm.bareTools))} p99 ${round(percentile(warm.bareTools, 99))} ms; healthz p50 ${round(median(warm.bareHealthz))} p99 ${round(percentile(warm.bareHealthz, 99))} ms`)
  ctx.log(`warm: p50 ${round(median(warm.tools))} p99 ${round(percentile(warm.tools, 99))} ms; healthz p50 ${round(median(warm.healthz))} ms`)

  await load({ url: toolsUrl(), connections: 8, seconds: 1 })
  const loaded = await load({ url: toolsUrl(), connections: 8, seconds: 5 })
  ctx.log(`loaded: ${round(loaded.rps)} req/s p50 ${round(loaded.p50)} p99 ${round(loaded.p99)} ms`)

  // Cold: each rep adds a server (a registry write: new catalog version, new client), lists, and
  // removes it again (untimed).
  const cold: number[] = []
  for (let k = 0; k < COLD_REPS && !ctx.signal.aborted; k++) {
    const extra = `x${k}`
    await httpOk('PUT', `${gw.url}/users/${TENANT}/mcp/servers/${extra}`, { type: 'streamable_http', url: urls[k % SERVERS] })
    cold.push(await timeMs(() => list(toolsUrl([extra]), (SERVERS + 1) * TOOLS)))
    await httpOk('DELETE', `${gw.url}/users/${TENANT}/mcp/servers/${extra}`, undefined, [200, 204])
    await list(toolsUrl(), SERVERS * TOOLS)
  }
  ctx.log(`cold: ${cold.map((x) => round(x)).join(' ')} ms`)

  const warmP50 = median(warm.tools)
  return [
    makeRow({
      id: '4.1',
      name: `GET /tools, ${SERVERS} servers x ${TOOLS} tools, warm, sequential: p99 vs GET /healthz`,
      metric: 'p99 ms',
      value: percentile(warm.tools, 99),
      baseline: percentile(warm.healthz, 99),
      target: { on: 'ratio', op: '<=', limit: 1.3 },
      notes: `p50 ${round(warmP50)} ms (healthz ${round(median(warm.healthz))}); gateway CPU ${round(warmCpuMs)} ms per listing (+ healthz); ${SERVERS * TOOLS} tools, ${Math.round(bytes / 1024)} KiB JSON; n=${warm.tools.length} interleaved`,
      detail: { p50: round(warmP50), healthzP50: round(median(warm.healthz)), bytes, firstListingMs: round(first) }
    }),
    makeRow({
      id: '4.1b',
      name: 'the floor of 4.1: a bare Fastify route sending the same bytes, p99 vs its own GET /healthz',
      metric: 'p99 ms',
      value: percentile(warm.bareTools, 99),
      baseline: percentile(warm.bareHealthz, 99),
      target: null,
      notes: `p50 ${round(median(warm.bareTools))} ms (healthz ${round(median(warm.bareHealthz))}); the same interleaved rounds as 4.1; what sending ${Math.round(bytes / 1024)} KiB costs on this machine, with no gateway`
    }),
    makeRow({
      id: '4.2',
      name: 'the same under load (autocannon, 8 connections)',
      metric: 'p99 ms',
      value: loaded.p99,
      baseline: null,
      target: null,
      notes: `${round(loaded.rps)} req/s, p50 ${round(loaded.p50)} ms, 5 s${loaded.non2xx + loaded.errors > 0 ? `; ${loaded.non2xx + loaded.errors} errors` : ''}`
    }),
    makeRow({
      id: '4.3',
      name: 'cold: first GET /tools after a registry change (PUT a 21st server, GET naming it) vs warm p50',
      metric: 'median ms',
      value: median(cold),
      baseline: warmP50,
      target: null,
      notes: `includes connecting the new server (initialize + tools/list); max ${round(Math.max(...cold))} ms; n=${cold.length}; first listing of all ${SERVERS} at start ${round(first)} ms`
    })
  ]
}
