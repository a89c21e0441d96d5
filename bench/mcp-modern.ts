/**
 * Rows 2.4 and 6.5: the upstream MCP hop in the 2026-07-28 revision, against fixture servers
 * that speak only that revision (SDK v2, createMcpHandler; bench/fixtures/mcp-servers.ts
 * `modern`, their own process):
 * - 2.4 POST /invoke of `echo` through the real gateway process vs the SDK v2 Client (pinned to
 *   2026-07-28, its own streamable HTTP transport) calling the server directly: added p50 at
 *   concurrency 1 (interleaved single calls, after the rounds of 2.4b); 2.4b throughput at
 *   concurrency 32 (autocannon vs 32 closed loops of callTool, interleaved rounds);
 * - 6.5 the first listing of a tenant whose 3 servers speak 2026-07-28 (GET /tools, the gateway
 *   connects its 3 servers): p99, the requests each server received for it (one tools/list each:
 *   the era verdict is remembered per server config, so no server/discover), and 6.5b the
 *   gateway's CPU per first listing.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { closedLoop } from './fixtures/mcp-client.js'
import { closeHttp, cpuMs, gatewayEnv, http, httpOk, load, loadInterleaved, startGateway, startMcpServers } from './fixtures/procs.js'
import { makeRow, median, percentile, round, timeInterleaved, timeMs } from './stats.js'
import type { LoadResult } from './fixtures/procs.js'
import type { BenchContext, Row } from './types.js'

const C = 32
const SECONDS = 4
const ROUNDS = 3
const SERVER_IDS = ['ma', 'mb', 'mc']
/** Tenants listed once outside the measured range (JIT warm-up of the connect path), then measured ones. */
const WARM_TENANTS = 150
const SAMPLE = 100
const TOOLS_PER_SERVER = 9

async function echo (client: Client, text: string): Promise<void> {
  const r = await client.callTool({ name: 'echo', arguments: { text } }) as { content?: Array<{ text?: string }>, isError?: boolean }
  if (r.isError === true || r.content?.[0]?.text?.endsWith(`:${text}`) !== true) throw new Error(`unexpected echo answer ${JSON.stringify(r)}`)
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const { urls } = await startMcpServers(ctx, SERVER_IDS.length, 'modern')
  const serverUrl = urls[0] as string
  const gw = await startGateway(ctx, gatewayEnv(ctx, { EGRESS_ALLOW: '127.0.0.1/32' }))
  await httpOk('PUT', `${gw.url}/mcp/servers/echo`, { type: 'streamable_http', url: serverUrl })
  const body = { name: 'echo__echo', arguments: { text: 'hello' } }
  const bodyText = JSON.stringify(body)
  const viaGateway = async (): Promise<void> => {
    const r = await http('POST', `${gw.url}/invoke`, body)
    if (r.status !== 200 || !r.body.includes('"output":"m0:hello"')) throw new Error(`gateway answered ${r.status}: ${r.body.slice(0, 300)}`)
  }
  await viaGateway()
  const client = new Client({ name: 'bench-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  await client.connect(new StreamableHTTPClientTransport(new URL(serverUrl)))
  ctx.defer(async () => { await client.close().catch(() => {}) })
  if (client.getNegotiatedProtocolVersion() !== '2026-07-28') throw new Error(`direct client negotiated ${String(client.getNegotiatedProtocolVersion())}`)
  const direct = async (): Promise<void> => { await echo(client, 'hello') }
  await direct()

  // --- 2.4b: concurrency 32 ------------------------------------------------------------------------
  let gwCpu = 0
  let gwCalls = 0
  const res = await loadInterleaved(ctx, {
    gateway: async (seconds) => {
      const g0 = await cpuMs(gw.pid)
      const r: LoadResult = await load({ url: `${gw.url}/invoke`, method: 'POST', body: bodyText, connections: C, seconds })
      gwCpu += await cpuMs(gw.pid) - g0
      gwCalls += r.requests
      return r
    },
    direct: async (seconds) => await closedLoop(direct, C, seconds)
  }, { warmupSeconds: 2, seconds: SECONDS, rounds: ROUNDS })
  const gRps = median(res.gateway.map((r) => r.rps))
  const dRps = median(res.direct.map((r) => r.rps))
  const bad = [...res.gateway, ...res.direct].reduce((a, r) => a + r.non2xx + r.errors, 0)

  // --- 2.4: concurrency 1, after the rounds above (a production gateway runs warm) -------------------
  const c1 = await timeInterleaved({ gateway: viaGateway, direct }, { warmup: 200, reps: 1500, signal: ctx.signal })
  const gP50 = median(c1.gateway)
  const dP50 = median(c1.direct)
  ctx.log(`2026-07-28 hop c=1: gateway p50 ${round(gP50)} ms, direct ${round(dP50)} ms (n=${c1.gateway.length}); c=32: ${round(gRps)} vs ${round(dRps)} req/s`)

  // --- 6.5: first listings of tenants whose 3 servers speak 2026-07-28 ------------------------------
  const uid = (t: number): string => `m26-${t}`
  const register = async (t: number): Promise<void> => {
    for (let s = 0; s < SERVER_IDS.length; s++) {
      await httpOk('PUT', `${gw.url}/users/${uid(t)}/mcp/servers/${SERVER_IDS[s] as string}`, { type: 'streamable_http', url: urls[s] })
    }
  }
  const list = async (t: number): Promise<void> => {
    const r = await http('GET', `${gw.url}/tools?userId=${uid(t)}&mcp=${SERVER_IDS.join(',')}`)
    if (r.status !== 200) throw new Error(`GET /tools ${uid(t)} -> ${r.status}: ${r.body.slice(0, 300)}`)
    const n = (JSON.parse(r.body) as { tools: unknown[] }).tools.length
    if (n !== TOOLS_PER_SERVER * SERVER_IDS.length) throw new Error(`GET /tools ${uid(t)} listed ${n} tools: ${r.body.slice(0, 300)}`)
  }
  const unregister = async (t: number): Promise<void> => {
    for (const id of SERVER_IDS) await httpOk('DELETE', `${gw.url}/users/${uid(t)}/mcp/servers/${id}`, undefined, [200, 204])
  }
  const stats = async (): Promise<Array<Record<string, number>>> => await Promise.all(urls.map(async (u) => {
    const r = await http('GET', new URL('/stats', u).toString())
    return JSON.parse(r.body) as Record<string, number>
  }))
  const requestsOf = (s: Record<string, number>): number => Object.values(s).reduce((a, b) => a + b, 0)
  // Warm-up on tenants outside the measured range; each is removed after, so its clients close.
  for (let w = 0; w < WARM_TENANTS; w++) {
    await register(SAMPLE + w)
    await list(SAMPLE + w)
    await unregister(SAMPLE + w)
  }
  for (let t = 0; t < SAMPLE; t++) await register(t)
  const firstMs: number[] = []
  let gwListCpu = 0
  const before = await stats()
  for (let t = 0; t < SAMPLE; t++) {
    const g0 = await cpuMs(gw.pid)
    firstMs.push(await timeMs(async () => { await list(t) }))
    gwListCpu += await cpuMs(gw.pid) - g0
  }
  const after = await stats()
  const perServer = after.map((s, i) => (requestsOf(s) - requestsOf(before[i] as Record<string, number>)) / SAMPLE)
  const methods = [...new Set(after.flatMap((s, i) => Object.keys(s).filter((m) => (s[m] ?? 0) > ((before[i] as Record<string, number>)[m] ?? 0))))].join(', ')
  const fP99 = percentile(firstMs, 99)
  ctx.log(`first listing (3 servers, 2026-07-28): p50 ${round(median(firstMs))} p99 ${round(fP99)} ms; requests per server per listing ${perServer.map(round).join(' / ')} (${methods})`)

  return [
    makeRow({
      id: '2.4',
      name: 'POST /invoke of a 2026-07-28 MCP echo vs the SDK v2 client directly: latency at concurrency 1',
      metric: 'p50 ms',
      value: gP50,
      baseline: dP50,
      target: { on: 'delta', op: '<', limit: 0.5 },
      notes: `added p50 ${round(gP50 - dP50)} ms; p99 ${round(percentile(c1.gateway, 99))} vs ${round(percentile(c1.direct, 99))} ms; n=${c1.gateway.length} interleaved, after the rounds of 2.4b; the server speaks only 2026-07-28`,
      detail: { addedP50: round(gP50 - dP50) }
    }),
    makeRow({
      id: '2.4b',
      name: 'the same at concurrency 32: throughput',
      metric: 'req/s',
      value: gRps,
      baseline: dRps,
      target: { on: 'ratio', op: '>=', limit: 0.85 },
      notes: `autocannon ${C} connections vs ${C} SDK v2 callTool loops, median of ${res.gateway.length} interleaved ${SECONDS} s rounds; gateway CPU ${round(1000 * gwCpu / gwCalls)} us per call${bad > 0 ? `; ${bad} errors` : ''}`,
      detail: { gatewayRps: res.gateway.map((r) => round(r.rps)).join(' '), directRps: res.direct.map((r) => round(r.rps)).join(' ') }
    }),
    makeRow({
      id: '6.5',
      name: 'first GET /tools of a tenant whose 3 servers speak 2026-07-28 (the gateway connects them): p99',
      metric: 'p99 ms',
      value: fP99,
      baseline: null,
      target: { on: 'value', op: '<', limit: 10 },
      notes: `p50 ${round(median(firstMs))} ms over ${SAMPLE} tenants (after ${WARM_TENANTS} warm-up tenants); requests each server received per first listing: ${perServer.map(round).join(' / ')} (${methods}; 1 = a tools/list only, no server/discover: the era verdict is remembered per server config)`,
      detail: { requestsPerServer: perServer.map(round).join(' ') }
    }),
    makeRow({
      id: '6.5b',
      name: 'the same: gateway CPU per first listing',
      metric: 'ms',
      value: gwListCpu / SAMPLE,
      baseline: null,
      target: { on: 'value', op: '<=', limit: 3 },
      notes: `/proc, 10 ms resolution, summed over ${SAMPLE} first listings`
    })
  ]
}
