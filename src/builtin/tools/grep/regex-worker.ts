/**
 * Runs tenants' JavaScript regular expressions off the event loop, with a hard time budget
 * (docs/ARCHITECTURE.md#fd-layer). V8's RegExp backtracks: `(a+)+\s` over 30 `a`s runs for
 * minutes and cannot be interrupted from inside, so a match running on the main thread froze
 * every tenant's requests. Here the matching runs in worker threads; a batch that outlives the
 * call's remaining budget gets its worker terminated (terminate() stops a running RegExp) and
 * replaced, and the call fails with a clear tool error.
 *
 * The matching runs on src/workers/' FairWorkerPool (fair between tenants). The worker is plain
 * JavaScript evaluated from a string: it needs none of the gateway's modules.
 */
import { defaultPoolSize, FairWorkerPool, THREAD_PRELUDE } from '../../../workers/index.js'
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
// Tells the pool its thread id (for its CPU time) and lowers its priority (src/workers/thread.ts).
${THREAD_PRELUDE}
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
 * grep's regex workers: a FairWorkerPool (src/workers/) of the worker above. A call's batches are
 * queued one at a time, so a hostile pattern holds one worker for at most its own call's budget.
 */
export class RegexPool {
  readonly #pool: FairWorkerPool

  constructor (readonly size: number = defaultPoolSize(), tenantBudgetMs = GREP_TENANT_BUDGET_MS, tenantWindowMs = GREP_TENANT_WINDOW_MS) {
    // A huge file splits into many strings: the heap cap keeps a worker from taking the host's memory.
    this.#pool = new FairWorkerPool({ source: WORKER_SOURCE, maxOldGenerationSizeMb: 512 }, { size, tenantBudgetMs, tenantWindowMs, errors: REGEX_ERRORS })
  }

  /** Worker threads started (busy or idle); at most 2 x size. */
  get workers (): number { return this.#pool.workers }

  /**
   * Matches one batch. Rejects with a ToolError when the budget runs out (the worker is killed),
   * when the call is cancelled, or when the RegExp throws (e.g. out of backtracking stack).
   */
  async match (job: RegexJob, call: RegexCall): Promise<FileMatches[]> {
    const transfer = [...new Set(job.files.map((f) => f.buffer as ArrayBuffer))]
    return await this.#pool.run<FileMatches[]>({ source: job.source, flags: job.flags, room: job.room, files: job.files }, transfer, call)
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
