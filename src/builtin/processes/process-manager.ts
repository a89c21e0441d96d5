import { randomBytes } from 'node:crypto'
import type { Readable } from 'node:stream'
import { StringDecoder } from 'node:string_decoder'
import { ToolError, type Workspace } from '../types.js'
import type { Sandbox, SandboxedProcess } from '../sandbox/types.js'
import { LogRing, type LogSlice } from './log-ring.js'

export type ProcessStatus = 'RUNNING' | 'EXITED' | 'STOPPED'

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
}

export interface ProcessLogs extends LogSlice {
  processId: string
  status: ProcessStatus
  exitCode: number | null
}

export interface ProcessManagerOptions {
  sandbox: Sandbox
  /** Running background processes per (tenant, workspace). Default 8. */
  maxRunningPerWorkspace?: number
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
}

/** Longest partial line held back before it is logged anyway (a prompt never ends with a newline). */
const MAX_PENDING_LINE = 8192

interface Entry {
  id: string
  key: string
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
  exited: Promise<void>
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
  readonly #maxEntries: number
  readonly #exitedRetentionMs: number
  readonly #idleTimeoutMs: number
  readonly #stopGraceMs: number
  readonly #now: () => number
  readonly #byWorkspace = new Map<string, Map<string, Entry>>()
  readonly #timer: NodeJS.Timeout | undefined
  #closed = false
  #spawned = 0
  #stopped = 0
  #idleReaped = 0

  constructor (opts: ProcessManagerOptions) {
    this.#sandbox = opts.sandbox
    this.#maxRunning = opts.maxRunningPerWorkspace ?? 8
    this.#maxEntries = Math.max(this.#maxRunning, opts.maxEntriesPerWorkspace ?? 64)
    this.#exitedRetentionMs = opts.exitedRetentionMs ?? 10 * 60_000
    this.#idleTimeoutMs = opts.idleTimeoutMs ?? 30 * 60_000
    this.#stopGraceMs = opts.stopGraceMs ?? 1000
    this.#now = opts.now ?? Date.now
    const every = opts.reapIntervalMs ?? 60_000
    if (every > 0) {
      this.#timer = setInterval(() => { this.reap().catch(() => {}) }, every)
      this.#timer.unref()
    }
  }

  async start (ws: Workspace, req: StartRequest): Promise<ProcessSnapshot> {
    if (this.#closed) throw new ToolError('The gateway is shutting down', 'sandbox')
    const key = workspaceKey(ws)
    const entries = this.#byWorkspace.get(key) ?? new Map<string, Entry>()
    const running = [...entries.values()].filter((e) => e.status === 'RUNNING').length
    if (running >= this.#maxRunning) {
      throw new ToolError(
        `Too many running background processes in this workspace (limit ${this.#maxRunning}); stop one first`,
        'sandbox'
      )
    }
    await this.#sandbox.prepareWorkspace(ws)
    // Re-checked after the await: shutdown may have begun meanwhile.
    if (this.#closed) throw new ToolError('The gateway is shutting down', 'sandbox')
    const proc = this.#sandbox.spawn({ workspace: ws, command: req.command, cwd: req.cwd, stdin: 'pipe' })
    if (proc.spawnError !== undefined) throw new ToolError('The sandbox could not start the command', 'sandbox')
    this.#spawned++
    const now = this.#now()
    const entry: Entry = {
      id: `proc_${randomBytes(16).toString('hex')}`,
      key,
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
      exited: Promise.resolve()
    }
    this.#pipeLines(proc.stdout, '[stdout] ', entry.ring)
    this.#pipeLines(proc.stderr, '[stderr] ', entry.ring)
    entry.exited = proc.exited.then((exit) => {
      entry.status = entry.stopRequested ? 'STOPPED' : 'EXITED'
      entry.exitCode = exit.exitCode ?? -1
      entry.endedAt = this.#now()
    })
    entries.set(entry.id, entry)
    this.#byWorkspace.set(key, entries)
    this.#evictOverflow(entries)
    return this.#snapshot(entry)
  }

  status (ws: Workspace, processId: string): ProcessSnapshot {
    return this.#snapshot(this.#get(ws, processId))
  }

  logs (ws: Workspace, processId: string, offset: number | undefined, limit: number | undefined): ProcessLogs {
    const e = this.#get(ws, processId)
    const max = Math.min(limit ?? ws.limits.bashLogChars, ws.limits.maxProcessOutputChars)
    const slice = e.ring.read(offset ?? 0, max)
    return { processId: e.id, ...slice, status: e.status, exitCode: e.exitCode }
  }

  async write (ws: Workspace, processId: string, input: string): Promise<{ process: ProcessSnapshot, bytesWritten: number }> {
    const e = this.#get(ws, processId)
    const stdin = e.proc.stdin
    if (e.status !== 'RUNNING' || stdin === null || stdin.destroyed || !stdin.writable) {
      throw new ToolError(`Process is not running: ${processId}`)
    }
    const data = Buffer.from(input, 'utf8')
    await new Promise<void>((resolve, reject) => {
      stdin.write(data, (err) => { if (err == null) resolve(); else reject(err) })
    }).catch(() => { throw new ToolError(`Process is not accepting input: ${processId}`) })
    return { process: this.#snapshot(e), bytesWritten: data.length }
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
      endedAt: e.endedAt
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
