/**
 * A per-tenant bound on heavy file work (long read_file scans, grep and glob walks). The event
 * loop and libuv's four threads are shared by every tenant; without a bound, one tenant's dozens
 * of concurrent deep reads of a big file queue so many chunk callbacks that everyone else's
 * requests (even /healthz) wait hundreds of milliseconds behind them. With it, a tenant runs at
 * most `perTenant` such operations at once and queues the rest (bounded too: past `maxWaiting`
 * the call is refused at once rather than held in memory).
 */
import { ToolError } from '../types.js'

interface Waiter { resolve: (release: () => void) => void, reject: (err: Error) => void, signal: AbortSignal | undefined, onAbort: () => void }

interface Lane { running: number, waiting: Waiter[] }

class TenantIoGate {
  readonly #perTenant: number
  readonly #maxWaiting: number
  readonly #lanes = new Map<string, Lane>()

  constructor (opts: { perTenant?: number, maxWaiting?: number } = {}) {
    this.#perTenant = opts.perTenant ?? 2
    this.#maxWaiting = opts.maxWaiting ?? 64
  }

  /** Runs `fn` when the tenant has a free slot. */
  async run<T> (tenant: string, signal: AbortSignal | undefined, fn: () => Promise<T>): Promise<T> {
    const release = await this.#acquire(tenant, signal)
    try {
      return await fn()
    } finally {
      release()
    }
  }

  /** Slots in use and calls waiting, for one tenant (tests, metrics). */
  load (tenant: string): { running: number, waiting: number } {
    const lane = this.#lanes.get(tenant)
    return { running: lane?.running ?? 0, waiting: lane?.waiting.length ?? 0 }
  }

  #acquire (tenant: string, signal: AbortSignal | undefined): Promise<() => void> {
    if (signal?.aborted === true) return Promise.reject(new ToolError('Cancelled'))
    let lane = this.#lanes.get(tenant)
    if (lane === undefined) {
      lane = { running: 0, waiting: [] }
      this.#lanes.set(tenant, lane)
    }
    if (lane.running < this.#perTenant) {
      lane.running++
      return Promise.resolve(this.#releaser(tenant, lane))
    }
    if (lane.waiting.length >= this.#maxWaiting) {
      return Promise.reject(new ToolError(`Too many file operations in progress for this tenant (${this.#perTenant} running, ${lane.waiting.length} waiting); retry later`))
    }
    const l = lane
    return new Promise((resolve, reject) => {
      const w: Waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = l.waiting.indexOf(w)
          if (i !== -1) l.waiting.splice(i, 1)
          reject(new ToolError('Cancelled'))
        }
      }
      signal?.addEventListener('abort', w.onAbort, { once: true })
      l.waiting.push(w)
    })
  }

  #releaser (tenant: string, lane: Lane): () => void {
    let done = false
    return () => {
      if (done) return
      done = true
      const next = lane.waiting.shift()
      if (next !== undefined) {
        next.signal?.removeEventListener('abort', next.onAbort)
        next.resolve(this.#releaser(tenant, lane))
        return
      }
      lane.running--
      if (lane.running === 0) this.#lanes.delete(tenant)
    }
  }
}

/** The gateway's one gate: shared by the file tools of every workspace of a tenant. */
export const tenantIo = new TenantIoGate()
