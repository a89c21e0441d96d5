/**
 * The built-in checks of a large value, off the event loop. The checks are linear in what they
 * read, but a call's arguments are as large as the body limit (2 MiB by default): text made to
 * keep the detectors busy costs ~100 ms per MiB, and on the event loop that froze every tenant's
 * requests for as long. A value heavier than OFFLOAD_MIN_WEIGHT (scan.ts weightOf) is checked
 * in a worker thread of a FairWorkerPool (src/workers/): tenants take turns, each call under a
 * CPU budget, and the loop only copies the value to the worker and the answer back.
 */
import { defaultPoolSize, FairWorkerPool } from '../workers/index.js'
import type { PoolCall, PoolErrors } from '../workers/index.js'
import type { BuiltinCheck, Scan, SideName } from './scan.js'

/** Values lighter than this (in weightOf's characters) are checked in process: the round trip would cost more than the checks. */
export const OFFLOAD_MIN_WEIGHT = 64 * 1024

/** CPU time the checks of one call may use in the workers, in all (they need ~0.2 s for a 2 MiB body made to be costly). */
const CHECK_BUDGET_MS = 10_000
/** Wall time of the same, whatever the host's load. */
const CHECK_WALL_MS = 3 * CHECK_BUDGET_MS
/** Worker time a tenant may use per window before its checks wait behind other tenants'. */
const TENANT_BUDGET_MS = 2 * CHECK_BUDGET_MS
const TENANT_WINDOW_MS = 60_000

/** Why a check of a large value did not complete: the engine treats the value as not checked. */
export class CheckIncomplete extends Error {}

const ERRORS: PoolErrors = {
  closed: () => new CheckIncomplete('the gateway is shutting down'),
  cancelled: () => new CheckIncomplete('the call was cancelled'),
  timeout: () => new CheckIncomplete(`it used more than its ${CHECK_BUDGET_MS / 1000} s of CPU`),
  stopped: () => new CheckIncomplete('its worker stopped (out of memory?)'),
  failed: (message) => new CheckIncomplete(`it failed: ${message}`)
}

/** One call's checks in the workers: its tenant, what it has left to spend (offloadBudget), its signal. */
export type OffloadCall = PoolCall

/** A fresh budget for one call's checks. */
export function offloadBudget (): OffloadCall['budget'] {
  return { leftMs: CHECK_BUDGET_MS, wallLeftMs: CHECK_WALL_MS }
}

/** The workers that check large values (scan-worker.ts), shared by every call of the process. */
export class ScanOffload {
  readonly #pool: FairWorkerPool

  constructor (size = defaultPoolSize()) {
    // The build's .js; under tsx (npm start, the tests) the worker inherits its loader, which finds the .ts.
    this.#pool = new FairWorkerPool(
      { source: new URL('./scan-worker.js', import.meta.url), maxOldGenerationSizeMb: 512 },
      { size, tenantBudgetMs: TENANT_BUDGET_MS, tenantWindowMs: TENANT_WINDOW_MS, errors: ERRORS }
    )
  }

  /** Worker threads started; at most 2 x size. */
  get workers (): number { return this.#pool.workers }

  /** One check of one side's value in a worker; rejects with CheckIncomplete when it could not complete. */
  async scan<T> (side: SideName, check: BuiltinCheck, value: T, call: OffloadCall): Promise<Scan<T>> {
    const out = await this.#pool.run<{ kinds: string[], redacted?: T }>({ side, check, value }, [], call)
    return { kinds: out.kinds, redacted: out.kinds.length > 0 ? out.redacted as T : value }
  }

  async close (): Promise<void> {
    await this.#pool.close()
  }
}
