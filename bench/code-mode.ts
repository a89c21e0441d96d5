/**
 * Row 8: code mode (issue 33, SPEC 19). A task of CHAIN chained calls (each call's argument is the
 * previous call's result: `add({a: n, b: 1})` of the MCP fixture server, a tenant's streamable-HTTP
 * server registered through the REST API) done two ways in the same run, interleaved:
 * one POST /invoke of `run_tools_script` whose JavaScript makes the calls in the tenant's bwrap
 * sandbox, vs the same calls one by one through POST /invoke, the client computing each next argument.
 * - 8.1 wall time of the task, both ways. The gateway's side alone: the model's own turn per call,
 *   which is what code mode saves, is not counted (it would be seconds per call, not milliseconds);
 * - 8.2 bytes the model reads: the GET /tools listing (format openai) of the allow-list plus the
 *   outputs, vs the `mode=code` listing (run_tools_script and its typed API) plus the script's output;
 * - 8.3 code mode's overhead per inner call: (script of CHAIN calls - script of 0 calls) / CHAIN,
 *   medians, minus the median client-observed POST /invoke of the same tool (the one-by-one calls).
 */
import { chmod } from 'node:fs/promises'
import { closeHttp, cpuMs, gatewayEnv, http, httpOk, startGateway, startMcpServers } from './fixtures/procs.js'
import { makeRow, median, percentile, round, timeInterleaved, timeMs } from './stats.js'
import type { BenchContext, Row } from './types.js'

/** Calls in the task. */
const CHAIN = 20
/** Interleaved rounds (each: a CHAIN-call script, a 0-call script, CHAIN single POSTs): 23 POSTs a round. */
const REPS = 15
const WARMUP = 3
/** Further rounds of the two scripts alone, for 8.3 (2 POSTs a round). */
const MORE_REPS = 30
/** Tasks of each kind per CPU reading (after the timed rounds), and timed-inside scripts. About 550 POSTs in all. */
const CPU_REPS = 3
const USER = 'bench'
const SERVER = 'chain'
const ALLOW = { mcp: [SERVER] }
const CODE_ALLOW = { functions: ['@code'], mcp: [SERVER] }

interface InvokeAnswer { isError: boolean, output: string, trace?: { durationMs: number, calls: unknown[] } }

/** The next counter from an `add` output: the text (a number), or the structured `{sum}` if the gateway answers that. */
function counter (output: string): number {
  const v = JSON.parse(output) as unknown
  const n = typeof v === 'number' ? v : (v as { sum?: unknown } | null)?.sum
  if (typeof n !== 'number') throw new Error(`add answered ${output.slice(0, 200)}`)
  return n
}

/** The script: CHAIN (or `calls`) chained adds in JavaScript, the counter returned. */
function chainScript (tool: string, calls: number): string {
  return `let n = 0
for (let i = 0; i < ${calls}; i++) {
  const r = await tools[${JSON.stringify(tool)}]({ a: n, b: 1 })
  n = typeof r === 'number' ? r : r.sum
}
return n`
}

/** The same chain, each call timed inside the script: returns the CHAIN durations in ms. */
function timedScript (tool: string, calls: number): string {
  return `let n = 0
const ms = []
for (let i = 0; i < ${calls}; i++) {
  const t0 = performance.now()
  const r = await tools[${JSON.stringify(tool)}]({ a: n, b: 1 })
  ms.push(performance.now() - t0)
  n = typeof r === 'number' ? r : r.sum
}
if (n !== ${calls}) throw new Error('ended at ' + n)
return ms`
}

/** Bytes of what a model is handed of a listing: its `tools` array as JSON. */
async function listingBytes (url: string): Promise<{ bytes: number, names: string[] }> {
  const r = await httpOk('GET', url) as { tools: Array<{ name?: string, function?: { name: string } }>, unavailable?: unknown[] }
  if ((r.unavailable?.length ?? 0) > 0) throw new Error(`unavailable servers: ${JSON.stringify(r.unavailable).slice(0, 300)}`)
  return { bytes: Buffer.byteLength(JSON.stringify(r.tools)), names: r.tools.map((t) => t.function?.name ?? t.name ?? '?') }
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  // The sandbox uid must be able to pass through to its workspace under tmpDir.
  await chmod(ctx.tmpDir, 0o711)
  const { urls } = await startMcpServers(ctx, 1, 'fixture')
  const gw = await startGateway(ctx, gatewayEnv(ctx, { SANDBOX: 'bwrap', EGRESS_ALLOW: '127.0.0.1/32' }))
  await httpOk('PUT', `${gw.url}/users/${USER}/mcp/servers/${SERVER}`, { type: 'streamable_http', url: urls[0] })

  const listUrl = `${gw.url}/tools?userId=${USER}&mcp=${SERVER}&format=openai`
  const plain = await listingBytes(listUrl)
  const code = await listingBytes(`${listUrl}&mode=code`)
  const add = plain.names.find((n) => n.endsWith('add'))
  if (add === undefined) throw new Error(`no add tool in ${plain.names.join(', ')}`)
  if (code.names.join() !== 'run_tools_script') throw new Error(`mode=code listed ${code.names.join(', ')}`)
  ctx.log(`listings: ${plain.names.length} tools ${plain.bytes} B; mode=code ${code.bytes} B; chained tool ${add}`)

  const invoke = async (body: Record<string, unknown>): Promise<InvokeAnswer> => {
    const r = await http('POST', `${gw.url}/invoke`, { userId: USER, ...body })
    const a = JSON.parse(r.body) as InvokeAnswer
    if (r.status !== 200 || a.isError) throw new Error(`POST /invoke ${String(body.name)} -> ${r.status}: ${r.body.slice(0, 500)}`)
    return a
  }

  // What the timed rounds record (off during warm-ups and the CPU readings): each one-by-one POST
  // timed on its own (the direct POST /invoke of 8.3), and the gateway's span of each script (trace.durationMs).
  const rec = { on: false, single: [] as number[], span: { script: [] as number[], empty: [] as number[] } }
  let outputs: string[] = []
  const oneByOne = async (): Promise<void> => {
    let n = 0
    const out: string[] = []
    for (let i = 0; i < CHAIN; i++) {
      let a: InvokeAnswer | undefined
      const ms = await timeMs(async () => { a = await invoke({ name: add, arguments: { a: n, b: 1 }, allow: ALLOW }) })
      if (rec.on) rec.single.push(ms)
      out.push((a as InvokeAnswer).output)
      n = counter((a as InvokeAnswer).output)
    }
    if (n !== CHAIN) throw new Error(`one by one ended at ${n}, not ${CHAIN}`)
    outputs = out
  }
  let scriptOutput = ''
  const runScript = async (code: string, calls: number): Promise<InvokeAnswer & { trace: { durationMs: number } }> => {
    const a = await invoke({ name: 'run_tools_script', arguments: { language: 'javascript', code }, allow: CODE_ALLOW, trace: true })
    if (a.trace?.calls.length !== calls) throw new Error(`the script of ${calls} calls answered ${a.output.slice(0, 300)}`)
    return a as InvokeAnswer & { trace: { durationMs: number } }
  }
  const script = (calls: number, kind: 'script' | 'empty') => async (): Promise<void> => {
    const a = await runScript(chainScript(add, calls), calls)
    if (a.output !== String(calls)) throw new Error(`the script of ${calls} calls answered ${a.output.slice(0, 300)}`)
    if (rec.on) rec.span[kind].push(a.trace.durationMs)
    if (kind === 'script') scriptOutput = a.output
  }

  const sides = { code: script(CHAIN, 'script'), oneByOne, empty: script(0, 'empty') }
  for (let i = 0; i < WARMUP; i++) for (const fn of Object.values(sides)) await fn()
  rec.on = true
  const t = await timeInterleaved(sides, { warmup: 0, reps: REPS, signal: ctx.signal })
  // 8.3 subtracts two medians of ~100 ms whose spread is the sandbox's start (tens of ms): more rounds of the two scripts alone.
  const more = await timeInterleaved({ code: sides.code, empty: sides.empty }, { warmup: 0, reps: MORE_REPS, signal: ctx.signal })
  rec.on = false
  const scripts = { code: [...t.code, ...more.code], empty: [...t.empty, ...more.empty] }

  // Untimed, after: the gateway process's CPU per task each way (/proc, 10 ms ticks, so CPU_REPS tasks at a time).
  const cpuOf = async (fn: () => Promise<void>): Promise<number> => {
    const c0 = await cpuMs(gw.pid)
    for (let i = 0; i < CPU_REPS; i++) await fn()
    return (await cpuMs(gw.pid) - c0) / CPU_REPS
  }
  const cpu = { code: await cpuOf(sides.code), oneByOne: await cpuOf(oneByOne), empty: await cpuOf(sides.empty) }
  const cpuInner = (cpu.code - cpu.empty) / CHAIN
  // And the inner calls as the script itself sees them (performance.now() around each await, in the sandbox).
  const seen: number[] = []
  for (let i = 0; i < CPU_REPS; i++) seen.push(...JSON.parse((await runScript(timedScript(add, CHAIN), CHAIN)).output) as number[])

  const codeMs = median(t.code)
  const seqMs = median(t.oneByOne)
  const directMs = median(rec.single)
  const perInner = (median(scripts.code) - median(scripts.empty)) / CHAIN
  const overhead = perInner - directMs
  const emptyMs = median(scripts.empty)
  const spanMs = median(rec.span.script)
  const emptySpanMs = median(rec.span.empty)
  const seenMs = median(seen)
  ctx.log(`task: code ${round(codeMs)} ms, one by one ${round(seqMs)} ms; empty script ${round(emptyMs)} ms (span ${round(emptySpanMs)}); ` +
    `per inner call ${round(perInner)} ms (in the script: ${round(seenMs)}) vs direct ${round(directMs)} ms; n=${t.code.length}, ${scripts.code.length} scripts`)
  ctx.log(`gateway CPU per task: code ${round(cpu.code)} ms (empty script ${round(cpu.empty)}), one by one ${round(cpu.oneByOne)} ms; ` +
    `per inner call ${round(cpuInner)} ms vs per POST /invoke ${round(cpu.oneByOne / CHAIN)} ms`)

  const outBytes = outputs.reduce((s, o) => s + Buffer.byteLength(o), 0)
  const seqBytes = plain.bytes + outBytes
  const codeBytes = code.bytes + Buffer.byteLength(scriptOutput)
  const unmodelled = 'the gateway\'s side alone: the model\'s own turn per call, which code mode saves, is not counted'
  return [
    makeRow({
      id: '8.1',
      name: `code mode: a task of ${CHAIN} chained MCP calls as one run_tools_script (JS, bwrap) vs ${CHAIN} POST /invoke one by one; wall time (${unmodelled})`,
      metric: 'median ms',
      value: codeMs,
      baseline: seqMs,
      target: null,
      notes: `code ${round(codeMs)} ms (p90 ${round(percentile(t.code, 90))}), one by one ${round(seqMs)} ms (p90 ${round(percentile(t.oneByOne, 90))}); ` +
        `the script's process alone (0 calls): ${round(median(t.empty))} ms; n=${t.code.length} interleaved; ${unmodelled}`,
      detail: {
        codeP90: round(percentile(t.code, 90)),
        oneByOneP90: round(percentile(t.oneByOne, 90)),
        emptyScript: round(median(t.empty)),
        gatewayCpuCode: round(cpu.code),
        gatewayCpuEmpty: round(cpu.empty),
        gatewayCpuOneByOne: round(cpu.oneByOne)
      }
    }),
    makeRow({
      id: '8.2',
      name: `the same task: bytes the model reads, mode=code listing + the script's output vs the openai listing of the allow-list + ${CHAIN} outputs`,
      metric: 'bytes',
      value: codeBytes,
      baseline: seqBytes,
      target: null,
      notes: `code: listing ${code.bytes} B (run_tools_script with the typed API of ${plain.names.length} tools) + output ${Buffer.byteLength(scriptOutput)} B; ` +
        `one by one: listing ${plain.bytes} B + ${CHAIN} outputs ${outBytes} B; each counted once (a model re-reads the listing and earlier results every turn)`,
      detail: { codeListing: code.bytes, plainListing: plain.bytes, outputsBytes: outBytes }
    }),
    makeRow({
      id: '8.3',
      name: `code mode's overhead per inner call: (script of ${CHAIN} calls - script of 0) / ${CHAIN}, minus a direct POST /invoke of the same tool`,
      metric: 'ms/call',
      value: overhead,
      baseline: null,
      target: { on: 'value', op: '<=', limit: 1 },
      notes: `target <= 1 ms; an inner call ${round(perInner)} ms (${scripts.code.length} scripts of each, interleaved; ${round(seenMs)} ms as the script times it) ` +
        `vs a direct POST /invoke ${round(directMs)} ms (p50 of ${rec.single.length}, client-observed); ` +
        `the gateway's own span of the script: ${round(spanMs)} ms, of the empty one ${round(emptySpanMs)} ms; ` +
        `gateway CPU per inner call ${round(cpuInner)} ms vs per POST /invoke ${round(cpu.oneByOne / CHAIN)} ms (${CPU_REPS} tasks each, /proc, 10 ms ticks)`,
      detail: {
        perInnerCall: round(perInner),
        innerCallInScript: round(seenMs),
        directInvoke: round(directMs),
        scriptSpan: round(spanMs),
        emptySpan: round(emptySpanMs),
        gatewayCpuPerInnerCall: round(cpuInner),
        gatewayCpuPerInvoke: round(cpu.oneByOne / CHAIN)
      }
    })
  ]
}
