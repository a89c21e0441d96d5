import { hostname } from 'node:os'
import { performance } from 'node:perf_hooks'
import { HttpError, quoted } from '../errors.js'
import type { Logger } from '../logger.js'
import { silentLogger } from '../logger.js'
import type { CallEvent } from '../routing/call-events.js'
import type { InvokeOutcome } from '../routing/router.js'
import { actingUserId } from '../routing/tenancy.js'
import type { Caller } from '../routing/types.js'
import { entryText, GLOBAL_TENANT } from './entry.js'
import type { CallRecord, DeferredHash, JournalMode } from './entry.js'
import { decodeCursor, encodeCursor } from './store.js'
import type { JournalQuery, JournalStore, PendingEntry } from './store.js'

export interface JournalOptions {
  mode: JournalMode
  store: JournalStore
  logger?: Logger
  /** Names this process in each entry; default `{hostname}:{pid}`. */
  instance?: string
  /** Entries waiting to be written, at most (beyond: dropped and counted). Default 10,000. */
  queueMaxEntries?: number
  /** UTF-16 units of entry JSON waiting to be written, at most. Default 16 Mi (32 MiB). */
  queueMaxChars?: number
}

/** What the gateway knows of a call besides its outcome. */
export interface CallFacts {
  callId: string
  name: string
  /** As the caller sent them (an object, or the JSON string a model emitted). */
  arguments: unknown
  /** The tenant the call acted for; undefined for none (journaled under GLOBAL_TENANT). */
  userId: string | undefined
  serverId: string | undefined
  keyId: string | undefined
  /** performance.now() when the call arrived: the duration of a refused call. */
  startedAt: number
  /** The approval a held call ran (or was refused) under. */
  approvalId?: string | undefined
  /** The `run_tools_script` call whose script made this call. */
  parentCallId?: string | undefined
}

/** What GET /users/{userId}/invocations accepts, as the query string gives it. */
export interface InvocationsQuery {
  since?: string
  until?: string
  tool?: string
  isError?: boolean
  limit?: number
  cursor?: string
}

export interface JournalStats {
  /** Entries written to the store so far. */
  written: number
  /** Entries given up (queue full, store unreachable or failing) so far. */
  dropped: number
  /** Entries waiting now. */
  queued: number
}

/** Calls recorded but not yet turned into entries, at most: they hold the call's arguments and output until the next turn of the event loop. */
const RAW_MAX = 4096
/** Entries per store append (one Redis script call), and their JSON size at most: a batch holds Redis for its whole run. */
const BATCH = 256
const BATCH_CHARS = 4 * 1024 * 1024
/** A page of GET /users/{userId}/invocations holds at most this many entries (larger limits are lowered to it). */
const PAGE_MAX = 500
const PAGE_DEFAULT = 50
/** An NDJSON export sends at most this many entries (a tenant's journal holds JOURNAL_MAX_ENTRIES). */
const EXPORT_MAX = 1_000_000
/** A failing store is logged at most this often. */
const WARN_EVERY_MS = 10_000

/**
 * The invocation journal (docs/ARCHITECTURE.md#journal): every call through /invoke,
 * /invoke/batch and /mcp, per tenant, masked and capped. Recording is O(1) on the request path:
 * the call is queued, turned into an entry on a later turn of the event loop, and written in
 * batches by one writer. A store that is slow or away never delays or fails a call: the bounded
 * queue fills and what does not fit is dropped and counted (`gateway_journal_dropped_total`).
 */
export class Journal {
  readonly mode: JournalMode
  readonly backend: JournalStore['backend']
  readonly #store: JournalStore
  readonly #logger: Logger
  readonly #instance: string
  readonly #queueMax: number
  readonly #queueMaxChars: number
  #raw: CallRecord[] = []
  #pending: PendingEntry[] = []
  #pendingChars = 0
  #scheduled = false
  #writing = false
  #lingering: NodeJS.Timeout | undefined
  #written = 0
  #dropped = 0
  #lastWarn = 0
  #droppedSinceWarn = 0

  constructor (opts: JournalOptions) {
    this.mode = opts.mode
    this.#store = opts.store
    this.backend = opts.store.backend
    this.#logger = opts.logger ?? silentLogger
    this.#instance = opts.instance ?? `${hostname()}:${process.pid}`
    this.#queueMax = opts.queueMaxEntries ?? 10_000
    this.#queueMaxChars = opts.queueMaxChars ?? 16 * 1024 * 1024
  }

  /** Whether calls are recorded at all (JOURNAL is not `off`). */
  get enabled (): boolean {
    return this.mode !== 'off'
  }

  /** Whether entries keep the trace, so the gateway asks sources for it even when the caller did not. */
  get wantsTrace (): boolean {
    return this.mode === 'full'
  }

  stats (): JournalStats {
    return { written: this.#written, dropped: this.#dropped, queued: this.#raw.length + this.#pending.length }
  }

  /**
   * The journal's listener on the gateway's outcome observer (docs/ARCHITECTURE.md#journal): a
   * finished call (it ran, or the gateway refused it) is recorded; the other ends are answers
   * without a run of their own (held, decided elsewhere, refused before they were a call).
   */
  recordCall (call: CallEvent): void {
    if (call.end === 'finished') this.recordOutcome(call, call.outcome)
  }

  /** Records one outcome of Gateway.invoke: a result, or a call refused before any tool ran. */
  recordOutcome (facts: CallFacts, outcome: InvokeOutcome): void {
    if (this.mode === 'off') return
    if (outcome.ok) {
      const r = outcome.result
      this.record({
        callId: facts.callId,
        endedAt: Date.now(),
        userId: facts.userId,
        name: facts.name,
        route: r.route,
        serverId: facts.serverId ?? null,
        arguments: facts.arguments ?? {},
        output: r.output,
        isError: r.isError,
        error: r.error,
        truncated: r.truncated,
        trace: r.trace,
        durationMs: r.durationMs,
        toolMs: r.toolMs,
        keyId: facts.keyId ?? null,
        checkpointId: r.checkpointId ?? null,
        approvalId: facts.approvalId ?? null,
        parentCallId: facts.parentCallId ?? null,
        // One call of several rounds: each round is an entry under the call's id, and a round that asked says so.
        status: r.status ?? null
      })
      return
    }
    this.record({
      callId: facts.callId,
      endedAt: Date.now(),
      userId: facts.userId,
      name: facts.name,
      route: null,
      serverId: null,
      arguments: facts.arguments ?? {},
      output: null,
      isError: true,
      error: { code: outcome.error.code, message: outcome.error.message },
      truncated: false,
      trace: null,
      durationMs: Math.round((performance.now() - facts.startedAt) * 1000) / 1000,
      toolMs: 0,
      keyId: facts.keyId ?? null,
      checkpointId: null,
      approvalId: facts.approvalId ?? null,
      parentCallId: facts.parentCallId ?? null,
      status: null
    })
  }

  /** Queues one call. Never throws, never waits. */
  record (call: CallRecord): void {
    if (this.mode === 'off') return
    if (this.#raw.length >= RAW_MAX) {
      this.#drop(1, undefined)
      return
    }
    this.#raw.push(call)
    if (!this.#scheduled) {
      this.#scheduled = true
      // After the response: the handler's reply is written before the check phase runs.
      setImmediate(() => this.#build())
    }
  }

  #build (): void {
    this.#scheduled = false
    const calls = this.#raw
    this.#raw = []
    if (this.mode === 'off') return
    const deferHash = this.#store.fillsHash === true
    for (const call of calls) {
      let json: string
      let hashLater: DeferredHash | undefined
      try {
        ({ json, hashLater } = entryText(call, this.mode, this.#instance, deferHash))
      } catch (err) {
        this.#drop(1, err)
        continue
      }
      if (this.#pending.length >= this.#queueMax || this.#pendingChars + json.length > this.#queueMaxChars) {
        this.#drop(1, undefined)
        continue
      }
      this.#pending.push({ tenant: call.userId ?? GLOBAL_TENANT, callId: call.callId, name: call.name, isError: call.isError, json, hashLater })
      this.#pendingChars += json.length
    }
    this.#kick()
  }

  /**
   * Starts the writer. A store with a round trip per append (Redis) waits `lingerMs` first unless a
   * full batch is there: under load that gathers many calls into one command, which is most of
   * the journal's CPU cost there.
   */
  #kick (): void {
    if (this.#writing || this.#lingering !== undefined || this.#pending.length === 0) return
    const linger = this.#store.lingerMs ?? 0
    if (linger > 0 && this.#pending.length < BATCH) {
      this.#lingering = setTimeout(() => {
        this.#lingering = undefined
        if (!this.#writing) this.#write().catch(() => {})
      }, linger)
      this.#lingering.unref()
      return
    }
    // #write never rejects: a failing store is counted in it.
    this.#write().catch(() => {})
  }

  async #write (): Promise<void> {
    if (this.#writing) return
    this.#writing = true
    try {
      while (this.#pending.length > 0) {
        let n = 0
        let chars = 0
        while (n < this.#pending.length && n < BATCH && (n === 0 || chars + (this.#pending[n] as PendingEntry).json.length <= BATCH_CHARS)) {
          chars += (this.#pending[n] as PendingEntry).json.length
          n++
        }
        const batch = this.#pending.splice(0, n)
        this.#pendingChars -= chars
        try {
          const n = await this.#store.append(batch)
          this.#written += n
          if (n < batch.length) this.#drop(batch.length - n, new Error(`${batch.length - n} of ${batch.length} entries failed`))
        } catch (err) {
          this.#drop(batch.length, err)
        }
      }
    } finally {
      this.#writing = false
    }
    // Entries that arrived while the last batch was written.
    this.#kick()
  }

  #drop (n: number, err: unknown): void {
    this.#dropped += n
    this.#droppedSinceWarn += n
    const now = Date.now()
    if (now - this.#lastWarn < WARN_EVERY_MS) return
    this.#lastWarn = now
    const reason = err instanceof Error ? err.message : 'the journal queue is full'
    this.#logger.warn({ dropped: this.#droppedSinceWarn, backend: this.backend, reason }, 'journal entries dropped')
    this.#droppedSinceWarn = 0
  }

  /** Resolves once everything recorded so far was written or dropped, or after `timeoutMs`. */
  async flush (timeoutMs = 5000): Promise<void> {
    const deadline = Date.now() + timeoutMs
    while ((this.#scheduled || this.#raw.length > 0 || this.#pending.length > 0 || this.#writing || this.#lingering !== undefined) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
  }

  /** The tenant whose journal `userId` names, if the caller may read it (the workspace routes' rule). */
  #tenant (caller: Caller, userId: string): string {
    if (userId === GLOBAL_TENANT) {
      if (!caller.isAdmin) throw new HttpError('GW_TENANT_MISMATCH', `Only an admin key reads the journal of calls without a tenant (${GLOBAL_TENANT})`)
      return GLOBAL_TENANT
    }
    return actingUserId(caller, userId) ?? userId
  }

  /** GET /users/{userId}/invocations: one page, newest first. */
  async list (caller: Caller, userId: string, query: InvocationsQuery): Promise<{ invocations: unknown[], nextCursor: string | null }> {
    const tenant = this.#tenant(caller, userId)
    const q = parseQuery(query, Math.min(query.limit ?? PAGE_DEFAULT, PAGE_MAX))
    const page = await this.#read(async () => await this.#store.page(tenant, q))
    return { invocations: page.entries.map((e) => JSON.parse(e) as unknown), nextCursor: page.next === null ? null : encodeCursor(page.next) }
  }

  /**
   * The NDJSON export: every entry the query selects, newest first, one JSON line each, read page
   * by page as the consumer pulls (so memory stays one page), up to `limit` or EXPORT_MAX.
   * Tenancy and the query are checked before the first line, so a refusal is still an HTTP error.
   */
  exportLines (caller: Caller, userId: string, query: InvocationsQuery, signal?: AbortSignal): AsyncGenerator<string> {
    const tenant = this.#tenant(caller, userId)
    const max = Math.min(query.limit ?? EXPORT_MAX, EXPORT_MAX)
    const q = parseQuery(query, Math.min(max, PAGE_MAX))
    const store = this.#store
    const read = this.#read.bind(this)
    return (async function * () {
      let sent = 0
      let before = q.before
      for (;;) {
        if (signal?.aborted === true) return
        const page = await read(async () => await store.page(tenant, {
          ...q,
          limit: Math.min(PAGE_MAX, max - sent),
          ...(before !== undefined ? { before } : {})
        }))
        for (const e of page.entries) yield e + '\n'
        sent += page.entries.length
        if (page.next === null || sent >= max) return
        before = page.next
      }
    })()
  }

  /** GET /users/{userId}/invocations/{callId}. */
  async get (caller: Caller, userId: string, callId: string): Promise<unknown> {
    const tenant = this.#tenant(caller, userId)
    const json = await this.#read(async () => await this.#store.get(tenant, callId))
    if (json === undefined) throw new HttpError('GW_INVOCATION_NOT_FOUND', `No journal entry for callId '${quoted(callId)}' of this tenant (never made, journaled with JOURNAL=off, or past JOURNAL_RETENTION or JOURNAL_MAX_ENTRIES)`)
    return JSON.parse(json)
  }

  async #read<T> (fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      if (err instanceof HttpError) throw err
      this.#logger.warn({ err, backend: this.backend }, 'journal read failed')
      throw new HttpError('GW_JOURNAL_UNAVAILABLE', 'The journal store (Redis) does not answer; retry later')
    }
  }

  /** Writes what is queued (within `timeoutMs`), then closes the store. */
  async close (timeoutMs = 2000): Promise<void> {
    await this.flush(timeoutMs)
    await this.#store.close()
  }
}

const EPOCH_MS = /^\d{1,15}$/
const ISO = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2})?)?$/

/** `since`/`until` as epoch ms or ISO 8601 (a date, or a date-time with optional zone). */
function parseTime (name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined
  const t = text.trim()
  const ms = EPOCH_MS.test(t) ? Number(t) : ISO.test(t) ? Date.parse(t) : Number.NaN
  if (!Number.isFinite(ms) || ms < 0) {
    throw new HttpError('GW_INVALID_RANGE', `${name} must be an ISO 8601 time (2026-01-31T12:00:00Z) or epoch milliseconds, got ${JSON.stringify(text.slice(0, 64))}`)
  }
  return ms
}

function parseQuery (query: InvocationsQuery, limit: number): JournalQuery {
  const since = parseTime('since', query.since)
  const until = parseTime('until', query.until)
  if (since !== undefined && until !== undefined && since > until) {
    throw new HttpError('GW_INVALID_RANGE', 'since is after until')
  }
  return {
    limit: Math.max(1, limit),
    ...(since !== undefined ? { since } : {}),
    ...(until !== undefined ? { until } : {}),
    ...(query.tool !== undefined ? { tool: query.tool } : {}),
    ...(query.isError !== undefined ? { isError: query.isError } : {}),
    ...(query.cursor !== undefined ? { before: decodeCursor(query.cursor) } : {})
  }
}
