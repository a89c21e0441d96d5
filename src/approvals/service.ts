import { EventEmitter } from 'node:events'
import { randomUUID } from 'node:crypto'
import { HttpError } from '../errors.js'
import type { Logger } from '../logger.js'
import type { SecretBox } from '../registry/secrets.js'
import { maskValue } from '../secrets/detector.js'
import { ApprovalStoreFull, TenantApprovalsFull } from './store.js'
import type { ApprovalRecord, ApprovalStore } from './store.js'
import type { ApprovalWebhook } from './webhook.js'

/** What a held call needs to run later, on any instance: the request as the caller sent it, and who sent it. */
export interface HeldRequest {
  arguments: Record<string, unknown> | string
  allow?: { functions?: string[], mcp?: string[] } | undefined
  context?: Record<string, unknown> | undefined
  /** The route the name resolved to when the call was held. */
  route: string
  caller: { isAdmin: boolean, keyId?: string | undefined }
  /**
   * The call's MCP input round (src/routing/input-rounds.ts), as its body gave it: what it can
   * answer when the server asks for input, and on a retry its answers and the gateway's handle.
   */
  clientCapabilities?: Record<string, unknown> | undefined
  inputResponses?: Record<string, unknown> | undefined
  requestState?: string | undefined
}

export type ApprovalStatus = 'pending' | 'approved' | 'denied' | 'expired'

/** An approval as the API shows it (arguments masked like the journal's). */
export interface ApprovalView {
  approvalId: string
  userId: string | null
  name: string
  callId: string
  rule: string
  status: ApprovalStatus
  arguments: unknown
  createdAt: string
  expiresAt: string
  decidedAt: string | null
  reason: string | null
  /** The call's result once it ran (approved) or was refused (denied, expired); null before. */
  result: unknown
}

/** An approval with its request opened, for the instance that runs it. */
export interface OpenedApproval {
  record: ApprovalRecord
  request: HeldRequest
}

export interface ApprovalServiceOptions {
  store: ApprovalStore
  box: SecretBox
  ttlMs: number
  logger: Logger
  webhook?: ApprovalWebhook | undefined
  now?: () => number
  /** How often a waiting call looks at the store for a decision made on another instance. Default 250. */
  pollMs?: number
  /** TENANT_MAX_PENDING_APPROVALS: calls one tenant may have awaiting approval at once (unbounded when unset). */
  maxPendingPerTenant?: number
}

const LIST_MAX = 500

/**
 * Held calls (human in the loop): holding a call, listing and reading approvals, the one
 * compare-and-set that decides each, and waiting for a decision. Running the decided call is
 * the gateway's: this service hands the winner of a decision the opened request.
 * Requests and results are sealed with SECRETS_KEY (bound to the approval) when it is set.
 */
export class ApprovalService {
  readonly #store: ApprovalStore
  readonly #box: SecretBox
  readonly #ttlMs: number
  readonly #logger: Logger
  readonly #webhook: ApprovalWebhook | undefined
  readonly #now: () => number
  readonly #pollMs: number
  readonly #maxPending: number | undefined
  /** Decisions and results made on this instance, so a waiting call here need not wait for its next poll. */
  readonly #events = new EventEmitter()

  constructor (opts: ApprovalServiceOptions) {
    this.#store = opts.store
    this.#box = opts.box
    this.#ttlMs = opts.ttlMs
    this.#logger = opts.logger
    this.#webhook = opts.webhook
    this.#now = opts.now ?? Date.now
    this.#pollMs = opts.pollMs ?? 250
    this.#maxPending = opts.maxPendingPerTenant
    this.#events.setMaxListeners(0)
  }

  get backend (): 'memory' | 'redis' {
    return this.#store.backend
  }

  /** Holds one call; the webhook (if any) is told off the request path. */
  async hold (facts: { userId: string | undefined, name: string, callId: string, rule: string, request: HeldRequest }): Promise<ApprovalRecord> {
    const approvalId = `apr_${randomUUID().replace(/-/g, '')}`
    const createdAt = this.#now()
    const record: ApprovalRecord = {
      approvalId,
      userId: facts.userId ?? '',
      name: facts.name,
      callId: facts.callId,
      rule: facts.rule,
      status: 'pending',
      createdAt,
      expiresAt: createdAt + this.#ttlMs,
      route: facts.request.route,
      request: this.#box.sealValue(JSON.stringify(facts.request), `approval:${approvalId}:request`)
    }
    try {
      await this.#store.put(record, this.#maxPending === undefined ? {} : { maxPendingPerTenant: this.#maxPending })
    } catch (err) {
      if (err instanceof TenantApprovalsFull) {
        throw new HttpError('GW_TENANT_QUOTA_EXCEEDED', `The call needs an approval and cannot be held: ${err.message}; decide some, or wait for them to expire (APPROVAL_TTL)`)
      }
      if (err instanceof ApprovalStoreFull) throw new HttpError('GW_REGISTRY_UNAVAILABLE', `The call needs an approval and cannot be held: ${err.message}`)
      throw new HttpError('GW_REGISTRY_UNAVAILABLE', 'The call needs an approval and cannot be held: the approval store (Redis) does not answer')
    }
    this.#webhook?.notify({
      approvalId,
      userId: facts.userId ?? null,
      name: record.name,
      callId: record.callId,
      createdAt: new Date(record.createdAt).toISOString(),
      expiresAt: new Date(record.expiresAt).toISOString()
    })
    return record
  }

  /** One approval, 404 when unknown. */
  async get (approvalId: string): Promise<ApprovalRecord> {
    const record = await this.#read(() => this.#store.get(approvalId))
    if (record === undefined) throw notFound(approvalId)
    return record
  }

  async listPending (userId: string | undefined): Promise<ApprovalRecord[]> {
    return await this.#read(() => this.#store.listPending(userId ?? '', this.#now(), LIST_MAX))
  }

  /**
   * The compare-and-set: the one caller that gets the record back (of any number, on any
   * instance) decided it and must see the call through (run it, or store the refusal).
   */
  async decide (approvalId: string, decision: 'approve' | 'deny', by: { keyId: string | undefined, reason: string | undefined }): Promise<OpenedApproval> {
    const outcome = await this.#read(() => this.#store.decide(approvalId, decision === 'approve' ? 'approved' : 'denied', {
      now: this.#now(),
      decidedBy: by.keyId ?? '',
      reason: by.reason ?? ''
    }))
    if (!outcome.ok) {
      if (outcome.reason === 'not-found') throw notFound(approvalId)
      if (outcome.reason === 'expired') throw new HttpError('APPROVAL_EXPIRED', `Approval '${approvalId}' expired at ${new Date(outcome.record?.expiresAt ?? 0).toISOString()} without a decision; the call did not run`)
      throw new HttpError('GW_APPROVAL_DECIDED', `Approval '${approvalId}' was already ${outcome.record?.status ?? 'decided'}`)
    }
    this.#events.emit(approvalId)
    return { record: outcome.record, request: this.openRequest(outcome.record) }
  }

  /** Stores the result of a decided call (by the winner of `decide`). */
  async complete (record: ApprovalRecord, result: unknown): Promise<void> {
    const sealed = this.#box.sealValue(JSON.stringify(result), `approval:${record.approvalId}:result`)
    try {
      await this.#store.setResult(record.approvalId, sealed)
    } catch (err) {
      // The journal has the result too; only GET /approvals/{id} and waiting calls miss it.
      this.#logger.warn({ err, approvalId: record.approvalId }, 'approval result not stored')
    }
    this.#events.emit(record.approvalId)
  }

  /**
   * Waits up to `ms` for the call's outcome: the record once it has a result or expired, else
   * undefined. Polls the store (a decision may be made on any instance); a decision made here
   * wakes it at once.
   */
  async wait (approvalId: string, ms: number, signal: AbortSignal): Promise<ApprovalRecord | undefined> {
    const deadline = this.#now() + ms
    while (!signal.aborted) {
      const record = await this.#store.get(approvalId).catch(() => undefined)
      if (record !== undefined && (record.result !== undefined || (record.status === 'pending' && record.expiresAt <= this.#now()))) return record
      const left = deadline - this.#now()
      if (left <= 0) return undefined
      await new Promise<void>((resolve) => {
        const done = (): void => {
          clearTimeout(timer)
          this.#events.off(approvalId, done)
          signal.removeEventListener('abort', done)
          resolve()
        }
        const timer = setTimeout(done, Math.min(left, this.#pollMs))
        this.#events.on(approvalId, done)
        signal.addEventListener('abort', done)
      })
    }
    return undefined
  }

  /** The held request, opened. A record sealed with a key this instance lacks is a 503, never a guess. */
  openRequest (record: ApprovalRecord): HeldRequest {
    const opened = this.#box.openValue(record.request, `approval:${record.approvalId}:request`)
    if (!opened.ok) throw new HttpError('GW_REGISTRY_UNAVAILABLE', `The held call cannot be read: ${opened.message}`)
    return JSON.parse(opened.value) as HeldRequest
  }

  /** The stored result, opened; undefined when there is none (yet) or it cannot be opened. */
  openResult (record: ApprovalRecord): unknown {
    if (record.result === undefined) return undefined
    const opened = this.#box.openValue(record.result, `approval:${record.approvalId}:result`)
    return opened.ok ? JSON.parse(opened.value) as unknown : undefined
  }

  statusOf (record: ApprovalRecord): ApprovalStatus {
    return record.status === 'pending' && record.expiresAt <= this.#now() ? 'expired' : record.status
  }

  /** The API's view; `expiredResult` shapes the refusal of a call nobody decided. */
  view (record: ApprovalRecord, expiredResult: (record: ApprovalRecord, request: HeldRequest | undefined) => unknown): ApprovalView {
    const status = this.statusOf(record)
    let request: HeldRequest | undefined
    try {
      request = this.openRequest(record)
    } catch {
      request = undefined
    }
    let args: unknown = request === undefined ? null : request.arguments
    if (typeof args === 'string') {
      try {
        args = JSON.parse(args)
      } catch {
        // A model's unparsable JSON string is shown as it came.
      }
    }
    return {
      approvalId: record.approvalId,
      userId: record.userId === '' ? null : record.userId,
      name: record.name,
      callId: record.callId,
      rule: record.rule,
      status,
      arguments: maskValue(args, { strings: true }),
      createdAt: new Date(record.createdAt).toISOString(),
      expiresAt: new Date(record.expiresAt).toISOString(),
      decidedAt: record.decidedAt === undefined ? null : new Date(record.decidedAt).toISOString(),
      reason: record.reason === undefined || record.reason === '' ? null : record.reason,
      result: status === 'expired' ? expiredResult(record, request) : (this.openResult(record) ?? null)
    }
  }

  async close (): Promise<void> {
    this.#webhook?.close()
    await this.#store.close()
  }

  async #read<T> (fn: () => Promise<T>): Promise<T> {
    try {
      return await fn()
    } catch (err) {
      if (err instanceof HttpError) throw err
      throw new HttpError('GW_REGISTRY_UNAVAILABLE', 'The approval store (Redis) does not answer')
    }
  }
}

function notFound (approvalId: string): HttpError {
  return new HttpError('GW_APPROVAL_NOT_FOUND', `No approval '${approvalId.length > 100 ? approvalId.slice(0, 100) + '...' : approvalId}'`)
}
