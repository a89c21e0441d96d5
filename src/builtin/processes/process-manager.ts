import { setTimeout as sleep } from 'node:timers/promises'
import { randomBytes } from 'node:crypto'
import type { Readable } from 'node:stream'
import { StringDecoder } from 'node:string_decoder'
import { ToolError, type Workspace } from '../types.js'
import type { Sandbox, SandboxedProcess } from '../sandbox/index.js'
import { LogRing, type LogSlice } from './log-ring.js'
import type { WorkspaceUsage } from '../workspace/usage.js'

/**
 * LOST: the instance that ran it is gone (crashed or cut off from Redis), so nobody can say more
 * than its last-known snapshot; only the cluster-wide ProcessService reports it.
 */
export type ProcessStatus = 'RUNNING' | 'EXITED' | 'STOPPED' | 'LOST'

/** AI4J's process snapshot. Times are epoch milliseconds. */
export interface ProcessSnapshot {
  processId: string
  command: string
  /** Workspace-relative ('.' for the root): never a host path. */
  workingDirectory: string
  status: ProcessStatus
  pid: number | null
  exitCode: number | null
  startedAt: number
  endedAt: number | null
  /** Present (true) when the quota watchdog stopped it: the workspace passed WORKSPACE_QUOTA_BYTES or WORKSPACE_MAX_FILES. */
  quotaExceeded?: true
}

export interface ProcessLogs extends LogSlice {
  processId: string
  status: ProcessStatus
  exitCode: number | null
  quotaExceeded?: true
}

export interface ProcessManagerOptions {
  sandbox: Sandbox
  /** Running background processes per (tenant, workspace). Default 8. */
  maxRunningPerWorkspace?: number
  /**
   * Running background processes per tenant, across all its workspaces (MAX_PROCESSES_PER_TENANT).
   * Default 16. Without it a tenant multiplies the per-workspace limit by opening workspaces.
   */
  maxRunningPerTenant?: number
  /** Entries (running or not) kept per workspace; the oldest finished ones are dropped first. Default 64. */
  maxEntriesPerWorkspace?: number
  /** A finished process is forgotten this long after it ended or was last looked at. Default 10 min. */
  exitedRetentionMs?: number
  /** A running process nobody looked at (status/logs/write/list) for this long is stopped. Default 30 min; 0 = never. */
  idleTimeoutMs?: number
  /** How often the reaper runs. Default 60 s; 0 = only when reap() is called. */
  reapIntervalMs?: number
  /** Between SIGTERM and SIGKILL on stop. Default 1000 ms (AI4J's processStopGraceMs). */
  stopGraceMs?: number
  /** Clock, for tests. */
  now?: () => number
  /**
   * Called once a process has ended (EXITED or STOPPED), with its workspace and final snapshot:
   * the cluster directory records it. Must not throw.
   */
  onEnded?: (ws: Workspace, snapshot: ProcessSnapshot) => void
}

export interface ProcessManagerStats {
  running: number
  tracked: number
  workspaces: number
  spawned: number
  stopped: number
  idleReaped: number
}

export interface StartRequest {
  command: string
  /** Absolute host path inside the workspace, already checked. */
  cwd: string
  /** Workspace-relative form of cwd, as reported back. */
  workingDirectory: string
  /** The workspaces' quota: the process gets RLIMIT_FSIZE at the room left and is watched while it runs. */
  usage?: WorkspaceUsage
}

/** Longest partial line held back before it is logged anyway (a prompt never ends with a newline). */
const MAX_PENDING_LINE = 8192
/** How long `start` waits for bwrap's report that the namespaces exist (normally a few ms). */
const START_REPORT_MAX_MS = 10_000

/**
 * `write` hands stdin at most this many bytes at a time and waits until the pipe took them
 * before encoding the next chunk, so what the gateway buffers for a process that does not read
 * is one chunk (beyond the pipe's own 64 KiB), not the whole input. 21845 UTF-16 code units
 * encode to at most 65535 bytes.
 */
const WRITE_CHUNK_CHARS = 21845
/** Default time a write may take to hand its input to the process. */
export const DEFAULT_WRITE_TIMEOUT_MS = 10_000

export interface WriteOptions {
  /** The write fails (a timeout tool error saying how much went through) past this. Default 10 s. */
  timeoutMs?: number
  /** The call's signal: when the caller goes, the write stops and lets go of the rest of its input. */
  signal?: AbortSignal
}

interface Entry {
  id: string
  key: string
  tenant: string
  ws: Workspace
  command: string
  workingDirectory: string
  proc: SandboxedProcess
  status: ProcessStatus
  exitCode: number | null
  startedAt: number
  endedAt: number | null
  lastAccess: number
  ring: LogRing
  stopRequested: boolean
  /** The quota watchdog stopped it. */
  quotaExceeded: boolean
  exited: Promise<void>
  /**
   * Bytes handed to stdin whose write has not completed (the process has not read them yet);
   * null when no write is pending. Stays set after a write gave up, until the pipe takes the
   * last chunk or the process ends: one pending write per process.
   */
  pendingWrite: number | null
}

function workspaceKey (ws: Workspace): string {
  // The root is part of the key: an admin workspaceRoot must not alias a tenant's workspace of the same id.
  return `${ws.tenant}\u0000${ws.workspaceId}\u0000${ws.root}`
}

/**
 * Background processes (bash start/status/logs/write/stop/list) per (tenant, workspace).
 * Lookups of an id from another workspace fail exactly like unknown ids, so ids never leak.
 */
export class ProcessManager {
  readonly #sandbox: Sandbox
  readonly #maxRunning: number
  readonly #maxRunningPerTenant: number
  readonly #maxEntries: number
  readonly #exitedRetentionMs: number
  readonly #idleTimeoutMs: number
  readonly #stopGraceMs: number
  readonly #now: () => number
  readonly #onEnded: ((ws: Workspace, snapshot: ProcessSnapshot) => void) | undefined
  readonly #byWorkspace = new Map<string, Map<string, Entry>>()
  /** Starts past the limit checks but not yet registered, per tenant: concurrent starts in other workspaces count them. */
  readonly #startingByTenant = new Map<string, number>()
  readonly #timer: NodeJS.Timeout | undefined
  #closed = false
  #spawned = 0
  #stopped = 0
  #idleReaped = 0

  constructor (opts: ProcessManagerOptions) {
    this.#sandbox = opts.sandbox
    this.#maxRunning = opts.maxRunningPerWorkspace ?? 8
    this.#maxRunningPerTenant = opts.maxRunningPerTenant ?? 16
    this.#maxEntries = Math.max(this.#maxRunning, opts.maxEntriesPerWorkspace ?? 64)
    this.#exitedRetentionMs = opts.exitedRetentionMs ?? 10 * 60_000
    this.#idleTimeoutMs = opts.idleTimeoutMs ?? 30 * 60_000
    this.#stopGraceMs = opts.stopGraceMs ?? 1000
    this.#now = opts.now ?? Date.now
    this.#onEnded = opts.onEnded
    const every = opts.reapIntervalMs ?? 60_000
    if (every > 0) {
      this.#timer = setInterval(() => { this.reap().catch(() => {}) }, every)
      this.#timer.unref()
    }
  }

  async start (ws: Workspace, req: StartRequest): Promise<ProcessSnapshot> {
    if (this.#closed) throw new ToolError('The gateway is shutting down', 'sandbox')
    const key = workspaceKey(ws)
    const running = [...(this.#byWorkspace.get(key)?.values() ?? [])].filter((e) => e.status === 'RUNNING').length
    if (running >= this.#maxRunning) {
      throw new ToolError(
        `Too many running background processes in this workspace (limit ${this.#maxRunning}); stop one first`,
        'sandbox'
      )
    }
    // Starts in other workspaces of the tenant are not serialised with this one: those between
    // this check and their registration are counted through #startingByTenant.
    const starting = this.#startingByTenant.get(ws.tenant) ?? 0
    if (this.#runningOfTenant(ws.tenant) + starting >= this.#maxRunningPerTenant) {
      throw new ToolError(
        `Too many running background processes for this tenant across its workspaces (limit ${this.#maxRunningPerTenant}); stop one first`,
        'sandbox'
      )
    }
    this.#startingByTenant.set(ws.tenant, starting + 1)
    try {
      return await this.#spawnEntry(ws, key, req)
    } finally {
      const left = (this.#startingByTenant.get(ws.tenant) ?? 1) - 1
      if (left > 0) this.#startingByTenant.set(ws.tenant, left)
      else this.#startingByTenant.delete(ws.tenant)
    }
  }

  async #spawnEntry (ws: Workspace, key: string, req: StartRequest): Promise<ProcessSnapshot> {
    await this.#sandbox.prepareWorkspace(ws)
    // Re-checked after the await: shutdown may have begun meanwhile.
    if (this.#closed) throw new ToolError('The gateway is shutting down', 'sandbox')
    // On a quota image (docs/ARCHITECTURE.md#workspace-quota) the file system refuses writes past
    // the quota: no RLIMIT_FSIZE at the room left, no watchdog. Otherwise both bound the process.
    const usage = req.usage?.enforcedByFs(ws) === true ? undefined : req.usage
    const before = usage !== undefined ? await usage.current(ws) : undefined
    const fileSize = usage !== undefined && before !== undefined ? { fileSizeBytes: Math.max(0, usage.quotaBytes - before.bytes) } : {}
    const proc = this.#sandbox.spawn({ workspace: ws, command: req.command, cwd: req.cwd, stdin: 'pipe', ...fileSize })
    if (proc.spawnError !== undefined) throw new ToolError('The sandbox could not start the command', 'sandbox')
    // Watched for as long as it runs: stopped once the workspace passes its quota.
    const watch = usage?.watch(ws, { kill: () => proc.kill(), written: proc.written }, before)
    this.#spawned++
    const now = this.#now()
    const entry: Entry = {
      id: `proc_${randomBytes(16).toString('hex')}`,
      key,
      tenant: ws.tenant,
      ws,
      command: req.command,
      workingDirectory: req.workingDirectory,
      proc,
      status: 'RUNNING',
      exitCode: null,
      startedAt: now,
      endedAt: null,
      lastAccess: now,
      ring: new LogRing(ws.limits.maxProcessOutputChars),
      stopRequested: false,
      quotaExceeded: false,
      exited: Promise.resolve(),
      pendingWrite: null
    }
    this.#pipeLines(proc.stdout, '[stdout] ', entry.ring)
    this.#pipeLines(proc.stderr, '[stderr] ', entry.ring)
    entry.exited = proc.exited.then((exit) => {
      watch?.stop()
      if (watch?.tripped !== undefined) {
        entry.quotaExceeded = true
        entry.ring.append(`[tool-gateway] Stopped: the workspace passed its quota (WORKSPACE_QUOTA_EXCEEDED): ${watch.tripped.bytes} bytes and ${watch.tripped.files} files in use; the limits are ${usage?.quotaBytes ?? 0} bytes and ${usage?.maxFiles ?? 0} files\n`)
      }
      // What it wrote is counted from the tree, not from the deltas the file tools report.
      req.usage?.measure(ws).catch(() => {})
      entry.status = entry.stopRequested || entry.quotaExceeded ? 'STOPPED' : 'EXITED'
      entry.exitCode = exit.exitCode ?? -1
      entry.endedAt = this.#now()
      this.#onEnded?.(entry.ws, this.#snapshot(entry))
    })
    // A sandbox that could not start (the tenant's process limit, a broken host) is a tool error,
    // not a background process that "exited 1". bwrap reports its
    // namespaces before it execs the command; without that report the command never ran.
    const started = await Promise.race([proc.started, sleep(START_REPORT_MAX_MS, true, { ref: false })])
    if (!started) {
      await Promise.race([entry.exited, sleep(START_REPORT_MAX_MS, undefined, { ref: false })])
      proc.kill()
      const said = entry.ring.read(0, 4096).content
      const limit = /Resource temporarily unavailable|Cannot allocate memory/i.test(said)
      throw new ToolError(limit
        ? 'The sandbox could not start the command: this tenant\'s process or memory limit is reached (stop background processes and retry)'
        : 'The sandbox could not start the command', 'sandbox')
    }
    const entries = this.#byWorkspace.get(key) ?? new Map<string, Entry>()
    entries.set(entry.id, entry)
    this.#byWorkspace.set(key, entries)
    this.#evictOverflow(entries)
    return this.#snapshot(entry)
  }

  #runningOfTenant (tenant: string): number {
    let n = 0
    for (const entries of this.#byWorkspace.values()) {
      for (const e of entries.values()) if (e.tenant === tenant && e.status === 'RUNNING') n++
    }
    return n
  }

  status (ws: Workspace, processId: string): ProcessSnapshot {
    return this.#snapshot(this.#get(ws, processId))
  }

  logs (ws: Workspace, processId: string, offset: number | undefined, limit: number | undefined): ProcessLogs {
    const e = this.#get(ws, processId)
    const max = Math.min(limit ?? ws.limits.bashLogChars, ws.limits.maxProcessOutputChars)
    const slice = e.ring.read(offset ?? 0, max)
    return { processId: e.id, ...slice, status: e.status, exitCode: e.exitCode, ...(e.quotaExceeded ? { quotaExceeded: true as const } : {}) }
  }

  /**
   * Sends `input` to the process's stdin in chunks, each handed over only when the pipe took the
   * previous one, so a process that does not read costs the gateway one chunk, not the input.
   * Fails (a tool error with the bytes written so far) when the process ends, when `timeoutMs`
   * passes, or when the caller goes; a second write while one is pending is refused.
   */
  async write (ws: Workspace, processId: string, input: string, opts: WriteOptions = {}): Promise<{ process: ProcessSnapshot, bytesWritten: number }> {
    const e = this.#get(ws, processId)
    const stdin = e.proc.stdin
    if (e.status !== 'RUNNING' || stdin === null || stdin.destroyed || !stdin.writable) {
      throw new ToolError(`Process is not running: ${processId}`)
    }
    if (e.pendingWrite !== null) {
      throw new ToolError(
        `A write to ${processId} is already pending: the process has not read ${e.pendingWrite} bytes of earlier input yet. ` +
        'Wait for it to read them (check logs), or stop the process'
      )
    }
    const total = Buffer.byteLength(input, 'utf8')
    const timeoutMs = opts.timeoutMs ?? DEFAULT_WRITE_TIMEOUT_MS
    const signal = opts.signal
    if (signal?.aborted === true) throw new ToolError(`The caller went away: wrote 0 of ${total} bytes to ${processId}`)
    let written = 0
    let timer: NodeJS.Timeout | undefined
    let onAbort: (() => void) | undefined
    // Settles when the write must give up: the deadline, or the caller going away.
    const giveUp = new Promise<'timeout' | 'cancelled'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs)
      onAbort = () => resolve('cancelled')
      signal?.addEventListener('abort', onAbort, { once: true })
    })
    try {
      for (let i = 0; i < input.length;) {
        let end = Math.min(input.length, i + WRITE_CHUNK_CHARS)
        // Never split a surrogate pair: each half alone would be encoded as U+FFFD.
        const last = input.charCodeAt(end - 1)
        if (end < input.length && last >= 0xd800 && last <= 0xdbff) end--
        const chunk = Buffer.from(input.slice(i, end), 'utf8')
        i = end
        e.pendingWrite = chunk.length
        const done = new Promise<Error | null>((resolve) => {
          stdin.write(chunk, (err) => {
            // The chunk left the gateway (or never will): a later write may go, even if this one gave up.
            // Chunks go one at a time, so this is always the pending one.
            e.pendingWrite = null
            resolve(err ?? null)
          })
        })
        const outcome = await Promise.race([done, giveUp])
        if (outcome === 'timeout') {
          throw new ToolError(
            `Write to ${processId} timed out after ${timeoutMs} ms: wrote ${written} of ${total} bytes (the process is not reading its input); ` +
            `${chunk.length} more bytes are queued and reach the process if it reads them`,
            'timeout'
          )
        }
        if (outcome === 'cancelled') throw new ToolError(`The caller went away: wrote ${written} of ${total} bytes to ${processId}`)
        if (outcome !== null) throw new ToolError(`Process is not accepting input: ${processId} (wrote ${written} of ${total} bytes)`)
        written += chunk.length
      }
    } finally {
      clearTimeout(timer)
      if (onAbort !== undefined) signal?.removeEventListener('abort', onAbort)
    }
    return { process: this.#snapshot(e), bytesWritten: written }
  }

  async stop (ws: Workspace, processId: string): Promise<ProcessSnapshot> {
    const e = this.#get(ws, processId)
    await this.#stopEntry(e)
    return this.#snapshot(e)
  }

  list (ws: Workspace): ProcessSnapshot[] {
    const entries = this.#byWorkspace.get(workspaceKey(ws))
    if (entries === undefined) return []
    const now = this.#now()
    return [...entries.values()]
      .sort((a, b) => a.startedAt - b.startedAt || (a.id < b.id ? -1 : 1))
      .map((e) => { e.lastAccess = now; return this.#snapshot(e) })
  }

  /** Whether this manager tracks the process in this workspace (without touching its idle clock). */
  has (ws: Workspace, processId: string): boolean {
    return this.#byWorkspace.get(workspaceKey(ws))?.has(processId) === true
  }

  /** The process's snapshot without touching its idle clock; undefined when not tracked. */
  peek (ws: Workspace, processId: string): ProcessSnapshot | undefined {
    const e = this.#byWorkspace.get(workspaceKey(ws))?.get(processId)
    return e === undefined ? undefined : this.#snapshot(e)
  }

  /** Every running process with its workspace (the cluster directory refreshes their records). */
  runningEntries (): Array<{ ws: Workspace, snapshot: ProcessSnapshot }> {
    const out: Array<{ ws: Workspace, snapshot: ProcessSnapshot }> = []
    for (const entries of this.#byWorkspace.values()) {
      for (const e of entries.values()) if (e.status === 'RUNNING') out.push({ ws: e.ws, snapshot: this.#snapshot(e) })
    }
    return out
  }

  /** Running background processes of the workspace (without touching their idle clocks). */
  running (ws: Workspace): number {
    let n = 0
    for (const e of this.#byWorkspace.get(workspaceKey(ws))?.values() ?? []) if (e.status === 'RUNNING') n++
    return n
  }

  /** Stops every process of the workspace (deletion, expiry) and forgets them; resolves when all are dead. */
  async stopAll (ws: Workspace): Promise<void> {
    const key = workspaceKey(ws)
    const entries = [...this.#byWorkspace.get(key)?.values() ?? []]
    await Promise.all(entries.map(async (e) => await this.#stopEntry(e)))
    this.#byWorkspace.delete(key)
  }

  /** Forgets long-finished entries and stops long-idle running ones. Runs on a timer; callable for tests. */
  async reap (): Promise<void> {
    const now = this.#now()
    const stops: Array<Promise<void>> = []
    for (const [key, entries] of this.#byWorkspace) {
      for (const e of entries.values()) {
        if (e.status !== 'RUNNING') {
          if (now - Math.max(e.endedAt ?? 0, e.lastAccess) >= this.#exitedRetentionMs) entries.delete(e.id)
        } else if (this.#idleTimeoutMs > 0 && now - e.lastAccess >= this.#idleTimeoutMs && !e.stopRequested) {
          this.#idleReaped++
          stops.push(this.#stopEntry(e))
        }
      }
      if (entries.size === 0) this.#byWorkspace.delete(key)
    }
    await Promise.all(stops)
  }

  /** For shutdown: stops every process (SIGTERM, then SIGKILL after the grace) and resolves when all are dead. */
  async killAll (): Promise<void> {
    this.#closed = true
    if (this.#timer !== undefined) clearInterval(this.#timer)
    const all = [...this.#byWorkspace.values()].flatMap((m) => [...m.values()])
    await Promise.all(all.map(async (e) => await this.#stopEntry(e)))
  }

  stats (): ProcessManagerStats {
    let running = 0
    let tracked = 0
    for (const entries of this.#byWorkspace.values()) {
      for (const e of entries.values()) {
        tracked++
        if (e.status === 'RUNNING') running++
      }
    }
    return {
      running,
      tracked,
      workspaces: this.#byWorkspace.size,
      spawned: this.#spawned,
      stopped: this.#stopped,
      idleReaped: this.#idleReaped
    }
  }

  async #stopEntry (e: Entry): Promise<void> {
    if (e.status !== 'RUNNING') return
    if (!e.stopRequested) {
      e.stopRequested = true
      this.#stopped++
    }
    await e.proc.terminate(this.#stopGraceMs)
    await e.exited
  }

  #get (ws: Workspace, processId: string): Entry {
    const e = this.#byWorkspace.get(workspaceKey(ws))?.get(processId)
    if (e === undefined) throw new ToolError(`Unknown processId: ${processId}`)
    e.lastAccess = this.#now()
    return e
  }

  #evictOverflow (entries: Map<string, Entry>): void {
    if (entries.size <= this.#maxEntries) return
    const finished = [...entries.values()]
      .filter((e) => e.status !== 'RUNNING')
      .sort((a, b) => (a.endedAt ?? 0) - (b.endedAt ?? 0))
    for (const e of finished) {
      if (entries.size <= this.#maxEntries) break
      entries.delete(e.id)
    }
  }

  #snapshot (e: Entry): ProcessSnapshot {
    return {
      processId: e.id,
      command: e.command,
      workingDirectory: e.workingDirectory,
      status: e.status,
      pid: e.proc.pid ?? null,
      exitCode: e.exitCode,
      startedAt: e.startedAt,
      endedAt: e.endedAt,
      ...(e.quotaExceeded ? { quotaExceeded: true as const } : {})
    }
  }

  #pipeLines (stream: Readable, prefix: string, ring: LogRing): void {
    const decoder = new StringDecoder('utf8')
    let pending = ''
    const emit = (text: string): void => {
      pending += text
      let nl = pending.indexOf('\n')
      while (nl >= 0) {
        ring.append(`${prefix}${pending.slice(0, nl)}\n`)
        pending = pending.slice(nl + 1)
        nl = pending.indexOf('\n')
      }
      if (pending.length > MAX_PENDING_LINE) {
        ring.append(`${prefix}${pending}\n`)
        pending = ''
      }
    }
    stream.on('data', (chunk: Buffer) => emit(decoder.write(chunk)))
    stream.on('error', () => {})
    stream.once('end', () => {
      emit(decoder.end())
      if (pending.length > 0) ring.append(`${prefix}${pending}\n`)
      pending = ''
    })
  }
}
