/**
 * Worker threads shared fairly between tenants, for work that must not run on the event loop:
 * grep's tenant-written regular expressions (src/builtin/tools/grep/regex-worker.ts) and the
 * guardrails' checks of large values (src/guardrails/offload.ts). A FairShare (fair-share.ts)
 * decides who runs next; each job runs under its call's budget of CPU time (read per thread from
 * procfs) and wall time, and a worker that outruns it, is cancelled or dies is terminated and
 * replaced. Docs: docs/ARCHITECTURE.md#workers.
 */
import { availableParallelism } from 'node:os'
import { Worker } from 'node:worker_threads'
import type { TransferListItem } from 'node:worker_threads'
import { FairShare } from './fair-share.js'
import type { Turn } from './fair-share.js'
import { threadCpuMs } from './thread.js'

/** How a pool starts its workers. */
export interface WorkerSpec {
  /** The worker module's file URL (`new URL('./x-thread.js', import.meta.url)`): it posts announceThread's message first, then answers jobs. */
  source: URL
  /** Each worker's old-generation heap cap: a huge job cannot take the host's memory. */
  maxOldGenerationSizeMb: number
}

/** What one call has left to spend on a pool's workers (CPU ms, wall ms); shared by all its jobs. */
export interface WorkBudget { leftMs: number, wallLeftMs: number }

/** Who a job runs for and what its call has left. */
export interface PoolCall {
  /** The tenant key: the workers are shared fairly between tenants. */
  tenant: string
  budget: WorkBudget
  signal?: AbortSignal | undefined
}

/** How a pool's jobs fail, in its users' words. */
export interface PoolErrors {
  closed: () => Error
  cancelled: () => Error
  /** The job outran its call's budget (its worker was terminated). */
  timeout: () => Error
  /** The worker stopped under the job (a crash, its heap cap). */
  stopped: () => Error
  /** The worker answered the job with an error. */
  failed: (message: string) => Error
}

export interface FairWorkerPoolOptions {
  /** Workers any tenant may use at once; up to as many more for tenants running none (FairShare's burst). */
  size: number
  /** Worker time (CPU ms) a tenant may use per window before it waits behind the others. */
  tenantBudgetMs: number
  tenantWindowMs: number
  errors: PoolErrors
}

/** How often a running job's CPU time is checked. */
const BUDGET_CHECK_MS = 50

interface Slot { worker: Worker, busy: boolean, tid?: number }

/** A job's answer: `{ id, ok: true, out }` or `{ id, ok: false, error }`; a worker's first message is `{ tid }`. */
interface Answer { id?: number, tid?: number, ok?: boolean, out?: unknown, error?: string }

/**
 * A fixed number of workers shared between tenants: per-tenant queues served round-robin, no
 * second worker for a tenant while another waits, a budget of worker time per tenant, and up to
 * `size` extra workers for tenants running none while every worker is busy (a tenant does not sit
 * behind another's runaway job for its whole budget). Workers start on first use; idle ones do
 * not keep the process alive.
 */
export class FairWorkerPool {
  readonly #slots: Slot[] = []
  readonly #share: FairShare
  readonly #spec: WorkerSpec
  readonly #errors: PoolErrors
  #nextId = 1
  #closed = false

  constructor (spec: WorkerSpec, opts: FairWorkerPoolOptions) {
    this.#spec = spec
    this.#errors = opts.errors
    this.#share = new FairShare({ capacity: opts.size, burst: opts.size, budgetMs: opts.tenantBudgetMs, windowMs: opts.tenantWindowMs })
  }

  /** Worker threads started (busy or idle); at most 2 x size. */
  get workers (): number { return this.#slots.length }

  #spawn (slot: Slot): Worker {
    const w = new Worker(this.#spec.source, {
      resourceLimits: { maxOldGenerationSizeMb: this.#spec.maxOldGenerationSizeMb }
    })
    w.on('error', () => {})
    w.on('message', (msg: Answer) => {
      if (typeof msg.tid === 'number' && slot.worker === w) slot.tid = msg.tid
    })
    // Idle workers must not keep the process alive (a job in flight is held by its timer).
    // After the listeners: adding a 'message' listener refs the worker's port again.
    w.unref()
    return w
  }

  /** Waits for the tenant's turn, then takes an idle worker or starts one (a turn always finds one). */
  async #acquire (tenant: string, signal: AbortSignal | undefined): Promise<{ slot: Slot, turn: Turn }> {
    if (this.#closed) throw this.#errors.closed()
    let turn: Turn
    try {
      turn = await this.#share.acquire(tenant, signal)
    } catch (err) {
      if (this.#closed) throw this.#errors.closed()
      throw signal?.aborted === true ? this.#errors.cancelled() : err
    }
    // Turns never outnumber 2 x size, and each holds one slot: an idle one or room for a new one.
    let slot = this.#slots.find((s) => !s.busy)
    if (slot === undefined) {
      slot = { worker: undefined as unknown as Worker, busy: true }
      slot.worker = this.#spawn(slot)
      this.#slots.push(slot)
    }
    slot.busy = true
    return { slot, turn }
  }

  #release (slot: Slot, turn: Turn, usedMs: number): void {
    slot.busy = false
    this.#share.release(turn, usedMs)
  }

  /** Replaces a worker that was terminated (timeout, abort, crash) and gives the turn back. */
  #replace (slot: Slot, turn: Turn, usedMs: number): void {
    slot.worker.terminate().catch(() => {})
    slot.worker.removeAllListeners('message')
    if (this.#closed) return
    slot.tid = undefined
    slot.worker = this.#spawn(slot)
    this.#release(slot, turn, usedMs)
  }

  /**
   * Runs one job: `message` (with an `id` added) posted to a worker, its `out` the answer.
   * Rejects with the pool's errors when the call's budget runs out (the worker is killed), when
   * the call is cancelled, when the worker dies, or when it answers with an error. The time used
   * is taken off `call.budget`.
   */
  async run<T> (message: Record<string, unknown>, transfer: readonly TransferListItem[], call: PoolCall): Promise<T> {
    const { budget, signal } = call
    if (budget.leftMs <= 0 || budget.wallLeftMs <= 0) throw this.#errors.timeout()
    const { slot, turn } = await this.#acquire(call.tenant, signal)
    if (signal?.aborted === true) { this.#release(slot, turn, 0); throw this.#errors.cancelled() }
    const id = this.#nextId++
    const began = performance.now()
    let cpu0 = threadCpuMs(slot.tid)
    let cpuUsed = 0
    return await new Promise<T>((resolve, reject) => {
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
        if (healthy) this.#release(slot, turn, used)
        else this.#replace(slot, turn, used)
        fn()
      }
      const onMessage = (msg: Answer): void => {
        if (msg.id !== id) return
        const cpu = threadCpuMs(slot.tid)
        if (cpu0 !== undefined && cpu !== undefined) cpuUsed = cpu - cpu0
        if (msg.ok === true) finish(() => { resolve(msg.out as T) }, true)
        else finish(() => { reject(this.#errors.failed(msg.error ?? 'unknown error')) }, true)
      }
      const onExit = (): void => { finish(() => { reject(this.#errors.stopped()) }, false) }
      const onAbort = (): void => { finish(() => { reject(this.#errors.cancelled()) }, false) }
      const timer = setInterval(() => {
        const cpu = threadCpuMs(slot.tid)
        if (cpu0 === undefined) cpu0 = cpu
        else if (cpu !== undefined) cpuUsed = cpu - cpu0
        const wall = performance.now() - began
        const over = cpu0 !== undefined ? cpuUsed >= budget.leftMs : wall >= budget.leftMs
        if (!over && wall < budget.wallLeftMs) return
        finish(() => { reject(this.#errors.timeout()) }, false)
        budget.leftMs = 0
      }, BUDGET_CHECK_MS)
      slot.worker.on('message', onMessage)
      slot.worker.once('exit', onExit)
      signal?.addEventListener('abort', onAbort, { once: true })
      slot.worker.postMessage({ ...message, id }, transfer)
    })
  }

  /** Terminates every worker (tests, shutdown); waiting and later jobs fail with the pool's `closed` error. */
  async close (): Promise<void> {
    this.#closed = true
    this.#share.close(this.#errors.closed())
    const slots = this.#slots.splice(0)
    await Promise.all(slots.map(async (s) => await s.worker.terminate().catch(() => 0)))
  }
}

/** One worker per core beyond the first (the event loop keeps one to itself), at least 1, at most 4. */
export function defaultPoolSize (): number {
  return Math.max(1, Math.min(4, availableParallelism() - 1))
}
