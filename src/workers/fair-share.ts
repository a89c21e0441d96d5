/**
 * Who runs next on grep's regex workers (docs/ARCHITECTURE.md#fd-layer). The workers used to be
 * one first-come-first-served queue for the whole process, so twelve catastrophic patterns of one
 * tenant (each running to its 5 s budget) made another tenant's 2 ms grep wait a minute. Here
 * each tenant has its own FIFO queue and the tenants are served round-robin, by these rules:
 *
 * - A tenant running fewer batches goes first: nobody gets a second worker while a tenant with
 *   none is waiting (a batch cannot be pre-empted, so this is decided when a worker frees).
 * - Within `capacity` (the pool's size) any tenant may run. Beyond it, up to `burst` more turns
 *   go only to a tenant that runs nothing and is within its budget: a waiting tenant does not sit
 *   behind another tenant's runaway regex for that regex's whole budget; the kernel shares the
 *   cores between the threads instead. One tenant alone never holds more than `capacity`.
 * - Each tenant has a budget of worker time per sliding window. A tenant over it waits behind
 *   every tenant within it and gets no burst turn; it is still served when nobody else waits
 *   (the workers are not left idle for a rule's sake).
 *
 * It grants turns only; the pool maps a turn to a worker and reports the time the turn used.
 */

/** Tuning of a FairShare. */
export interface FairShareOptions {
  /** Turns any tenant may take at once (the pool's size). */
  capacity: number
  /** Extra turns beyond `capacity`, each for a tenant that runs nothing and is within budget. */
  burst: number
  /** Worker ms a tenant may use per window before it waits behind the others. */
  budgetMs: number
  /** Length of the sliding window over which `budgetMs` is counted. */
  windowMs: number
  /** Clock in ms (tests). */
  now?: () => number
}

/** A granted turn: give it back with release(), once. */
export interface Turn { readonly tenant: string }

interface Waiter {
  resolve: (turn: Turn) => void
  reject: (err: unknown) => void
  signal: AbortSignal | undefined
  onAbort: () => void
}

interface TenantState {
  waiters: Waiter[]
  running: number
  /** Usage in the current fixed window (which began at `windowStart`) and in the one before. */
  windowStart: number
  current: number
  previous: number
}

/** Tenants remembered before forgotten idle ones are swept (each swept once its usage has expired). */
const SWEEP_FLOOR = 1024

export class FairShare {
  readonly #opts: Required<FairShareOptions>
  readonly #tenants = new Map<string, TenantState>()
  /** Tenants with waiters, in round-robin order: the one served goes to the back. */
  #order: string[] = []
  #running = 0
  #sweepAt = SWEEP_FLOOR
  #closed: Error | undefined

  constructor (opts: FairShareOptions) {
    this.#opts = { now: () => performance.now(), ...opts }
  }

  /** Turns running now, in total. */
  get running (): number { return this.#running }

  /** Tenants remembered (running, waiting, or with usage in the window). */
  get tracked (): number { return this.#tenants.size }

  /** Waits for a turn of `tenant`. Rejects with `signal.reason` when aborted while waiting. */
  async acquire (tenant: string, signal?: AbortSignal): Promise<Turn> {
    if (this.#closed !== undefined) throw this.#closed
    if (signal?.aborted === true) throw signal.reason
    const st = this.#state(tenant)
    const turn = new Promise<Turn>((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = st.waiters.indexOf(waiter)
          if (i === -1) return
          st.waiters.splice(i, 1)
          if (st.waiters.length === 0) this.#order = this.#order.filter((t) => t !== tenant)
          reject(signal?.reason)
        }
      }
      signal?.addEventListener('abort', waiter.onAbort, { once: true })
      st.waiters.push(waiter)
      if (st.waiters.length === 1) this.#order.push(tenant)
    })
    this.#dispatch()
    return await turn
  }

  /** Gives a turn back and charges `usedMs` of worker time to its tenant. */
  release (turn: Turn, usedMs: number): void {
    const st = this.#state(turn.tenant)
    st.running--
    this.#running--
    this.#roll(st)
    st.current += Math.max(0, usedMs)
    this.#dispatch()
  }

  /** Worker ms `tenant` used over the last window (the previous fixed window pro rata). */
  usage (tenant: string): number {
    const st = this.#tenants.get(tenant)
    if (st === undefined) return 0
    this.#roll(st)
    const into = (this.#opts.now() - st.windowStart) / this.#opts.windowMs
    return st.current + st.previous * Math.max(0, 1 - into)
  }

  /** Refuses new turns and rejects every waiter with `reason`. */
  close (reason: Error): void {
    this.#closed = reason
    for (const tenant of this.#order) {
      const st = this.#tenants.get(tenant)
      for (const w of st?.waiters.splice(0) ?? []) {
        w.signal?.removeEventListener('abort', w.onAbort)
        w.reject(reason)
      }
    }
    this.#order = []
  }

  #state (tenant: string): TenantState {
    let st = this.#tenants.get(tenant)
    if (st === undefined) {
      if (this.#tenants.size >= this.#sweepAt) this.#sweep()
      st = { waiters: [], running: 0, windowStart: this.#opts.now(), current: 0, previous: 0 }
      this.#tenants.set(tenant, st)
    }
    return st
  }

  /** Moves a tenant's fixed windows on to the one that holds now. */
  #roll (st: TenantState): void {
    const elapsed = this.#opts.now() - st.windowStart
    if (elapsed < this.#opts.windowMs) return
    const windows = Math.floor(elapsed / this.#opts.windowMs)
    st.previous = windows === 1 ? st.current : 0
    st.current = 0
    st.windowStart += windows * this.#opts.windowMs
  }

  /** Forgets idle tenants whose usage has expired; keeps memory bounded by recent users. */
  #sweep (): void {
    for (const [tenant, st] of this.#tenants) {
      if (st.running === 0 && st.waiters.length === 0 && this.usage(tenant) === 0) this.#tenants.delete(tenant)
    }
    this.#sweepAt = Math.max(SWEEP_FLOOR, 2 * this.#tenants.size)
  }

  /** Grants turns while a waiting tenant may take one. */
  #dispatch (): void {
    for (;;) {
      const tenant = this.#pick()
      if (tenant === undefined) return
      const st = this.#tenants.get(tenant) as TenantState
      const w = st.waiters.shift() as Waiter
      this.#order = this.#order.filter((t) => t !== tenant)
      if (st.waiters.length > 0) this.#order.push(tenant)
      w.signal?.removeEventListener('abort', w.onAbort)
      st.running++
      this.#running++
      w.resolve({ tenant })
    }
  }

  /**
   * The next tenant to serve: the first in round-robin order among those running the fewest
   * turns, within budget before over it; beyond `capacity`, only a tenant running none and within budget.
   */
  #pick (): string | undefined {
    const full = this.#running >= this.#opts.capacity
    if (this.#running >= this.#opts.capacity + this.#opts.burst) return undefined
    let best: string | undefined
    let bestRank = Infinity
    for (const tenant of this.#order) {
      const st = this.#tenants.get(tenant) as TenantState
      const over = this.usage(tenant) >= this.#opts.budgetMs
      if (full && (st.running > 0 || over)) continue
      // Fewest running first, then within budget: the rank orders by both, ties keep round-robin order.
      const rank = st.running * 2 + (over ? 1 : 0)
      if (rank < bestRank) { best = tenant; bestRank = rank }
    }
    return best
  }
}
