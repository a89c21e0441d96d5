/**
 * Row 16: the cost of the invocation journal. POST /invoke of the trivial function tool
 * (bench_echo, bench/fixtures/functions) through gateways that differ only in JOURNAL (full vs
 * off), loaded in interleaved rounds; the figure is server CPU time per request (/proc), steadier
 * than req/s on a shared machine. With Redis reachable (BENCH_REDIS_URL, default
 * redis://127.0.0.1:6379) the same pair runs on Redis Streams too.
 *
 * 16.4: what the journal pays to mask a stored output (JOURNAL=full masks every call's output, up
 * to 16 KiB, after the response), in process: the secret detector over 12 KB of a real project's
 * README (picomatch's, the replay fixture: prose, code blocks, links) vs JSON.stringify of the same
 * text (what storing it costs unmasked), alternating rounds; the notes give 12 KB of its source.
 */
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import { maskText } from '../src/secrets/detector.js'
import { deleteKeys, redisReachable } from '../scripts/lib/redis-keys.js'
import { closeHttp, cpuMs, gatewayEnv, httpOk, load, loadInterleaved, REPO_ROOT, startGateway } from './fixtures/procs.js'
import type { LoadResult } from './fixtures/procs.js'
import { cpuPerCall, makeRow, median, round } from './stats.js'
import type { BenchContext, Row } from './types.js'

const CONNECTIONS = 10
const SECONDS = 4
const ROUNDS = 4
// Row 1's request: the journal's cost on the cheapest call there is.
const BODY = JSON.stringify({ name: 'bench_echo', arguments: { text: 'hello' }, callId: 'call_bench' })
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  const functions = path.join(REPO_ROOT, 'bench/fixtures/functions')
  const withRedis = await redisReachable(REDIS_URL)
  const prefix = `tg-bench-journal-${process.pid}:`
  if (withRedis) ctx.defer(async () => await deleteKeys(prefix, REDIS_URL))
  const variants: Record<string, Record<string, string>> = {
    'memory-full': { FUNCTIONS_DIR: functions, JOURNAL: 'full' },
    'memory-off': { FUNCTIONS_DIR: functions, JOURNAL: 'off' },
    ...(withRedis
      ? {
          'redis-full': { FUNCTIONS_DIR: functions, JOURNAL: 'full', REDIS_URL, REDIS_KEY_PREFIX: prefix },
          'redis-off': { FUNCTIONS_DIR: functions, JOURNAL: 'off', REDIS_URL, REDIS_KEY_PREFIX: prefix }
        }
      : {})
  }
  const cpu: Record<string, { ms: number, requests: number }> = {}
  const targets: Record<string, (seconds: number) => Promise<LoadResult>> = {}
  for (const [name, env] of Object.entries(variants)) {
    const gw = await startGateway(ctx, gatewayEnv(ctx, env), name)
    const answer = await httpOk('POST', `${gw.url}/invoke`, JSON.parse(BODY)) as Record<string, unknown>
    if (answer.output !== 'hello' || answer.isError !== false) throw new Error(`unexpected answer ${JSON.stringify(answer)}`)
    const acc = cpu[name] = { ms: 0, requests: 0 }
    targets[name] = async (seconds) => {
      const c0 = await cpuMs(gw.pid)
      const r = await load({ url: `${gw.url}/invoke`, method: 'POST', body: BODY, connections: CONNECTIONS, seconds })
      acc.ms += await cpuMs(gw.pid) - c0
      acc.requests += r.requests + r.non2xx
      return r
    }
  }
  ctx.log(`${Object.keys(variants).join(', ')}; ${CONNECTIONS} connections, ${ROUNDS} x ${SECONDS} s each`)
  const res = await loadInterleaved(ctx, targets, { warmupSeconds: 2, seconds: SECONDS, rounds: ROUNDS })
  const us = (name: string): number => 1000 * (cpu[name]?.ms ?? 0) / Math.max(1, cpu[name]?.requests ?? 0)
  const rps = (name: string): number => median((res[name] ?? []).map((r) => r.rps))
  const bad = (name: string): number => (res[name] ?? []).reduce((a, r) => a + r.non2xx + r.errors, 0)
  const row = (id: string, backend: string, full: string, off: string): Row => makeRow({
    id,
    name: `POST /invoke of a trivial function, JOURNAL=full vs JOURNAL=off (${backend}): server CPU per request`,
    metric: 'us/req',
    value: us(full),
    baseline: us(off),
    target: { on: 'ratio', op: '<=', limit: 1.15 },
    notes: `all rounds and warm-ups; ${CONNECTIONS} connections, ${res[full]?.length ?? 0} interleaved ${SECONDS} s rounds; median req/s ${Math.round(rps(full))} vs ${Math.round(rps(off))}${bad(full) + bad(off) > 0 ? `; ${bad(full) + bad(off)} non-2xx/errors` : ''}`,
    detail: { requestsFull: cpu[full]?.requests ?? 0, requestsOff: cpu[off]?.requests ?? 0 }
  })
  const rows = [row('16.1', 'memory ring', 'memory-full', 'memory-off')]
  if (withRedis) rows.push(row('16.2', 'Redis Streams', 'redis-full', 'redis-off'))
  else rows.push(makeRow({ id: '16.2', name: 'the same on Redis Streams', metric: '-', value: null, baseline: null, target: null, notes: `no Redis at ${REDIS_URL}` }))
  rows.push(await maskingRow(ctx))
  return rows
}

async function maskingRow (ctx: BenchContext): Promise<Row> {
  const fixture = path.join(REPO_ROOT, 'bench/fixtures/replay/picomatch')
  const readme = (await readFile(path.join(fixture, 'README.md'), 'utf8')).slice(0, 12_000)
  const source = (await readFile(path.join(fixture, 'lib/parse.js'), 'utf8')).slice(0, 12_000)
  // Warm-up: the detector's patterns and functions compiled before the first timed round.
  for (let i = 0; i < 2000 && !ctx.signal.aborted; i++) { maskText(readme); maskText(source); JSON.stringify(readme) }
  const masked: number[] = []
  const stringified: number[] = []
  const code: number[] = []
  for (let r = 0; r < 9 && !ctx.signal.aborted; r++) {
    masked.push(await cpuPerCall(200, () => maskText(readme)))
    stringified.push(await cpuPerCall(200, () => JSON.stringify(readme)))
    code.push(await cpuPerCall(200, () => maskText(source)))
  }
  return makeRow({
    id: '16.4',
    name: 'the journal\'s masking of a stored output: the secret detector over 12 KB of a project\'s README vs JSON.stringify of it',
    metric: 'CPU us/call (median of 9 x 200)',
    value: round(median(masked)),
    baseline: round(median(stringified)),
    target: null,
    notes: `in process, alternating rounds; bench/fixtures/replay/picomatch/README.md, its first ${readme.length} characters; ` +
      `12 KB of its lib/parse.js: ${round(median(code))} us; runs ${masked.map(round).join(', ')}`
  })
}
