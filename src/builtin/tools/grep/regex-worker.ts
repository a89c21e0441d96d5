/**
 * Runs tenants' JavaScript regular expressions off the event loop, with a hard time budget
 * (docs/ARCHITECTURE.md#fd-layer). V8's RegExp backtracks: `(a+)+\s` over 30 `a`s runs for
 * minutes and cannot be interrupted from inside, so a match running on the main thread froze
 * every tenant's requests. Here the matching runs in worker threads; a batch that outlives the
 * call's remaining budget gets its worker terminated (terminate() stops a running RegExp) and
 * replaced, and the call fails with a clear tool error.
 *
 * The worker is plain JavaScript evaluated from a string: worker threads do not inherit tsx's
 * TypeScript loader, so a .ts worker file would not load under `npm start`.
 */
import { readFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import { ToolError } from '../../types.js'
import { FairShare } from './fair-share.js'
import type { Turn } from './fair-share.js'

/**
 * CPU time of matching one grep call may use in total. CPU, not wall time: on a loaded host a
 * legitimate search gets less of a core and must not fail for it (wall time is the fallback where
 * a thread's CPU time cannot be read). Time waiting for a free worker is not counted.
 */
export const GREP_REGEX_BUDGET_MS = 5000
/** Wall-clock bound on the same matching, whatever the host's load: 3 x the CPU budget. */
const GREP_REGEX_WALL_MS = 3 * GREP_REGEX_BUDGET_MS
/** How often a running batch's CPU time is checked. */
const BUDGET_CHECK_MS = 50
export const GREP_MAX_LINE_CHARS = 500
/** Nice value of the worker threads (unprivileged: a thread may always lower its own priority). */
const WORKER_NICE = 10

export const REGEX_TIMEOUT_MESSAGE = 'Pattern took too long to evaluate (possible catastrophic backtracking); simplify it'

/**
 * The worker. A request is `{ id, source, flags, room, files: Uint8Array[] }`; for each file
 * (already known to be text, under the size cap) it splits lines as ripgrep sees them ('\n',
 * '\r' kept, a final empty line dropped; a line that is not valid UTF-8 never matches), tests the
 * RegExp and answers `{ id, ok, out: [{ m: [[line, content]...], t }] }` with at most `room`
 * lines kept per file (cut to GREP_MAX_LINE_CHARS) and every match counted in `t`.
 */
const WORKER_SOURCE = `
'use strict'
const { parentPort } = require('node:worker_threads')
// The thread's kernel id, so that the pool can read the CPU time this thread has used.
try {
  const tid = /task\\/(\\d+)$/.exec(require('node:fs').readlinkSync('/proc/thread-self'))
  if (tid !== null) {
    parentPort.postMessage({ tid: Number(tid[1]) })
    // Linux's nice value is per thread: a runaway regex yields the CPU to the event loop, which
    // serves every tenant (a busy worker otherwise halves the loop's share of the process's CPU).
    try { require('node:os').setPriority(Number(tid[1]), ${WORKER_NICE}) } catch {}
  }
} catch {}
const MAX_LINE = ${GREP_MAX_LINE_CHARS}
const fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const lenient = new TextDecoder('utf-8', { ignoreBOM: true })
let key
let re
function cut (line) {
  const s = line.endsWith('\\r') ? line.slice(0, -1) : line
  return s.length > MAX_LINE ? s.slice(0, MAX_LINE) + '...' : s
}
function lines (buf) {
  const text = lenient.decode(buf)
  let out
  if (!text.includes('\\uFFFD')) {
    out = text.split('\\n')
  } else {
    out = []
    let from = 0
    for (;;) {
      const nl = buf.indexOf(0x0a, from)
      const end = nl === -1 ? buf.length : nl
      try { out.push(fatal.decode(buf.subarray(from, end))) } catch { out.push(undefined) }
      if (nl === -1) break
      from = nl + 1
    }
  }
  if (out.length > 0 && out[out.length - 1] === '') out.pop()
  return out
}
parentPort.on('message', (msg) => {
  try {
    const k = msg.flags + '/' + msg.source
    if (k !== key) { re = new RegExp(msg.source, msg.flags); key = k }
    const out = []
    for (const buf of msg.files) {
      // Per file: files join a batch in the order their reads finish, not in walk order.
      let room = msg.room
      const ls = lines(buf)
      const m = []
      let t = 0
      for (let i = 0; i < ls.length; i++) {
        const line = ls[i]
        if (line === undefined || !re.test(line)) continue
        t++
        if (room > 0) { m.push([i + 1, cut(line)]); room-- }
      }
      out.push({ m, t })
    }
    parentPort.postMessage({ id: msg.id, ok: true, out })
  } catch (err) {
    parentPort.postMessage({ id: msg.id, ok: false, error: String((err && err.message) || err) })
  }
})
`

export interface FileMatches {
  /** [line number, content cut to GREP_MAX_LINE_CHARS]. */
  m: Array<[number, string]>
  /** Matching lines in the file. */
  t: number
}

/** What one grep call has left to spend (CPU ms, wall ms); shared by all its batches. */
export interface RegexBudget { leftMs: number, wallLeftMs: number }

/** Creates a fresh per-call budget. */
export function regexBudget (): RegexBudget {
  return { leftMs: GREP_REGEX_BUDGET_MS, wallLeftMs: GREP_REGEX_WALL_MS }
}

const TICK_MS = 10 // USER_HZ is 100 on every Linux ABI Node supports.

/** CPU ms (user + system) a thread of this process has used, or undefined where unreadable. */
function threadCpuMs (tid: number | undefined): number | undefined {
  if (tid === undefined) return undefined
  try {
    // Small procfs read: no disk, microseconds; done on a 50 ms tick only while a batch runs.
    const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'latin1')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS
  } catch {
    return undefined
  }
}

export interface RegexJob {
  source: string
  flags: string
  /** Lines to keep per file (the rest are only counted). */
  room: number
  /** File contents; each must own its ArrayBuffer (they are transferred, not copied). */
  files: Uint8Array[]
}

interface Slot { worker: Worker, busy: boolean, tid?: number }

/** Who a batch is matched for and what its call has left (see RegexPool.match). */
export interface RegexCall {
  /** The tenant key (Workspace.tenant): the workers are shared fairly between tenants. */
  tenant: string
  budget: RegexBudget
  signal?: AbortSignal
}

/** Worker time (CPU ms, as the per-call budget counts it) a tenant may use per window before it waits behind the others. */
const GREP_TENANT_BUDGET_MS = 2 * GREP_REGEX_BUDGET_MS
/** The sliding window of GREP_TENANT_BUDGET_MS. */
const GREP_TENANT_WINDOW_MS = 60_000

/**
 * A fixed number of workers shared between tenants by a FairShare (fair-share.ts): per-tenant
 * queues served round-robin, no second worker for a tenant while another waits, a budget of
 * worker time per tenant, and up to `size` extra workers for tenants running none while every
 * worker is busy (so a tenant does not sit behind another's runaway regex for its whole budget).
 * A call's batches are queued one at a time, so a hostile pattern holds one worker for at most
 * its own call's budget.
 */
export class RegexPool {
  private readonly slots: Slot[] = []
  private readonly share: FairShare
  private nextId = 1
  private closed = false

  constructor (readonly size: number = defaultPoolSize(), tenantBudgetMs = GREP_TENANT_BUDGET_MS, tenantWindowMs = GREP_TENANT_WINDOW_MS) {
    this.share = new FairShare({ capacity: size, burst: size, budgetMs: tenantBudgetMs, windowMs: tenantWindowMs })
  }

  /** Worker threads started (busy or idle); at most 2 x size. */
  get workers (): number { return this.slots.length }

  private spawn (slot?: Slot): Worker {
    const w = new Worker(WORKER_SOURCE, {
      eval: true,
      // A huge file splits into many strings: cap the heap so a worker cannot take the host's memory.
      resourceLimits: { maxOldGenerationSizeMb: 512 }
    })
    w.on('error', () => {})
    w.on('message', (msg: { tid?: number }) => {
      if (typeof msg.tid === 'number' && slot !== undefined && slot.worker === w) slot.tid = msg.tid
    })
    // Idle workers must not keep the process alive (a batch in flight is held by its timer).
    // After the listeners: adding a 'message' listener refs the worker's port again.
    w.unref()
    return w
  }

  /** Waits for the tenant's turn, then takes an idle worker or starts one (a turn always finds one). */
  private async acquire (tenant: string, signal: AbortSignal | undefined): Promise<{ slot: Slot, turn: Turn }> {
    if (this.closed) throw new ToolError('grep is shutting down')
    let turn: Turn
    try {
      turn = await this.share.acquire(tenant, signal)
    } catch (err) {
      if (err instanceof ToolError) throw err
      throw new ToolError('Cancelled')
    }
    // Turns never outnumber 2 x size, and each holds one slot: an idle one or room for a new one.
    let slot = this.slots.find((s) => !s.busy)
    if (slot === undefined) {
      slot = { worker: undefined as unknown as Worker, busy: true }
      slot.worker = this.spawn(slot)
      this.slots.push(slot)
    }
    slot.busy = true
    return { slot, turn }
  }

  private release (slot: Slot, turn: Turn, usedMs: number): void {
    slot.busy = false
    this.share.release(turn, usedMs)
  }

  /** Replaces a worker that was terminated (timeout, abort, crash) and gives the turn back. */
  private replace (slot: Slot, turn: Turn, usedMs: number): void {
    slot.worker.terminate().catch(() => {})
    slot.worker.removeAllListeners('message')
    if (this.closed) return
    slot.tid = undefined
    slot.worker = this.spawn(slot)
    this.release(slot, turn, usedMs)
  }

  /**
   * Matches one batch. Rejects with a ToolError when the budget runs out (the worker is killed),
   * when the call is cancelled, or when the RegExp throws (e.g. out of backtracking stack).
   */
  async match (job: RegexJob, call: RegexCall): Promise<FileMatches[]> {
    const { budget, signal } = call
    if (budget.leftMs <= 0 || budget.wallLeftMs <= 0) throw new ToolError(REGEX_TIMEOUT_MESSAGE)
    const { slot, turn } = await this.acquire(call.tenant, signal)
    if (signal?.aborted === true) { this.release(slot, turn, 0); throw new ToolError('Cancelled') }
    const id = this.nextId++
    const began = performance.now()
    let cpu0 = threadCpuMs(slot.tid)
    let cpuUsed = 0
    const transfer = [...new Set(job.files.map((f) => f.buffer as ArrayBuffer))]
    return await new Promise<FileMatches[]>((resolve, reject) => {
      let settled = false
      const finish = (fn: () => void, healthy: boolean): void => {
        if (settled) return
        settled = true
        clearInterval(timer)
        signal?.removeEventListener('abort', onAbort)
        slot.worker.off('message', onMessage)
        slot.worker.off('exit', onExit)
        const wall = performance.now() - began
        const used = cpu0 !== undefined ? cpuUsed : wall
        budget.wallLeftMs -= wall
        budget.leftMs -= used
        // Removing and adding 'message' listeners refs the port again: idle workers stay unref'd.
        slot.worker.unref()
        if (healthy) this.release(slot, turn, used)
        else this.replace(slot, turn, used)
        fn()
      }
      const onMessage = (msg: { id?: number, ok: boolean, out?: FileMatches[], error?: string }): void => {
        if (msg.id !== id) return
        const cpu = threadCpuMs(slot.tid)
        if (cpu0 !== undefined && cpu !== undefined) cpuUsed = cpu - cpu0
        if (msg.ok) finish(() => { resolve(msg.out as FileMatches[]) }, true)
        else finish(() => { reject(new ToolError(`The regular expression failed: ${msg.error ?? 'unknown error'}`)) }, true)
      }
      const onExit = (): void => { finish(() => { reject(new ToolError('The regular expression worker stopped unexpectedly')) }, false) }
      const onAbort = (): void => { finish(() => { reject(new ToolError('Cancelled')) }, false) }
      const timer = setInterval(() => {
        const cpu = threadCpuMs(slot.tid)
        if (cpu0 === undefined) cpu0 = cpu
        else if (cpu !== undefined) cpuUsed = cpu - cpu0
        const wall = performance.now() - began
        const over = cpu0 !== undefined ? cpuUsed >= budget.leftMs : wall >= budget.leftMs
        if (!over && wall < budget.wallLeftMs) return
        finish(() => { reject(new ToolError(REGEX_TIMEOUT_MESSAGE)) }, false)
        budget.leftMs = 0
      }, BUDGET_CHECK_MS)
      slot.worker.on('message', onMessage)
      slot.worker.once('exit', onExit)
      signal?.addEventListener('abort', onAbort, { once: true })
      slot.worker.postMessage({ id, source: job.source, flags: job.flags, room: job.room, files: job.files }, transfer)
    })
  }

  /** Terminates every worker (tests, shutdown). */
  async close (): Promise<void> {
    this.closed = true
    this.share.close(new ToolError('grep is shutting down'))
    const slots = this.slots.splice(0)
    await Promise.all(slots.map(async (s) => await s.worker.terminate().catch(() => 0)))
  }
}

/** One worker per core beyond the first (the event loop keeps one to itself), at least 1, at most 4. */
function defaultPoolSize (): number {
  return Math.max(1, Math.min(4, availableParallelism() - 1))
}

let shared: RegexPool | undefined
/** The process-wide pool (workers start on first use). */
export function regexPool (): RegexPool {
  shared ??= new RegexPool()
  return shared
}
