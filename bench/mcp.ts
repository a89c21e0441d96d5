/**
 * Row 2: POST /invoke of the `echo` tool of a streamable-HTTP MCP
 * fixture server (its own process) through the real gateway process vs the SDK client calling
 * the same server directly, from this process:
 * - 2.2 throughput at concurrency 32 (autocannon with 32 connections vs 32 closed loops of
 *   SDK callTool), interleaved rounds; 2.3 / 2.3b CPU per call in the same rounds;
 * - then 2.1 added p50 latency at concurrency 1 (interleaved single calls; the gateway is called
 *   with a keep-alive undici client, the server directly with the SDK client), and 2.1b its
 *   floor: a bare Fastify proxy (bench/fixtures/bare-fastify.ts, BARE_MCP_URL) in the same calls.
 */
import { callEcho, closedLoop, connectClient } from './fixtures/mcp-client.js'
import { closeHttp, cpuMs, gatewayEnv, http, httpOk, load, loadInterleaved, startBareFastify, startGateway, startMcpServers } from './fixtures/procs.js'
import { makeRow, median, percentile, round, timeInterleaved } from './stats.js'
import type { LoadResult } from './fixtures/procs.js'
import type { BenchContext, Row } from './types.js'

const C = 32
const SECONDS = 4
const ROUNDS = 3

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const { urls, child: fixture } = await startMcpServers(ctx, 1, 'fixture')
  const serverUrl = urls[0] as string
  const gw = await startGateway(ctx, gatewayEnv(ctx))
  await httpOk('PUT', `${gw.url}/mcp/servers/echo`, { type: 'streamable_http', url: serverUrl })
  const body = { name: 'echo__echo', arguments: { text: 'hello' } }
  const bodyText = JSON.stringify(body)
  // POST /invoke of echo on the gateway or on the bare proxy of 2.1b; throws unless it echoed.
  const invokeVia = (url: string, who: string) => async (): Promise<void> => {
    const r = await http('POST', `${url}/invoke`, body)
    if (r.status !== 200 || !r.body.includes('"output":"m0:hello"')) throw new Error(`${who} answered ${r.status}: ${r.body.slice(0, 300)}`)
  }
  const viaGateway = invokeVia(gw.url, 'gateway')
  await viaGateway()
  const client = await connectClient(ctx, serverUrl)
  const direct = async (): Promise<void> => { await callEcho(client, 'hello') }
  await direct()

  // --- concurrency 32: throughput -----------------------------------------------------------------
  // CPU of every process involved (this one: load generator or SDK client; the gateway; the
  // fixture server), per call: a throughput-independent view of the same rounds.
  const total = { gateway: { cpu: 0, calls: 0, own: 0 }, direct: { cpu: 0, calls: 0, own: 0 } }
  const measured = async (side: 'gateway' | 'direct', fn: () => Promise<LoadResult>): Promise<LoadResult> => {
    const self0 = process.cpuUsage()
    const [g0, f0] = [await cpuMs(gw.pid), await cpuMs(fixture.pid)]
    const r = await fn()
    const self = process.cpuUsage(self0)
    const gw1 = await cpuMs(gw.pid) - g0
    total[side].cpu += (self.user + self.system) / 1000 + gw1 + (await cpuMs(fixture.pid) - f0)
    // The side's own middle: the gateway process, or this process as the direct SDK client.
    total[side].own += side === 'gateway' ? gw1 : (self.user + self.system) / 1000
    total[side].calls += r.requests
    return r
  }
  const res = await loadInterleaved(ctx, {
    gateway: async (seconds) => await measured('gateway', async () => await load({ url: `${gw.url}/invoke`, method: 'POST', body: bodyText, connections: C, seconds })),
    direct: async (seconds) => await measured('direct', async () => await closedLoop(direct, C, seconds))
  }, { warmupSeconds: 2, seconds: SECONDS, rounds: ROUNDS })
  const gwCpu = total.gateway.own
  const gwCalls = total.gateway.calls
  const gRps = median(res.gateway.map((r) => r.rps))
  const dRps = median(res.direct.map((r) => r.rps))
  const bad = [...res.gateway, ...res.direct].reduce((a, r) => a + r.non2xx + r.errors, 0)

  // --- concurrency 1: added latency ---------------------------------------------------------------
  // After the rounds above: at one call at a time the gateway's code takes thousands of calls to
  // reach its optimised tiers (measured: ~1.2 ms of gateway CPU per call over the first 3,000
  // calls, ~0.7 ms over the next 3,000), and a production gateway runs warm. The floor runs in the
  // same interleaved calls: a bare Fastify route calling the same server with the SDK Client over
  // the gateway's lean transport, i.e. one more HTTP hop and an MCP client without the gateway.
  const bare = await startBareFastify(ctx, { BARE_MCP_URL: serverUrl })
  const viaBare = invokeVia(bare.url, 'bare proxy')
  await viaBare()
  // As warm as the gateway and the direct client after the rounds above.
  await load({ url: `${bare.url}/invoke`, method: 'POST', body: bodyText, connections: C, seconds: 2 * SECONDS })
  const [g0, b0] = [await cpuMs(gw.pid), await cpuMs(bare.pid)]
  const c1 = await timeInterleaved({ gateway: viaGateway, bare: viaBare, direct }, { warmup: 200, reps: 1500, signal: ctx.signal })
  const calls = c1.gateway.length + 200
  const gwUsPerCall = 1000 * (await cpuMs(gw.pid) - g0) / calls
  const bareUsPerCall = 1000 * (await cpuMs(bare.pid) - b0) / calls
  const gP50 = median(c1.gateway)
  const bP50 = median(c1.bare)
  const dP50 = median(c1.direct)
  ctx.log(`c=1: gateway p50 ${round(gP50)} ms, bare proxy ${round(bP50)} ms, direct ${round(dP50)} ms (n=${c1.gateway.length})`)
  // At one call at a time every call wakes idle processes: CPU per call is several times what it
  // is under load (2.3b), for the bare proxy as much as for the gateway.
  const c1Cpu = `CPU per call at concurrency 1 (idle wake-ups included): gateway ${round(gwUsPerCall)} us, bare proxy ${round(bareUsPerCall)} us`

  return [
    makeRow({
      id: '2.1',
      name: 'POST /invoke of a streamable-HTTP MCP echo vs the SDK client directly: latency at concurrency 1',
      metric: 'p50 ms',
      value: gP50,
      baseline: dP50,
      target: { on: 'delta', op: '<', limit: 0.5 },
      notes: `added p50 ${round(gP50 - dP50)} ms (the bare proxy of 2.1b: ${round(bP50 - dP50)} ms); p99 ${round(percentile(c1.gateway, 99))} vs ${round(percentile(c1.direct, 99))} ms; ${c1Cpu}; n=${c1.gateway.length} interleaved, after the rounds of 2.2`,
      detail: {
        gatewayCpuUsPerCall: round(gwUsPerCall),
        addedP50: round(gP50 - dP50),
        p99: round(percentile(c1.gateway, 99)),
        baselineP99: round(percentile(c1.direct, 99))
      }
    }),
    makeRow({
      id: '2.1b',
      name: 'the floor of 2.1: a bare Fastify route calling the same server (SDK Client over the lean transport), same interleaved calls',
      metric: 'p50 ms',
      value: bP50,
      baseline: dP50,
      target: null,
      notes: `added p50 ${round(bP50 - dP50)} ms: one more loopback HTTP hop and an MCP client, none of the gateway's work; the gateway's own share of 2.1 is ${round(gP50 - bP50)} ms; p99 ${round(percentile(c1.bare, 99))} ms`,
      detail: { addedP50: round(bP50 - dP50), gatewayOverBare: round(gP50 - bP50), bareCpuUsPerCall: round(bareUsPerCall) }
    }),
    makeRow({
      id: '2.2',
      name: 'the same at concurrency 32: throughput',
      metric: 'req/s',
      value: gRps,
      baseline: dRps,
      target: { on: 'ratio', op: '>=', limit: 0.85 },
      notes: `autocannon ${C} connections vs ${C} SDK callTool loops, median of ${res.gateway.length} interleaved ${SECONDS} s rounds; p50 ${round(median(res.gateway.map((r) => r.p50)))} vs ${round(median(res.direct.map((r) => r.p50)))} ms; gateway CPU ${round(1000 * gwCpu / gwCalls)} us per call${bad > 0 ? `; ${bad} errors` : ''}`,
      detail: { gatewayRps: res.gateway.map((r) => round(r.rps)).join(' '), directRps: res.direct.map((r) => round(r.rps)).join(' ') }
    }),
    makeRow({
      id: '2.3',
      name: 'the same rounds: CPU per call of all processes (client, gateway, MCP server)',
      metric: 'ms/call',
      value: total.gateway.cpu / total.gateway.calls,
      baseline: total.direct.cpu / total.direct.calls,
      target: null,
      notes: `gateway side = autocannon + gateway + fixture; direct = SDK client + fixture; the gateway process alone ${round(gwCpu / gwCalls)} ms/call; /proc and process.cpuUsage, 10 ms resolution`
    }),
    makeRow({
      id: '2.3b',
      name: 'the same rounds: CPU per call of the gateway process alone, vs the SDK client process calling directly',
      metric: 'ms/call',
      value: gwCpu / gwCalls,
      baseline: total.direct.own / total.direct.calls,
      target: { on: 'value', op: '<=', limit: 0.6 },
      notes: `baseline: this bench process as the direct SDK client (its own CPU, which the gateway replaces); /proc, 10 ms resolution; ${gwCalls} calls`
    })
  ]
}
