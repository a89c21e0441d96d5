/**
 * Row 2.5: the gateway's own MCP endpoint. An SDK client calls `echo` through `/mcp?mcp=...` of
 * the real gateway process (which calls the fixture server upstream), vs the same SDK client
 * calling the fixture server directly, from this process; in both MCP eras:
 * - 2.5 / 2.5b legacy (2025-06-18 sessions): the SDK v1 client, the streamable-HTTP fixture server;
 *   added p50 at concurrency 1, throughput at concurrency 16 (16 closed loops of callTool each side);
 * - 2.5c / 2.5d 2026-07-28 (stateless): the SDK v2 client pinned to 2026-07-28 both ways, the
 *   server of row 2.4 that speaks only that revision; the same two figures;
 * - 2.5e / 2.5f the floor in the same runs: `POST /invoke` of the same call on the same gateway
 *   (an undici client at concurrency 1, autocannon at 16), vs the same legacy direct client.
 * - 2.5g / 2.5h the gateway's own share, without the clients' differences: its CPU per call at
 *   concurrency 1 when the same raw undici client sends the call to /mcp (legacy; 2026-07-28) and
 *   the same call to POST /invoke (each era's server upstream), in interleaved blocks (and each
 *   route's p50 with that client).
 * - 2.5i the floor of 2.5b: the rounds are CPU-bound on the host, so from the CPU per call of each
 *   process in them (the SDK client loops in this process, the gateway, the echo server), the
 *   throughput ratio a /mcp that cost the gateway what POST /invoke does would reach.
 * Throughput rounds first, interleaved per era; then the concurrency-1 calls, interleaved, warm.
 */
import { Client as ClientV2, StreamableHTTPClientTransport as TransportV2 } from '@modelcontextprotocol/client'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { Agent, request } from 'undici'
import { closedLoop, connectClient } from './fixtures/mcp-client.js'
import { closeHttp, cpuMs, gatewayEnv, http, httpOk, load, loadInterleaved, startGateway, startMcpServers } from './fixtures/procs.js'
import { makeRow, median, percentile, round, timeInterleaved } from './stats.js'
import type { LoadResult } from './fixtures/procs.js'
import type { BenchContext, Row } from './types.js'

const C = 16
const SECONDS = 3
const ROUNDS = 3
const REPS = 1000
/** 2.5g / 2.5h: blocks of raw calls per route, interleaved. */
const RAW_BLOCK = 400
const RAW_ROUNDS = 4
const MODERN = '2026-07-28'

/** callTool through either SDK's client; throws unless the answer is the fixture's `{marker}:{text}`. */
function echoVia (client: Client | ClientV2, name: string): () => Promise<void> {
  return async () => {
    const r = await (client as Client).callTool({ name, arguments: { text: 'hello' } }) as { content?: Array<{ text?: string }>, isError?: boolean }
    if (r.isError === true || r.content?.[0]?.text?.endsWith(':hello') !== true) throw new Error(`unexpected echo answer ${JSON.stringify(r)}`)
  }
}

async function connectV2 (ctx: BenchContext, url: string): Promise<ClientV2> {
  const client = new ClientV2({ name: 'bench-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  await client.connect(new TransportV2(new URL(url)))
  ctx.defer(async () => { await client.close().catch(() => {}) })
  if (client.getNegotiatedProtocolVersion() !== '2026-07-28') throw new Error(`v2 client negotiated ${String(client.getNegotiatedProtocolVersion())} with ${url}`)
  return client
}

/** One raw POST with an undici client; throws unless the answer is 200 and carries the echo. */
function rawPost (agent: Agent, url: string, headers: Record<string, string>, body: unknown): () => Promise<void> {
  const payload = JSON.stringify(body)
  return async () => {
    const r = await request(url, { method: 'POST', dispatcher: agent, headers: { 'content-type': 'application/json', ...headers }, body: payload })
    const text = await r.body.text()
    if (r.statusCode !== 200 || !text.includes(':hello')) throw new Error(`${url} answered ${r.statusCode}: ${text.slice(0, 300)}`)
  }
}

/**
 * The raw calls of 2.5g / 2.5h: the same echo call to legacy /mcp and POST /invoke (the legacy
 * server upstream), and to 2026-07-28 /mcp and POST /invoke (the 2026-07-28 server upstream).
 */
function rawCalls (agent: Agent, gw: string): Record<'legacy' | 'invoke' | 'modern' | 'invokeModern', () => Promise<void>> {
  const accept = { accept: 'application/json, text/event-stream' }
  const envelope = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} }
  return {
    legacy: rawPost(agent, `${gw}/mcp?mcp=echo`, { ...accept, 'mcp-protocol-version': '2025-06-18' },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo__echo', arguments: { text: 'hello' } } }),
    modern: rawPost(agent, `${gw}/mcp?mcp=echom`, { ...accept, 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': 'echom__echo' },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echom__echo', arguments: { text: 'hello' }, _meta: envelope } }),
    invoke: rawPost(agent, `${gw}/invoke`, {}, { name: 'echo__echo', arguments: { text: 'hello' } }),
    invokeModern: rawPost(agent, `${gw}/invoke`, {}, { name: 'echom__echo', arguments: { text: 'hello' } })
  }
}

/** Gateway CPU (us per call) and p50 (ms) of each raw call, in interleaved blocks at concurrency 1. */
async function rawShare (ctx: BenchContext, pid: number, calls: Record<string, () => Promise<void>>): Promise<Record<string, { us: number, p50: number }>> {
  const cpu = Object.fromEntries(Object.keys(calls).map((k) => [k, { ms: 0, n: 0, times: [] as number[] }]))
  for (const call of Object.values(calls)) for (let i = 0; i < 100; i++) await call()
  for (let round = 0; round < RAW_ROUNDS && !ctx.signal.aborted; round++) {
    for (const [name, call] of Object.entries(calls)) {
      const side = cpu[name]!
      const c0 = await cpuMs(pid)
      for (let i = 0; i < RAW_BLOCK; i++) {
        const t0 = performance.now()
        await call()
        side.times.push(performance.now() - t0)
      }
      side.ms += await cpuMs(pid) - c0
      side.n += RAW_BLOCK
    }
  }
  return Object.fromEntries(Object.entries(cpu).map(([k, v]) => [k, { us: 1000 * v.ms / Math.max(1, v.n), p50: median(v.times) }]))
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const legacy = await startMcpServers(ctx, 1, 'fixture')
  const modern = await startMcpServers(ctx, 1, 'modern')
  const gw = await startGateway(ctx, gatewayEnv(ctx, { EGRESS_ALLOW: '127.0.0.1/32' }))
  await httpOk('PUT', `${gw.url}/mcp/servers/echo`, { type: 'streamable_http', url: legacy.urls[0] })
  await httpOk('PUT', `${gw.url}/mcp/servers/echom`, { type: 'streamable_http', url: modern.urls[0] })

  const fns: Record<'legacyMcp' | 'legacyDirect' | 'modernMcp' | 'modernDirect' | 'invoke', () => Promise<void>> = {
    legacyMcp: echoVia(await connectClient(ctx, `${gw.url}/mcp?mcp=echo`), 'echo__echo'),
    legacyDirect: echoVia(await connectClient(ctx, legacy.urls[0] as string), 'echo'),
    modernMcp: echoVia(await connectV2(ctx, `${gw.url}/mcp?mcp=echom`), 'echom__echo'),
    modernDirect: echoVia(await connectV2(ctx, modern.urls[0] as string), 'echo'),
    invoke: async () => {
      const r = await http('POST', `${gw.url}/invoke`, { name: 'echo__echo', arguments: { text: 'hello' } })
      if (r.status !== 200 || !r.body.includes(':hello"')) throw new Error(`POST /invoke answered ${r.status}: ${r.body.slice(0, 300)}`)
    }
  }
  for (const fn of Object.values(fns)) await fn()

  // --- concurrency 16: throughput, per era --------------------------------------------------------
  // CPU of each process in the timed rounds: the gateway, this process (the SDK client loops), the legacy echo server.
  const zero = (): Cpu => ({ ms: 0, clientMs: 0, serverMs: 0, calls: 0 })
  const cpu = { legacyMcp: zero(), legacyDirect: zero(), modernMcp: zero(), invoke: zero() }
  const counted = (side: keyof typeof cpu, fn: (seconds: number) => Promise<LoadResult>) => async (seconds: number, warmup: boolean): Promise<LoadResult> => {
    const [g0, s0, c0] = [await cpuMs(gw.pid), await cpuMs(legacy.child.pid), process.cpuUsage()]
    const r = await fn(seconds)
    if (!warmup) {
      const c = process.cpuUsage(c0)
      cpu[side].clientMs += (c.user + c.system) / 1000
      cpu[side].ms += await cpuMs(gw.pid) - g0
      cpu[side].serverMs += await cpuMs(legacy.child.pid) - s0
      cpu[side].calls += r.requests
    }
    return r
  }
  const loop = (call: () => Promise<void>) => async (seconds: number): Promise<LoadResult> => await closedLoop(call, C, seconds)
  const rounds = { warmupSeconds: 2, seconds: SECONDS, rounds: ROUNDS }
  const legacyLoad = await loadInterleaved(ctx, {
    mcp: counted('legacyMcp', loop(fns.legacyMcp)),
    invoke: counted('invoke', async (seconds) => await load({
      url: `${gw.url}/invoke`, method: 'POST', body: JSON.stringify({ name: 'echo__echo', arguments: { text: 'hello' } }), connections: C, seconds
    })),
    direct: counted('legacyDirect', loop(fns.legacyDirect))
  }, rounds)
  const modernLoad = await loadInterleaved(ctx, { mcp: counted('modernMcp', loop(fns.modernMcp)), direct: loop(fns.modernDirect) }, rounds)
  const rps = (rs: LoadResult[]): number => median(rs.map((r) => r.rps))
  const bad = [...Object.values(legacyLoad), ...Object.values(modernLoad)].flat().reduce((a, r) => a + r.non2xx + r.errors, 0)
  const usPerCall = (side: keyof typeof cpu, of: keyof Cpu = 'ms'): number => 1000 * cpu[side][of] / Math.max(1, cpu[side].calls)
  // 2.5i: the rounds are CPU-bound on the host's cores, so the throughput ratio is the direct path's CPU per call over the
  // gateway path's; with the gateway at its POST /invoke cost per call, that is the ratio a /mcp as cheap as /invoke would reach.
  const directUs = usPerCall('legacyDirect', 'clientMs') + usPerCall('legacyDirect', 'serverMs')
  const mcpOthersUs = usPerCall('legacyMcp', 'clientMs') + usPerCall('legacyMcp', 'serverMs')
  const cpuRatio = directUs / (mcpOthersUs + usPerCall('legacyMcp'))
  const ceiling = directUs / (mcpOthersUs + usPerCall('invoke'))

  // --- concurrency 1: added latency, everything interleaved ------------------------------------------
  const c1 = await timeInterleaved(fns, { warmup: 200, reps: REPS, signal: ctx.signal })
  const p50 = Object.fromEntries(Object.entries(c1).map(([k, v]) => [k, median(v as number[])])) as Record<keyof typeof fns, number>
  const p99 = (k: keyof typeof fns): number => percentile(c1[k], 99)
  const agent = new Agent({ keepAliveTimeout: 60_000, connections: 1 })
  ctx.defer(async () => { await agent.close() })
  const raw = await rawShare(ctx, gw.pid, rawCalls(agent, gw.url))
  ctx.log(`raw c=1 gateway CPU per call: legacy /mcp ${round(raw.legacy!.us)} vs /invoke ${round(raw.invoke!.us)} us; ` +
    `2026-07-28 /mcp ${round(raw.modern!.us)} vs /invoke ${round(raw.invokeModern!.us)} us`)
  ctx.log(`c=1 p50: legacy /mcp ${round(p50.legacyMcp)} vs ${round(p50.legacyDirect)} ms; 2026-07-28 /mcp ${round(p50.modernMcp)} vs ${round(p50.modernDirect)} ms; /invoke ${round(p50.invoke)} ms`)
  const loadNotes = (mcp: LoadResult[], direct: LoadResult[]): string =>
    `${C} SDK callTool loops each side, median of ${mcp.length} interleaved ${SECONDS} s rounds; p50 ${round(median(mcp.map((r) => r.p50)))} vs ${round(median(direct.map((r) => r.p50)))} ms`
  const rpsDetail = (mcp: LoadResult[], direct: LoadResult[]): Record<string, string> =>
    ({ gatewayRps: mcp.map((r) => round(r.rps)).join(' '), directRps: direct.map((r) => round(r.rps)).join(' ') })
  const errNote = bad > 0 ? `; ${bad} errors` : ''

  return [
    makeRow({
      id: '2.5',
      name: 'the gateway\'s /mcp (legacy, SDK v1 client -> /mcp?mcp=echo -> echo server) vs the SDK client directly: latency at concurrency 1',
      metric: 'p50 ms',
      value: p50.legacyMcp,
      baseline: p50.legacyDirect,
      target: { on: 'delta', op: '<', limit: 0.5 },
      notes: `added p50 ${round(p50.legacyMcp - p50.legacyDirect)} ms (POST /invoke of the same call, 2.5e: ${round(p50.invoke - p50.legacyDirect)} ms); p99 ${round(p99('legacyMcp'))} vs ${round(p99('legacyDirect'))} ms; n=${c1.legacyMcp.length} interleaved, after the rounds of 2.5b`,
      detail: { addedP50: round(p50.legacyMcp - p50.legacyDirect), invokeAddedP50: round(p50.invoke - p50.legacyDirect) }
    }),
    makeRow({
      id: '2.5b',
      name: 'the same (legacy /mcp) at concurrency 16: throughput',
      metric: 'req/s',
      value: rps(legacyLoad.mcp),
      baseline: rps(legacyLoad.direct),
      target: { on: 'ratio', op: '>=', limit: 0.85 },
      notes: `${loadNotes(legacyLoad.mcp, legacyLoad.direct)}; gateway CPU ${round(usPerCall('legacyMcp'))} us per call (POST /invoke: ${round(usPerCall('invoke'))} us)${errNote}`,
      detail: { ...rpsDetail(legacyLoad.mcp, legacyLoad.direct), gatewayCpuUsPerCall: round(usPerCall('legacyMcp')) }
    }),
    makeRow({
      id: '2.5c',
      name: 'the gateway\'s /mcp in 2026-07-28 (SDK v2 client pinned -> /mcp?mcp=echom -> a 2026-07-28 echo server) vs the same client directly: latency at concurrency 1',
      metric: 'p50 ms',
      value: p50.modernMcp,
      baseline: p50.modernDirect,
      target: { on: 'delta', op: '<', limit: 0.5 },
      notes: `added p50 ${round(p50.modernMcp - p50.modernDirect)} ms; p99 ${round(p99('modernMcp'))} vs ${round(p99('modernDirect'))} ms; the same interleaved calls as 2.5`,
      detail: { addedP50: round(p50.modernMcp - p50.modernDirect) }
    }),
    makeRow({
      id: '2.5d',
      name: 'the same (2026-07-28 /mcp) at concurrency 16: throughput',
      metric: 'req/s',
      value: rps(modernLoad.mcp),
      baseline: rps(modernLoad.direct),
      target: { on: 'ratio', op: '>=', limit: 0.85 },
      notes: `${loadNotes(modernLoad.mcp, modernLoad.direct)}; gateway CPU ${round(usPerCall('modernMcp'))} us per call${errNote}`,
      detail: { ...rpsDetail(modernLoad.mcp, modernLoad.direct), gatewayCpuUsPerCall: round(usPerCall('modernMcp')) }
    }),
    makeRow({
      id: '2.5e',
      name: 'the floor of 2.5: POST /invoke of the same call on the same gateway, same interleaved calls: latency at concurrency 1',
      metric: 'p50 ms',
      value: p50.invoke,
      baseline: p50.legacyDirect,
      target: null,
      notes: `added p50 ${round(p50.invoke - p50.legacyDirect)} ms; what the gateway costs without its MCP server side (undici keep-alive client); p99 ${round(p99('invoke'))} ms`,
      detail: { addedP50: round(p50.invoke - p50.legacyDirect) }
    }),
    makeRow({
      id: '2.5f',
      name: 'the floor of 2.5b: POST /invoke of the same call at concurrency 16 (autocannon), same rounds',
      metric: 'req/s',
      value: rps(legacyLoad.invoke),
      baseline: rps(legacyLoad.direct),
      target: null,
      notes: `autocannon ${C} connections in the rounds of 2.5b; gateway CPU ${round(usPerCall('invoke'))} us per call`,
      detail: { gatewayRps: legacyLoad.invoke.map((r) => round(r.rps)).join(' ') }
    }),
    makeRow({
      id: '2.5g',
      name: 'the gateway\'s own share of 2.5: its CPU per call at concurrency 1 with the same raw client (undici) on legacy /mcp and on POST /invoke',
      metric: 'us/call',
      value: raw.legacy!.us,
      baseline: raw.invoke!.us,
      target: null,
      notes: `${RAW_ROUNDS} interleaved blocks of ${RAW_BLOCK} calls per route, after the rows above; p50 ${round(raw.legacy!.p50)} vs ${round(raw.invoke!.p50)} ms with that client`,
      detail: { p50: round(raw.legacy!.p50), invokeP50: round(raw.invoke!.p50) }
    }),
    makeRow({
      id: '2.5h',
      name: 'the same for 2026-07-28 /mcp (the same raw client, its envelope and headers) vs POST /invoke of the same call (the 2026-07-28 server upstream)',
      metric: 'us/call',
      value: raw.modern!.us,
      baseline: raw.invokeModern!.us,
      target: null,
      notes: `the blocks of 2.5g; p50 ${round(raw.modern!.p50)} vs ${round(raw.invokeModern!.p50)} ms with that client`,
      detail: { p50: round(raw.modern!.p50), invokeP50: round(raw.invokeModern!.p50) }
    }),
    makeRow({
      id: '2.5i',
      name: 'the floor of 2.5b: the throughput ratio a /mcp costing the gateway what POST /invoke does would reach, from the CPU per call of each process in the rounds of 2.5b',
      metric: 'ratio',
      value: ceiling,
      baseline: null,
      target: null,
      notes: `CPU per call, us: direct: SDK client ${round(usPerCall('legacyDirect', 'clientMs'))} + echo server ${round(usPerCall('legacyDirect', 'serverMs'))}; ` +
        `through /mcp: SDK client ${round(usPerCall('legacyMcp', 'clientMs'))} + gateway ${round(usPerCall('legacyMcp'))} + echo server ${round(usPerCall('legacyMcp', 'serverMs'))}; ` +
        `POST /invoke's gateway ${round(usPerCall('invoke'))}; the CPU ratio ${round(cpuRatio)} against the measured ${round(rps(legacyLoad.mcp) / rps(legacyLoad.direct))} says how CPU-bound the rounds are; ` +
        `0.85x would need the gateway under ${round(directUs / 0.85 - mcpOthersUs)} us per call`,
      detail: { cpuRatio: round(cpuRatio), directUs: round(directUs), mcpOthersUs: round(mcpOthersUs) }
    })
  ]
}

/** CPU ms in the timed rounds of one side: the gateway's, this process's (the client), the echo server's. */
interface Cpu { ms: number, clientMs: number, serverMs: number, calls: number }
