import { performance } from 'node:perf_hooks'
import type { CatalogEntry } from '../routing/source.js'
import { fitJsonValue } from '../routing/output.js'
import { StaticSource } from '../routing/static-source.js'
import type { CallContext, Caller, ToolOutcome, WorkspaceRequest } from '../routing/types.js'
import { KeyedMutex, LockUnavailableError, LockWaitAbortedError } from '../cluster/index.js'
import type { LeaseContext, WriteLock } from '../cluster/index.js'
import { ToolError } from './types.js'
import { summarizeResult } from './trace.js'
import type { BuiltinTrace } from './trace.js'
import type { BuiltinName } from '../naming/builtin-names.js'
import type { Workspace } from './types.js'
import { BUILTIN_ANNOTATIONS } from './tool.js'
import type { BuiltinTool } from './tool.js'
import type { WorkspaceUsage } from './workspace/usage.js'
import { workspaceWriteKey } from './workspace/workspaces.js'

/** Resolves a request's workspace context to real paths (implemented by WorkspaceManager). */
export interface WorkspaceResolver {
  resolve: (req: WorkspaceRequest, caller: Caller) => Promise<Workspace>
}

export interface BuiltinSourceOptions {
  usage?: WorkspaceUsage
  /**
   * The write locks, shared with the workspace lifecycle (uploads, restores, deletes): in process
   * (KeyedMutex), or cluster-wide leases in Redis (LeaseLock) when several instances share workspaces.
   */
  writes?: WriteLock
  /**
   * Takes a checkpoint of the workspace (the lock is held) and returns its id; called before a
   * mutating tool runs when the request's context asks for one (`context.checkpoint`).
   */
  checkpoint?: (ws: Workspace) => Promise<string>
}

/**
 * Tier 1: the built-in coding tools, each call scoped to the request's workspace. Calls that
 * may change a workspace are serialised per workspace, so concurrent edits (batch invokes,
 * parallel requests) never lose an update.
 */
export class BuiltinSource extends StaticSource {
  readonly tier = 'builtin' as const
  readonly #workspaces: WorkspaceResolver
  readonly #writes: WriteLock
  readonly #checkpoint: ((ws: Workspace) => Promise<string>) | undefined
  readonly #usage: WorkspaceUsage | undefined

  constructor (tools: readonly BuiltinTool[], workspaces: WorkspaceResolver, opts: BuiltinSourceOptions = {}) {
    super(tools.map((tool) => ({
      route: 'builtin',
      source: 'builtin',
      name: tool.name,
      spec: { name: tool.name, description: tool.description, inputSchema: tool.inputSchema, annotations: { ...BUILTIN_ANNOTATIONS[tool.name] } },
      ref: tool
    })))
    this.#workspaces = workspaces
    this.#writes = opts.writes ?? new KeyedMutex()
    this.#checkpoint = opts.checkpoint
    this.#usage = opts.usage
  }

  override get names (): BuiltinName[] {
    return super.names as BuiltinName[]
  }

  async call (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext): Promise<ToolOutcome> {
    const tool = entry.ref as BuiltinTool
    const record: CallRecord = { asked: performance.now() }
    const outcome = await this.#call(tool, args, ctx, record)
    outcome.trace = traceOf(tool, ctx, outcome, record)
    return outcome
  }

  async #call (tool: BuiltinTool, args: Record<string, unknown>, ctx: CallContext, record: CallRecord): Promise<ToolOutcome> {
    try {
      const workspace = await this.#workspaces.resolve(ctx.workspace, ctx.caller)
      const run = async (lease?: LeaseContext): Promise<ToolOutcome> => {
        // Under a cluster lease the tool also stops when the lease is lost: another instance may be writing.
        const signal = lease === undefined ? ctx.signal : AbortSignal.any([ctx.signal, lease.signal])
        let value: unknown
        record.started = performance.now()
        try {
          value = await tool.run(args, { workspace, signal, ...(this.#usage !== undefined ? { usage: this.#usage } : {}) })
        } catch (err) {
          if (lease?.signal.aborted === true && !(err instanceof ToolError && err.message.includes((lease.signal.reason as Error).message))) {
            throw new ToolError(`${(lease.signal.reason as Error).message}; the tool was stopped`, 'timeout')
          }
          throw err
        } finally {
          record.ended = performance.now()
        }
        // Built-in results are JSON and must stay valid JSON under the cap (docs/ARCHITECTURE.md#result-and-trace): their long
        // fields are trimmed here, before the router's generic cut of the text could break them.
        // The workspace's cap is the server's, or lower when the request asked for less.
        // Its JSON is the value the router writes as the output: the result is not serialised a second time.
        const fitted = fitJsonValue(value, workspace.limits.outputMaxChars)
        record.result = fitted.value
        return { ok: true, value: fitted.text ?? fitted.value, ...(fitted.truncated ? { truncated: true } : {}) }
      }
      if (!tool.mutates(args)) return await run()
      const lockOpts = { signal: ctx.signal }
      record.lockAsked = performance.now()
      if (ctx.workspace.checkpoint !== true) {
        return await this.#writes.run(workspaceWriteKey(workspace), async (lease) => { record.locked = performance.now(); return await run(lease) }, lockOpts)
      }
      return await this.#writes.run(workspaceWriteKey(workspace), async (lease) => {
        record.locked = performance.now()
        // Taken inside the lock, so the checkpoint is exactly the tree the tool starts from.
        const checkpointId = await this.#takeCheckpoint(workspace, ctx)
        const outcome = await run(lease).catch((err: unknown): ToolOutcome => {
          if (err instanceof ToolError) return { ok: false, reason: err.reason, message: err.message }
          throw err
        })
        return { ...outcome, checkpointId }
      }, lockOpts)
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.reason, message: err.message }
      // Fail closed: without the lock nothing ran (a tool error, never a 500).
      if (err instanceof LockUnavailableError) return { ok: false, reason: 'tool-error', message: err.message }
      if (err instanceof LockWaitAbortedError) return { ok: false, reason: 'timeout', message: err.message }
      throw err
    }
  }

  async #takeCheckpoint (ws: Workspace, ctx: CallContext): Promise<string> {
    if (this.#checkpoint === undefined) throw new ToolError('Checkpoints are not available on this server', 'invalid-arguments')
    if (ctx.workspace.workspaceRoot !== undefined) {
      throw new ToolError('context.checkpoint works on tenant workspaces (workspaceId), not on an admin workspaceRoot', 'invalid-arguments')
    }
    try {
      return await this.#checkpoint(ws)
    } catch (err) {
      if (err instanceof ToolError) throw err
      // Nothing ran: the tool is not called without the checkpoint that was asked for.
      throw new ToolError(`The checkpoint could not be taken, so the tool did not run: ${(err as Error)?.message ?? String(err)}`)
    }
  }
}

/** What a call's trace is made of: where its time went, and the tool's result (the outcome carries the result's JSON). */
interface CallRecord {
  /** When the call asked for its lock, got it, and ran (performance.now() times). */
  asked: number
  lockAsked?: number
  locked?: number
  started?: number
  ended?: number
  result?: unknown
}

const ms = (from: number, to: number): number => Math.round((to - from) * 1000) / 1000

/** The call's trace: what the tool did, from its result (never its content), and where the time went. */
function traceOf (tool: BuiltinTool, ctx: CallContext, outcome: ToolOutcome, record: CallRecord): BuiltinTrace {
  const trace: BuiltinTrace = {
    tool: tool.name,
    workspaceId: ctx.workspace.workspaceRoot !== undefined ? '(workspaceRoot)' : ctx.workspace.workspaceId ?? 'default',
    toolMs: record.started !== undefined && record.ended !== undefined ? ms(record.started, record.ended) : 0
  }
  if (record.lockAsked !== undefined && record.locked !== undefined) trace.lockWaitMs = ms(record.lockAsked, record.locked)
  if (outcome.ok) {
    const result = summarizeResult(record.result)
    if (result !== undefined) trace.result = result
    if (outcome.truncated === true) trace.truncated = true
  } else {
    trace.failure = outcome.reason
  }
  if (outcome.checkpointId !== undefined) trace.checkpointId = outcome.checkpointId
  return trace
}
