/** A held call's state as stored: `expired` is never stored, it is a pending record past its expiresAt. */
export type StoredStatus = 'pending' | 'approved' | 'denied'

/** One held call. `request` and `result` are sealed JSON (opaque to the store). */
export interface ApprovalRecord {
  approvalId: string
  /** The tenant the call acts for ('' for none: an admin's call that named no tenant). */
  userId: string
  name: string
  callId: string
  /** The requireApproval pattern that held the call. */
  rule: string
  status: StoredStatus
  createdAt: number
  expiresAt: number
  decidedAt?: number
  /** keyId of the deciding key ('' in open mode). */
  decidedBy?: string
  reason?: string
  /** The tier the call would run in (kept when the request is dropped: the outcome of an expired call names it). */
  route?: string
  /** The full request (arguments, allow, context, caller), sealed; '' once dropped (expired undecided, see `put`). */
  request: string
  /** The call's result once it ran (approved) or its refusal (denied), sealed. */
  result?: string
}

export type DecideOutcome =
  | { ok: true, record: ApprovalRecord }
  | { ok: false, reason: 'not-found' | 'expired' | 'decided', record?: ApprovalRecord }

/**
 * Where held calls live. `decide` is the one compare-and-set: of any number of concurrent
 * decisions on any number of instances, exactly one sees `ok: true`, and only it runs the call.
 */
export interface ApprovalStore {
  readonly backend: 'memory' | 'redis'
  /**
   * Stores a new pending record. With `maxPendingPerTenant`, a tenant already holding that many
   * pending, unexpired records is refused (TenantApprovalsFull, nothing kept), decided atomically
   * with the record's admission: racing instances never pass the bound together. The tenant's
   * records that expired undecided lose their request (their outcome stays readable): each held
   * the whole call for a day past its expiry.
   */
  put: (record: ApprovalRecord, opts?: { maxPendingPerTenant?: number }) => Promise<void>
  get: (approvalId: string) => Promise<ApprovalRecord | undefined>
  /** Pending, unexpired approvals of a tenant, oldest first, at most `limit`. */
  listPending: (userId: string, now: number, limit: number) => Promise<ApprovalRecord[]>
  /** pending and unexpired at `now` -> `status`; otherwise why not. */
  decide: (approvalId: string, status: 'approved' | 'denied', facts: { now: number, decidedBy: string, reason: string }) => Promise<DecideOutcome>
  /** Stores the result of a decided call (the winner of `decide` only). */
  setResult: (approvalId: string, result: string) => Promise<void>
  close: () => Promise<void>
}

/** Decided and expired records stay readable this long (GET shows the result; a late decision gets 409/410, not 404). */
export const KEEP_AFTER_MS = 24 * 60 * 60 * 1000

/**
 * Without Redis: records in a Map, bounded. Past `maxRecords` the records that are no longer
 * pending go first, oldest first; if every record is pending, `put` refuses (the caller answers
 * 503 rather than forgetting a held call).
 */
export class MemoryApprovalStore implements ApprovalStore {
  readonly backend = 'memory' as const
  readonly #records = new Map<string, ApprovalRecord>()
  readonly #max: number

  constructor (maxRecords = 10_000) {
    this.#max = maxRecords
  }

  async put (record: ApprovalRecord, opts: { maxPendingPerTenant?: number } = {}): Promise<void> {
    this.#sweep(record.createdAt)
    this.#dropExpiredRequests(record.userId, record.createdAt)
    const max = opts.maxPendingPerTenant
    if (max !== undefined && this.#pendingOf(record.userId, record.createdAt, max) >= max) throw new TenantApprovalsFull(max)
    if (this.#records.size >= this.#max) {
      for (const [id, r] of this.#records) {
        if (r.status !== 'pending' || r.expiresAt <= record.createdAt) this.#records.delete(id)
        if (this.#records.size < this.#max) break
      }
    }
    if (this.#records.size >= this.#max) throw new ApprovalStoreFull(this.#max)
    this.#records.set(record.approvalId, { ...record })
  }

  async get (approvalId: string): Promise<ApprovalRecord | undefined> {
    const r = this.#records.get(approvalId)
    return r === undefined ? undefined : { ...r }
  }

  async listPending (userId: string, now: number, limit: number): Promise<ApprovalRecord[]> {
    const out: ApprovalRecord[] = []
    for (const r of this.#records.values()) {
      if (r.userId === userId && r.status === 'pending' && r.expiresAt > now) out.push({ ...r })
      if (out.length >= limit) break
    }
    return out
  }

  async decide (approvalId: string, status: 'approved' | 'denied', facts: { now: number, decidedBy: string, reason: string }): Promise<DecideOutcome> {
    // No await between the read and the write: the event loop makes this the compare-and-set.
    const r = this.#records.get(approvalId)
    if (r === undefined) return { ok: false, reason: 'not-found' }
    if (r.status !== 'pending') return { ok: false, reason: 'decided', record: { ...r } }
    if (r.expiresAt <= facts.now) return { ok: false, reason: 'expired', record: { ...r } }
    r.status = status
    r.decidedAt = facts.now
    r.decidedBy = facts.decidedBy
    r.reason = facts.reason
    return { ok: true, record: { ...r } }
  }

  async setResult (approvalId: string, result: string): Promise<void> {
    const r = this.#records.get(approvalId)
    if (r !== undefined) r.result = result
  }

  async close (): Promise<void> {
    this.#records.clear()
  }

  /** The tenant's pending, unexpired records, counted up to `max` (at most the store's bound of records read). */
  #pendingOf (userId: string, now: number, max: number): number {
    let n = 0
    for (const r of this.#records.values()) {
      if (r.userId === userId && r.status === 'pending' && r.expiresAt > now && ++n >= max) break
    }
    return n
  }

  /** The tenant's records that expired undecided keep their outcome, not their request. */
  #dropExpiredRequests (userId: string, now: number): void {
    for (const r of this.#records.values()) {
      if (r.userId === userId && r.status === 'pending' && r.expiresAt <= now && r.request !== '') r.request = ''
    }
  }

  /** Drops records past their keeping time (insertion order is creation order). */
  #sweep (now: number): void {
    for (const [id, r] of this.#records) {
      if ((r.decidedAt ?? r.expiresAt) + KEEP_AFTER_MS > now) break
      this.#records.delete(id)
    }
  }
}

/** The tenant holds `maxPendingPerTenant` calls awaiting approval already (TENANT_MAX_PENDING_APPROVALS). */
export class TenantApprovalsFull extends Error {
  constructor (readonly max: number) {
    super(`the tenant has ${max} calls awaiting approval, TENANT_MAX_PENDING_APPROVALS`)
    this.name = 'TenantApprovalsFull'
  }
}

export class ApprovalStoreFull extends Error {
  constructor (max: number) {
    super(`${max} calls are already awaiting approval on this instance`)
    this.name = 'ApprovalStoreFull'
  }
}
