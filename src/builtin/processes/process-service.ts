import { FORWARDED_PROCESS_CALL_PATH, PeerRequestError, PeerUnavailableError, ProcessDirectory } from '../../cluster/index.js'
import type { Coordination, InstanceInfo, ProcessRecord } from '../../cluster/index.js'
import type { Logger } from '../../logger.js'
import type { WorkspaceLimits } from '../../routing/types.js'
import { ToolError, type Workspace } from '../types.js'
import type { ProcessLogs, ProcessManager, ProcessSnapshot, StartRequest, WriteOptions } from './process-manager.js'

/** The calls one instance forwards to a process's owner (`start` always runs where it is called). */
export const FORWARDED_OPS = ['status', 'logs', 'write', 'stop', 'list'] as const
export type ForwardedOp = typeof FORWARDED_OPS[number]

/** What the caller's instance POSTs to the owner's FORWARDED_PROCESS_CALL_PATH. */
export interface ForwardedCall {
  op: ForwardedOp
  /** Absent for list. */
  processId?: string
  /** The caller's workspace: the owner serves the call only for a process of exactly this workspace. */
  workspace: { tenant: string, workspaceId: string, root: string, limits: WorkspaceLimits }
  args?: { offset?: number, limit?: number, input?: string, timeoutMs?: number }
}

/** The owner's answer: a tool error travels back as its reason and message. */
export type ForwardedAnswer =
  | { ok: true, value: unknown }
  | { ok: false, reason: ToolError['reason'], message: string }

export interface ProcessServiceOptions {
  local: ProcessManager
  /** With Redis: ownership is recorded and calls for other instances' processes are forwarded. */
  coordination?: Coordination
  /** Default: one on `coordination`. */
  directory?: ProcessDirectory<ProcessSnapshot>
  /** How long the owner may take to answer status, logs and stop (write adds its own timeout). Default 5000. */
  forwardTimeoutMs?: number
  /** How long each owner may take to answer a list before its recorded snapshots stand in. Default 2000. */
  listTimeoutMs?: number
  /** How often the running processes' records are refreshed. Default: a quarter of their TTL. */
  refreshMs?: number
  logger?: Logger
}

const PROCESS_ID = /^proc_[0-9a-f]{32}$/
const REASONS: ReadonlySet<string> = new Set(['tool-error', 'forbidden', 'invalid-arguments', 'timeout', 'sandbox', 'quota', 'tenant-quota'])
const LIMIT_NAMES = ['readMaxChars', 'commandTimeoutMs', 'bashLogChars', 'maxProcessOutputChars', 'outputMaxChars'] as const
/** A forwarded write never waits longer than bash allows (MAX_COMMAND_TIMEOUT_MS). */
const MAX_FORWARDED_WRITE_MS = 600_000

type Route =
  | { kind: 'local' }
  | { kind: 'remote', record: ProcessRecord<ProcessSnapshot>, owner: InstanceInfo }
  | { kind: 'lost', record: ProcessRecord<ProcessSnapshot> }

/**
 * The background processes the bash tool sees (start/status/logs/write/stop/list). One instance:
 * the local ProcessManager, nothing else. With Redis (docs/CLUSTER.md): each process's owner is recorded
 * (ProcessDirectory), a call for another instance's process is forwarded to that owner, `list`
 * merges every instance's, and a process whose owner is gone is reported LOST from its last
 * snapshot. The owner serves a forwarded call only for a process of the caller's own workspace,
 * so an id of another tenant or workspace is an 'Unknown processId' on every instance alike.
 */
export class ProcessService {
  readonly #local: ProcessManager
  readonly #coord: Coordination | undefined
  readonly #dir: ProcessDirectory<ProcessSnapshot> | undefined
  readonly #forwardTimeoutMs: number
  readonly #listTimeoutMs: number
  readonly #logger: Logger | undefined
  /** Record writes per process, in order: a later write always files the later state. */
  readonly #chains = new Map<string, Promise<void>>()
  readonly #timer: NodeJS.Timeout | undefined

  constructor (opts: ProcessServiceOptions) {
    this.#local = opts.local
    this.#coord = opts.coordination
    this.#dir = opts.directory ?? (opts.coordination !== undefined ? new ProcessDirectory<ProcessSnapshot>(opts.coordination) : undefined)
    this.#forwardTimeoutMs = opts.forwardTimeoutMs ?? 5000
    this.#listTimeoutMs = opts.listTimeoutMs ?? 2000
    this.#logger = opts.logger
    if (this.#dir !== undefined) {
      const every = opts.refreshMs ?? Math.floor(this.#dir.runningTtlMs / 4)
      this.#timer = setInterval(() => { this.refresh() }, every)
      this.#timer.unref()
    }
  }

  /** The local manager (stats, workspace deletion). */
  get local (): ProcessManager {
    return this.#local
  }

  /** Whether ownership is recorded in Redis (a cluster) or all is local (one instance). */
  get clustered (): boolean {
    return this.#dir !== undefined
  }

  /**
   * The manager's hook: a process ended. Its record is updated in the background (logged on
   * failure); close() waits for these writes.
   */
  ended (ws: Workspace, snapshot: ProcessSnapshot): void {
    if (this.#dir === undefined) return
    this.#file(ws, snapshot).catch((err: unknown) => {
      this.#logger?.warn(
        { err, processId: snapshot.processId },
        'a background process\'s end could not be recorded in Redis (other instances see its last state until the record expires)'
      )
    })
  }

  /** Refreshes the records (and TTLs) of every running local process. */
  refresh (): void {
    for (const { ws, snapshot } of this.#local.runningEntries()) {
      this.#file(ws, snapshot).catch((err: unknown) => {
        this.#logger?.warn({ err, processId: snapshot.processId }, 'a running background process\'s record could not be refreshed in Redis')
      })
    }
  }

  /**
   * Files the process's current state after any earlier write for it; `fallback` stands in when
   * the manager no longer tracks it.
   */
  async #file (ws: Workspace, fallback: ProcessSnapshot): Promise<void> {
    const dir = this.#dir
    if (dir === undefined) return
    const id = fallback.processId
    const prev = this.#chains.get(id) ?? Promise.resolve()
    const next = prev.catch(() => {}).then(async () => {
      await dir.save(ws, this.#local.peek(ws, id) ?? fallback)
    })
    this.#chains.set(id, next)
    try {
      await next
    } finally {
      if (this.#chains.get(id) === next) this.#chains.delete(id)
    }
  }

  /** Runs here: this instance owns what it starts. Its record is filed before the id is returned. */
  async start (ws: Workspace, req: StartRequest): Promise<ProcessSnapshot> {
    const snap = await this.#local.start(ws, req)
    if (this.#dir === undefined) return snap
    try {
      await this.#file(ws, snap)
    } catch (err) {
      // A process the other instances could never find would be silently missing from them: not started.
      await this.#local.stop(ws, snap.processId).catch(() => {})
      throw new ToolError(`The background process could not be recorded in Redis, so it was stopped: ${(err as Error).message}`)
    }
    return this.#local.peek(ws, snap.processId) ?? snap
  }

  async status (ws: Workspace, processId: string): Promise<ProcessSnapshot> {
    const route = await this.#route(ws, processId)
    if (route.kind === 'local') return this.#local.status(ws, processId)
    if (route.kind === 'lost') return lost(route.record)
    return await this.#forward<ProcessSnapshot>(route.owner, ws, { op: 'status', processId }, this.#forwardTimeoutMs)
  }

  async logs (ws: Workspace, processId: string, offset: number | undefined, limit: number | undefined): Promise<ProcessLogs> {
    const route = await this.#route(ws, processId)
    if (route.kind === 'local') return this.#local.logs(ws, processId, offset, limit)
    if (route.kind === 'lost') {
      // The log lived in the gone instance's memory.
      const s = lost(route.record)
      const at = offset ?? 0
      return {
        processId,
        offset: at,
        nextOffset: at,
        truncated: false,
        content: '',
        status: s.status,
        exitCode: s.exitCode,
        ...(s.quotaExceeded === true ? { quotaExceeded: true as const } : {})
      }
    }
    return await this.#forward<ProcessLogs>(
      route.owner,
      ws,
      { op: 'logs', processId, args: { ...(offset !== undefined ? { offset } : {}), ...(limit !== undefined ? { limit } : {}) } },
      this.#forwardTimeoutMs
    )
  }

  async write (ws: Workspace, processId: string, input: string, opts: WriteOptions = {}): Promise<{ process: ProcessSnapshot, bytesWritten: number }> {
    const route = await this.#route(ws, processId)
    if (route.kind === 'local') return await this.#local.write(ws, processId, input, opts)
    if (route.kind === 'lost') {
      throw new ToolError(`Process is not running: ${processId} (${lost(route.record).status}: instance ${route.record.owner}, which ran it, is gone)`)
    }
    const timeoutMs = Math.min(opts.timeoutMs ?? 10_000, MAX_FORWARDED_WRITE_MS)
    return await this.#forward(route.owner, ws, { op: 'write', processId, args: { input, timeoutMs } }, timeoutMs + this.#forwardTimeoutMs, opts.signal)
  }

  async stop (ws: Workspace, processId: string): Promise<ProcessSnapshot> {
    const route = await this.#route(ws, processId)
    if (route.kind === 'local') return await this.#local.stop(ws, processId)
    // Nothing left to stop: the sandbox dies with its instance (bwrap --die-with-parent).
    if (route.kind === 'lost') return lost(route.record)
    // The owner waits up to its stop grace for the process to end.
    return await this.#forward<ProcessSnapshot>(route.owner, ws, { op: 'stop', processId }, 2 * this.#forwardTimeoutMs)
  }

  /** This workspace's processes on every instance, oldest first. */
  async list (ws: Workspace): Promise<ProcessSnapshot[]> {
    const mine = this.#local.list(ws)
    const dir = this.#dir
    const coord = this.#coord
    if (dir === undefined || coord === undefined) return mine
    let records: Array<ProcessRecord<ProcessSnapshot>>
    try {
      records = await dir.list(ws)
    } catch (err) {
      throw new ToolError(`Background processes of other instances cannot be listed: Redis does not answer (${(err as Error).message})`)
    }
    const byOwner = new Map<string, Array<ProcessRecord<ProcessSnapshot>>>()
    for (const r of records) {
      if (r.owner === dir.instanceId) continue
      const list = byOwner.get(r.owner) ?? []
      list.push(r)
      byOwner.set(r.owner, list)
    }
    const theirs = await Promise.all([...byOwner].map(async ([owner, recs]) => await this.#listOf(ws, owner, recs)))
    const seen = new Set<string>()
    const all: ProcessSnapshot[] = []
    for (const s of [...mine, ...theirs.flat()]) {
      if (seen.has(s.processId)) continue
      seen.add(s.processId)
      all.push(s)
    }
    return all.sort((a, b) => a.startedAt - b.startedAt || (a.processId < b.processId ? -1 : 1))
  }

  /** One other instance's processes of the workspace: its own answer, else its records. */
  async #listOf (ws: Workspace, owner: string, recs: Array<ProcessRecord<ProcessSnapshot>>): Promise<ProcessSnapshot[]> {
    let info: InstanceInfo | undefined
    try {
      info = await this.#coord?.membership.get(owner)
    } catch {
      return recs.map((r) => r.snapshot)
    }
    if (info === undefined) return recs.map(lost)
    if (this.#coord?.peers === undefined || info.url === '') return recs.map((r) => r.snapshot)
    try {
      const value = await this.#forward<unknown>(info, ws, { op: 'list' }, this.#listTimeoutMs)
      if (Array.isArray(value)) return value as ProcessSnapshot[]
    } catch (err) {
      this.#logger?.warn({ err, owner }, 'an instance did not list its background processes: its recorded snapshots stand in')
    }
    return recs.map((r) => r.snapshot)
  }

  /** Running processes of the workspace on every live instance (the workspace summaries). */
  async running (ws: Workspace): Promise<number> {
    let n = this.#local.running(ws)
    const dir = this.#dir
    const coord = this.#coord
    if (dir === undefined || coord === undefined) return n
    const records = await dir.list(ws).catch(() => [])
    for (const r of records) {
      if (r.owner === dir.instanceId || r.snapshot.status !== 'RUNNING') continue
      if (await coord.membership.isAlive(r.owner).catch(() => false)) n++
    }
    return n
  }

  /**
   * Stops the workspace's processes on every instance (deletion, idle expiry): this instance's
   * at once, the others' through their owners, in parallel. An owner that does not answer is
   * logged; its processes die with it or stay in the (deleted) workspace until it answers again.
   */
  async stopAll (ws: Workspace): Promise<void> {
    const dir = this.#dir
    const coord = this.#coord
    const remote: Array<Promise<unknown>> = []
    if (dir !== undefined && coord !== undefined) {
      const records = await dir.list(ws).catch((err: unknown) => {
        this.#logger?.warn({ err }, 'the background processes of other instances in a deleted workspace cannot be looked up: Redis does not answer')
        return []
      })
      for (const r of records) {
        if (r.owner === dir.instanceId || r.snapshot.status !== 'RUNNING') continue
        remote.push((async () => {
          const owner = await coord.membership.get(r.owner)
          if (owner === undefined) return
          await this.#forward(owner, ws, { op: 'stop', processId: r.snapshot.processId }, 2 * this.#forwardTimeoutMs)
        })().catch((err: unknown) => {
          this.#logger?.warn(
            { err, processId: r.snapshot.processId, owner: r.owner },
            'a background process of another instance could not be stopped with its workspace'
          )
        }))
      }
    }
    await Promise.all([this.#local.stopAll(ws), ...remote])
  }

  /** Who serves a call for this id: here, its live owner, or nobody (LOST). */
  async #route (ws: Workspace, processId: string): Promise<Route> {
    const dir = this.#dir
    const coord = this.#coord
    // Unknown ids of a malformed shape end as 'Unknown processId' here, like today.
    if (dir === undefined || coord === undefined || this.#local.has(ws, processId) || !PROCESS_ID.test(processId)) return { kind: 'local' }
    let record: ProcessRecord<ProcessSnapshot> | undefined
    try {
      record = await dir.get(ws.tenant, processId)
    } catch (err) {
      throw new ToolError(`The owner of ${processId} cannot be looked up: Redis does not answer (${(err as Error).message})`)
    }
    // Another workspace's id (or tenant's: the key is per tenant) is unknown here exactly as an unknown one.
    if (record === undefined || record.owner === dir.instanceId || record.workspaceId !== ws.workspaceId || record.root !== ws.root) return { kind: 'local' }
    let owner: InstanceInfo | undefined
    try {
      owner = await coord.membership.get(record.owner)
    } catch (err) {
      throw new ToolError(`Whether instance ${record.owner}, which runs ${processId}, is alive cannot be read: Redis does not answer (${(err as Error).message})`)
    }
    return owner === undefined ? { kind: 'lost', record } : { kind: 'remote', record, owner }
  }

  async #forward<T> (owner: InstanceInfo, ws: Workspace, call: Omit<ForwardedCall, 'workspace'>, timeoutMs: number, signal?: AbortSignal): Promise<T> {
    const what = call.processId !== undefined ? `runs ${call.processId}` : 'runs background processes of this workspace'
    const peers = this.#coord?.peers
    if (peers === undefined) {
      throw new ToolError(`Instance ${owner.id} ${what}, and this instance cannot forward calls to it: CLUSTER_SECRET is not set (set the same value on every instance)`)
    }
    if (owner.url === '') throw new ToolError(`Instance ${owner.id} ${what} but has not announced its URL yet; retry shortly`)
    const body: ForwardedCall = { ...call, workspace: { tenant: ws.tenant, workspaceId: ws.workspaceId, root: ws.root, limits: ws.limits } }
    const began = performance.now()
    let answer: unknown
    try {
      answer = await peers.post<unknown>(owner.url, FORWARDED_PROCESS_CALL_PATH, body, { timeoutMs, ...(signal !== undefined ? { signal } : {}) })
    } catch (err) {
      const ms = Math.round(performance.now() - began)
      if (signal?.aborted === true) throw new ToolError(`The caller went away while instance ${owner.id} was asked`, 'timeout')
      if (err instanceof PeerUnavailableError) {
        if (/did not answer/.test(err.message)) throw new ToolError(`Instance ${owner.id} (${owner.url}), which ${what}, did not answer within ${timeoutMs} ms; retry later`, 'timeout')
        throw new ToolError(`Instance ${owner.id}, which ${what}, did not answer (${err.message}, after ${ms} ms); if it is gone, its processes are reported LOST once its membership expires`)
      }
      if (err instanceof PeerRequestError) throw new ToolError(`Instance ${owner.id}, which ${what}, refused the forwarded call (HTTP ${err.status}${err.code !== undefined ? ` ${err.code}` : ''}: ${err.message})`)
      throw err
    }
    const a = answer as Partial<{ ok: boolean, value: unknown, reason: string, message: string }> | null
    if (a !== null && typeof a === 'object' && a.ok === true) return a.value as T
    if (a !== null && typeof a === 'object' && a.ok === false && typeof a.message === 'string') {
      throw new ToolError(a.message, REASONS.has(a.reason ?? '') ? a.reason as ToolError['reason'] : 'tool-error')
    }
    throw new ToolError(`Instance ${owner.id}, which ${what}, answered the forwarded call with something unexpected`)
  }

  /**
   * The owner's side: a call another instance forwarded (already authenticated by its
   * CLUSTER_SECRET token). Runs on the local manager only (never forwarded on), for a process of
   * the forwarded workspace only.
   */
  async serveForwarded (body: unknown): Promise<ForwardedAnswer> {
    let call: ForwardedCall
    try {
      call = parseCall(body)
    } catch (err) {
      return { ok: false, reason: 'invalid-arguments', message: `Malformed forwarded call: ${(err as Error).message}` }
    }
    const w = call.workspace
    const ws: Workspace = { tenant: w.tenant, workspaceId: w.workspaceId, root: w.root, readRoots: [], limits: w.limits }
    const id = call.processId ?? ''
    const args = call.args ?? {}
    try {
      switch (call.op) {
        case 'status': return { ok: true, value: this.#local.status(ws, id) }
        case 'logs': return { ok: true, value: this.#local.logs(ws, id, args.offset, args.limit) }
        case 'write': return { ok: true, value: await this.#local.write(ws, id, args.input ?? '', { timeoutMs: args.timeoutMs ?? 10_000 }) }
        case 'stop': return { ok: true, value: await this.#local.stop(ws, id) }
        case 'list': return { ok: true, value: this.#local.list(ws) }
      }
    } catch (err) {
      if (err instanceof ToolError) return { ok: false, reason: err.reason, message: err.message }
      throw err
    }
  }

  /**
   * Shutdown, after the manager killed every process: waits until their ends are recorded
   * (STOPPED, seen by the other instances), before Redis is closed.
   */
  async close (): Promise<void> {
    if (this.#timer !== undefined) clearInterval(this.#timer)
    while (this.#chains.size > 0) await Promise.allSettled([...this.#chains.values()])
  }
}

/** The last snapshot of a process whose owner is gone: a running one is LOST, a finished one stays. */
function lost (r: ProcessRecord<ProcessSnapshot>): ProcessSnapshot {
  return r.snapshot.status === 'RUNNING' ? { ...r.snapshot, status: 'LOST' } : r.snapshot
}

function parseCall (body: unknown): ForwardedCall {
  if (body === null || typeof body !== 'object') throw new Error('not an object')
  const b = body as Record<string, unknown>
  const op = b.op
  if (typeof op !== 'string' || !(FORWARDED_OPS as readonly string[]).includes(op)) throw new Error('op')
  const w = b.workspace as Record<string, unknown> | null | undefined
  if (w === null || typeof w !== 'object') throw new Error('workspace')
  for (const k of ['tenant', 'workspaceId', 'root']) if (typeof w[k] !== 'string' || w[k] === '') throw new Error(`workspace.${k}`)
  const l = w.limits as Record<string, unknown> | null | undefined
  if (l === null || typeof l !== 'object') throw new Error('workspace.limits')
  const limits = {} as Record<string, number>
  for (const k of LIMIT_NAMES) {
    const v = l[k]
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < 1) throw new Error(`workspace.limits.${k}`)
    limits[k] = v
  }
  let processId: string | undefined
  if (op !== 'list') {
    if (typeof b.processId !== 'string' || b.processId === '' || b.processId.length > 200) throw new Error('processId')
    processId = b.processId
  }
  const a = (b.args ?? {}) as Record<string, unknown>
  if (a === null || typeof a !== 'object') throw new Error('args')
  const int = (k: string, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined => {
    const v = a[k]
    if (v === undefined) return undefined
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) throw new Error(`args.${k}`)
    return v
  }
  const offset = int('offset', 0)
  const limit = int('limit', 1)
  const timeoutMs = int('timeoutMs', 1, MAX_FORWARDED_WRITE_MS)
  if (a.input !== undefined && typeof a.input !== 'string') throw new Error('args.input')
  if (op === 'write' && typeof a.input !== 'string') throw new Error('args.input')
  return {
    op: op as ForwardedOp,
    ...(processId !== undefined ? { processId } : {}),
    workspace: { tenant: w.tenant as string, workspaceId: w.workspaceId as string, root: w.root as string, limits: limits as unknown as WorkspaceLimits },
    args: {
      ...(offset !== undefined ? { offset } : {}),
      ...(limit !== undefined ? { limit } : {}),
      ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      ...(typeof a.input === 'string' ? { input: a.input } : {})
    }
  }
}
