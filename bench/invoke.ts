/**
 * Row 1: POST /invoke of a local function tool (bench_echo, bench/fixtures/functions)
 * through the real gateway process vs a bare Fastify process (same logger level, timeouts,
 * request ids) answering the same JSON on the same route. Both are loaded with autocannon from
 * this process, in interleaved rounds after a warm-up.
 *
 * 1.5: the cost of tracing (SPEC 18, issue 34): a third gateway, the same but for an OTLP endpoint
 * (OTEL_EXPORTER_OTLP_ENDPOINT, the default http/protobuf) on a loopback receiver in this process
 * that accepts every export and discards it, loaded in the same interleaved rounds; its CPU per
 * request beside 1.4's gateway, whose tracing is off (no OTEL_* variable set).
 *
 * 1.4b: a fourth gateway, the same but for JOURNAL=off, in the same rounds: what 1.4 is without the
 * invocation journal (on by default, JOURNAL=full; its own cost is row 16.1's target), so a miss of
 * 1.4 is split, in the run that measured it, between the journal and the rest of the request path.
 */
import { createServer } from 'node:http'
import path from 'node:path'
import {
  closeHttp,
  cpuMs,
  GATEWAY_RUN,
  gatewayEnv,
  httpOk,
  load,
  loadInterleaved,
  LOG_LEVEL,
  pinServers,
  REPO_ROOT,
  startBareFastify,
  startGateway
} from './fixtures/procs.js'
import type { LoadResult } from './fixtures/procs.js'
import { makeRow, median, round } from './stats.js'
import type { BenchContext, Row } from './types.js'

const CONNECTIONS = 10
const SECONDS = 4
const ROUNDS = 4
const BODY = JSON.stringify({ name: 'bench_echo', arguments: { text: 'hello' }, callId: 'call_bench' })

function summary (rs: readonly LoadResult[]): { rps: number, p50: number, p99: number, n: number, bad: number } {
  return {
    rps: median(rs.map((r) => r.rps)),
    p50: median(rs.map((r) => r.p50)),
    p99: median(rs.map((r) => r.p99)),
    n: rs.reduce((a, r) => a + r.requests, 0),
    bad: rs.reduce((a, r) => a + r.non2xx + r.errors, 0)
  }
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const gw = await startGateway(ctx, gatewayEnv(ctx, { FUNCTIONS_DIR: path.join(REPO_ROOT, 'bench/fixtures/functions') }))
  const answer = await httpOk('POST', `${gw.url}/invoke`, JSON.parse(BODY)) as Record<string, unknown>
  if (answer.output !== 'hello' || answer.isError !== false) throw new Error(`unexpected answer ${JSON.stringify(answer)}`)

  const bare = await startBareFastify(ctx, { BARE_RESPONSE: JSON.stringify(answer) })
  const bareUrl = bare.url
  const otlp = await startOtlpSink(ctx)
  const traced = await startGateway(ctx, gatewayEnv(ctx, {
    FUNCTIONS_DIR: path.join(REPO_ROOT, 'bench/fixtures/functions'),
    WORKSPACES_DIR: path.join(ctx.tmpDir, 'workspaces-traced'),
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    // Every span exported, none dropped for a full queue at this rate (the SDK's default queue is 2048 spans).
    OTEL_BSP_SCHEDULE_DELAY: '500',
    OTEL_BSP_MAX_QUEUE_SIZE: '65536',
    OTEL_BSP_MAX_EXPORT_BATCH_SIZE: '4096'
  }), 'gateway-traced')
  await httpOk('POST', `${traced.url}/invoke`, JSON.parse(BODY))
  const unjournaled = await startGateway(ctx, gatewayEnv(ctx, {
    FUNCTIONS_DIR: path.join(REPO_ROOT, 'bench/fixtures/functions'),
    WORKSPACES_DIR: path.join(ctx.tmpDir, 'workspaces-unjournaled'),
    JOURNAL: 'off'
  }), 'gateway-unjournaled')
  await httpOk('POST', `${unjournaled.url}/invoke`, JSON.parse(BODY))
  const unpin = pinServers([gw.pid, bare.pid, traced.pid, unjournaled.pid])
  if (unpin !== undefined) ctx.defer(unpin)
  const pinned = unpin !== undefined ? 'the servers pinned to CPU 0, load generator on the others' : 'not pinned (no taskset or 1 CPU)'
  ctx.log(`gateway pid ${gw.pid} (${GATEWAY_RUN}), bare Fastify pid ${bare.pid}, traced gateway pid ${traced.pid}, ` +
    `JOURNAL=off gateway pid ${unjournaled.pid}; ${CONNECTIONS} connections, ${ROUNDS} x ${SECONDS} s each; ${pinned}`)

  // CPU time of each server per request (from /proc): steadier than req/s on a shared machine.
  const cpu = { gateway: { ms: 0, requests: 0 }, bare: { ms: 0, requests: 0 }, traced: { ms: 0, requests: 0 }, unjournaled: { ms: 0, requests: 0 } }
  // The timed rounds only: a warm-up is there to be left out (JIT compilation is the gateway's larger share of it).
  const target = (url: string, pid: number, acc: { ms: number, requests: number }) => async (seconds: number, warmup: boolean) => {
    const c0 = await cpuMs(pid)
    const r = await load({ url: `${url}/invoke`, method: 'POST', body: BODY, connections: CONNECTIONS, seconds })
    if (!warmup) {
      acc.ms += await cpuMs(pid) - c0
      acc.requests += r.requests + r.non2xx
    }
    return r
  }
  const res = await loadInterleaved(
    ctx,
    {
      gateway: target(gw.url, gw.pid, cpu.gateway),
      bare: target(bareUrl, bare.pid, cpu.bare),
      traced: target(traced.url, traced.pid, cpu.traced),
      unjournaled: target(unjournaled.url, unjournaled.pid, cpu.unjournaled)
    },
    { warmupSeconds: 2, seconds: SECONDS, rounds: ROUNDS }
  )
  const usGw = 1000 * cpu.gateway.ms / cpu.gateway.requests
  const usBare = 1000 * cpu.bare.ms / cpu.bare.requests
  const usTraced = 1000 * cpu.traced.ms / cpu.traced.requests
  const usUnjournaled = 1000 * cpu.unjournaled.ms / cpu.unjournaled.requests
  const t = summary(res.traced)
  const g = summary(res.gateway)
  const b = summary(res.bare)
  const common = `${CONNECTIONS} connections, median of ${res.gateway.length} interleaved ${SECONDS} s rounds; LOG_LEVEL=${LOG_LEVEL} both; gateway ${GATEWAY_RUN === 'dist' ? 'production build (node dist/src/server.js)' : 'under tsx (npm start)'}; ${pinned}`
  const bad = g.bad + b.bad > 0 ? `; ${g.bad} non-2xx/errors (bare ${b.bad})` : ''
  const rows = [
    makeRow({
      id: '1.1',
      name: 'POST /invoke of a local function vs a bare Fastify route (same JSON): throughput',
      metric: 'req/s',
      value: g.rps,
      baseline: b.rps,
      target: { on: 'ratio', op: '>=', limit: 0.5 },
      notes: `${common}; ${g.n} + ${b.n} requests${bad}; see 1.4 for CPU per request`,
      detail: {
        connections: CONNECTIONS,
        seconds: SECONDS,
        rounds: res.gateway.length,
        gatewayRps: res.gateway.map((r) => round(r.rps)).join(' '),
        bareRps: res.bare.map((r) => round(r.rps)).join(' ')
      }
    }),
    makeRow({
      id: '1.4',
      name: 'the same, server CPU time per request (user + system, /proc)',
      metric: 'us/req',
      value: usGw,
      baseline: usBare,
      target: { on: 'ratio', op: '<=', limit: 1.5 },
      notes: `the timed rounds of 1.1 (warm-ups left out); ratio ${round(usBare / usGw)} is the throughput ratio a CPU-bound server would reach; ` +
        `the gateway's journal (JOURNAL=full, the default) is ${round(usGw - usUnjournaled)} us of it (1.4b)`
    }),
    makeRow({
      id: '1.4b',
      name: 'the same gateway with JOURNAL=off vs the bare route: server CPU time per request (1.4 without the invocation journal)',
      metric: 'us/req',
      value: usUnjournaled,
      baseline: usBare,
      target: null,
      notes: `interleaved with 1.1's rounds (warm-ups left out); 1.4's gateway is ${round(usGw / usUnjournaled)}x this one (the journal's own target is 16.1's)`
    }),
    makeRow({
      id: '1.5',
      name: 'the same gateway with tracing on (OTLP/HTTP protobuf to a loopback receiver that discards) vs off: server CPU time per request',
      metric: 'us/req',
      value: usTraced,
      baseline: usGw,
      target: null,
      notes: 'interleaved with 1.1\'s rounds (warm-ups left out); off is 1.4\'s gateway (no OTEL_* set: no span, no hook); on: every request sampled, ' +
        `a server and a tool-call span each, batched (OTEL_BSP_SCHEDULE_DELAY 500 ms, queue 65536); ${otlp.stats.posts} exports, ` +
        `${round(otlp.stats.bytes / 1048576)} MiB received in all (warm-ups too); ${t.n} timed requests, ${round(t.rps)} req/s vs ${round(g.rps)}`
    }),
    makeRow({
      id: '1.2',
      name: 'the same, latency p50',
      metric: 'p50 ms',
      value: g.p50,
      baseline: b.p50,
      target: null,
      notes: `under the load of 1.1 (${CONNECTIONS} connections)`
    }),
    makeRow({
      id: '1.3',
      name: 'the same, latency p99',
      metric: 'p99 ms',
      value: g.p99,
      baseline: b.p99,
      target: null,
      notes: `under the load of 1.1 (${CONNECTIONS} connections)`
    })
  ]
  return rows.sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }))
}

/** An OTLP/HTTP receiver on loopback that answers every export with 200 and an empty body (an empty ExportTraceServiceResponse). */
async function startOtlpSink (ctx: BenchContext): Promise<{ url: string, stats: { posts: number, bytes: number } }> {
  const stats = { posts: 0, bytes: 0 }
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => { stats.bytes += chunk.length })
    req.on('end', () => {
      stats.posts++
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  ctx.defer(async () => await new Promise<void>((resolve) => server.close(() => resolve())))
  const address = server.address()
  if (address === null || typeof address !== 'object') throw new Error('the OTLP sink listens on no port')
  return { url: `http://127.0.0.1:${address.port}`, stats }
}
