/**
 * Runs tenants' JavaScript regular expressions off the event loop, with a hard time budget
 * (docs/ARCHITECTURE.md#fd-layer). V8's RegExp backtracks: `(a+)+\s` over 30 `a`s runs for
 * minutes and cannot be interrupted from inside, so a match running on the main thread froze
 * every tenant's requests. Here the matching runs in worker threads; a batch that outlives the
 * call's remaining budget gets its worker terminated (terminate() stops a running RegExp) and
 * replaced, and the call fails with a clear tool error.
 *
 * The matching runs on src/workers/' FairWorkerPool (fair between tenants), in match-thread.ts.
 */
import { defaultPoolSize, FairWorkerPool } from '../../../workers/index.js'
import type { WorkBudget } from '../../../workers/index.js'
import { ToolError } from '../../types.js'

/**
 * CPU time of matching one grep call may use in total. CPU, not wall time: on a loaded host a
 * legitimate search gets less of a core and must not fail for it (wall time is the fallback where
 * a thread's CPU time cannot be read). Time waiting for a free worker is not counted.
 */
export const GREP_REGEX_BUDGET_MS = 5000
/** Wall-clock bound on the same matching, whatever the host's load: 3 x the CPU budget. */
const GREP_REGEX_WALL_MS = 3 * GREP_REGEX_BUDGET_MS
export const GREP_MAX_LINE_CHARS = 500

export const REGEX_TIMEOUT_MESSAGE = 'Pattern took too long to evaluate (possible catastrophic backtracking); simplify it'

export interface FileMatches {
  /** [line number, content cut to GREP_MAX_LINE_CHARS]. */
  m: Array<[number, string]>
  /** Matching lines in the file. */
  t: number
}

/** What one grep call has left to spend (CPU ms, wall ms); shared by all its batches. */
export type RegexBudget = WorkBudget

/** Creates a fresh per-call budget. */
export function regexBudget (): RegexBudget {
  return { leftMs: GREP_REGEX_BUDGET_MS, wallLeftMs: GREP_REGEX_WALL_MS }
}

export interface RegexJob {
  source: string
  flags: string
  /** Lines to keep per file (the rest are only counted). */
  room: number
  /** File contents; each must own its ArrayBuffer (they are transferred, not copied). */
  files: Uint8Array[]
}

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

const REGEX_ERRORS = {
  closed: () => new ToolError('grep is shutting down'),
  cancelled: () => new ToolError('Cancelled'),
  timeout: () => new ToolError(REGEX_TIMEOUT_MESSAGE),
  stopped: () => new ToolError('The regular expression worker stopped unexpectedly'),
  failed: (message: string) => new ToolError(`The regular expression failed: ${message}`)
}

/**
 * grep's regex workers: a FairWorkerPool (src/workers/) of match-thread.ts. A call's batches are
 * queued one at a time, so a hostile pattern holds one worker for at most its own call's budget.
 */
export class RegexPool {
  readonly #pool: FairWorkerPool

  constructor (readonly size: number = defaultPoolSize(), tenantBudgetMs = GREP_TENANT_BUDGET_MS, tenantWindowMs = GREP_TENANT_WINDOW_MS) {
    // A huge file splits into many strings: the heap cap keeps a worker from taking the host's memory.
    const spec = { source: new URL('./match-thread.js', import.meta.url), maxOldGenerationSizeMb: 512 }
    this.#pool = new FairWorkerPool(spec, { size, tenantBudgetMs, tenantWindowMs, errors: REGEX_ERRORS })
  }

  /** Worker threads started (busy or idle); at most 2 x size. */
  get workers (): number { return this.#pool.workers }

  /**
   * Matches one batch. Rejects with a ToolError when the budget runs out (the worker is killed),
   * when the call is cancelled, or when the RegExp throws (e.g. out of backtracking stack).
   */
  async match (job: RegexJob, call: RegexCall): Promise<FileMatches[]> {
    const transfer = [...new Set(job.files.map((f) => f.buffer as ArrayBuffer))]
    const msg = { source: job.source, flags: job.flags, room: job.room, maxLine: GREP_MAX_LINE_CHARS, files: job.files }
    return await this.#pool.run<FileMatches[]>(msg, transfer, call)
  }

  /** Terminates every worker (tests, shutdown). */
  async close (): Promise<void> {
    await this.#pool.close()
  }
}

let shared: RegexPool | undefined
/** The process-wide pool (workers start on first use). */
export function regexPool (): RegexPool {
  shared ??= new RegexPool()
  return shared
}
