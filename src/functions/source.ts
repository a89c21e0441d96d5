import { performance } from 'node:perf_hooks'
import type { CatalogEntry } from '../routing/source.js'
import { StaticSource } from '../routing/static-source.js'
import type { CallContext, ToolOutcome } from '../routing/types.js'
import { CANCELLED_OUTCOME, DeadlineRun } from '../routing/deadline.js'
import type { FunctionContext, FunctionTool } from './define.js'
import type { LoadedFunction } from './loader.js'

/** Tier 4: local function tools, exposed under their own names. */
export class FunctionSource extends StaticSource {
  readonly tier = 'function' as const
  readonly #defaultTimeoutMs: number

  constructor (functions: readonly LoadedFunction[], opts: { defaultTimeoutMs: number }) {
    super(functions.map(({ tool }) => ({
      route: 'function',
      source: tool.name,
      name: tool.name,
      spec: { name: tool.name, description: tool.description, inputSchema: tool.parameters },
      ref: tool
    })))
    this.#defaultTimeoutMs = opts.defaultTimeoutMs
  }

  async call (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext): Promise<ToolOutcome> {
    const tool = entry.ref as FunctionTool
    const timeoutMs = Math.min(tool.timeoutMs ?? this.#defaultTimeoutMs, ctx.timeoutMs)
    const parent = ctx.abortSource ?? ctx.signal
    if (parent.aborted) return CANCELLED_OUTCOME
    const run = new DeadlineRun(parent, () => `Function '${entry.name}' did not finish within ${timeoutMs} ms`)
    let value: unknown
    const started = performance.now()
    try {
      // `signal` read through: its AbortController is only made for a handler that uses it.
      value = tool.handler(args, new HandlerContext(ctx.callId, ctx.caller.userId, run))
    } catch (err) {
      return { ...failed(err), trace: functionTrace(entry.name, false, started, timeoutMs, undefined) }
    }
    // A handler that answered synchronously is done: there is nothing left to time out or cancel.
    if (!isThenable(value)) return { ok: true, value, trace: functionTrace(entry.name, false, started, timeoutMs, value) }
    const outcome = await run.watch(Promise.resolve(value).then((v): ToolOutcome => ({ ok: true, value: v }), failed), timeoutMs)
    return { ...outcome, trace: functionTrace(entry.name, true, started, timeoutMs, outcome.ok ? outcome.value : undefined) }
  }
}

/** A function call's trace (`"trace": true`, and the journal): how the handler answered and how long it took, never the value (that is the output). */
interface FunctionTrace {
  function: string
  async: boolean
  handlerMs: number
  timeoutMs: number
  resultType: string
}

function functionTrace (name: string, async: boolean, started: number, timeoutMs: number, value: unknown): FunctionTrace {
  const resultType = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value
  return { function: name, async, handlerMs: Math.round((performance.now() - started) * 1000) / 1000, timeoutMs, resultType }
}

/** What a handler receives; `signal` read through a class getter (a literal with a getter is built by a slow path per call). */
class HandlerContext implements FunctionContext {
  readonly #run: DeadlineRun
  constructor (readonly callId: string, readonly userId: string | undefined, run: DeadlineRun) {
    this.#run = run
  }

  get signal (): AbortSignal { return this.#run.signal }
}

function isThenable (value: unknown): value is PromiseLike<unknown> {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && typeof (value as { then?: unknown }).then === 'function'
}

function failed (err: unknown): ToolOutcome {
  return { ok: false, reason: 'tool-error', message: err instanceof Error ? err.message : String(err) }
}
