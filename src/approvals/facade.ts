import { performance } from 'node:perf_hooks'
import { HttpError } from '../errors.js'
import type { CallObserver } from '../routing/call-events.js'
import { refusalOutput, toolErrorCode, toolErrorOutput } from '../routing/output.js'
import type { InvokeOutcome, InvokeResult } from '../routing/router.js'
import { actingUserId } from '../routing/tenancy.js'
import type { Caller, Tier } from '../routing/types.js'
import type { ApprovalService, ApprovalView, HeldRequest } from './service.js'
import type { ApprovalRecord } from './store.js'

/** The longest inline wait for a decision (waitForApprovalMs), whatever the body asks. */
const APPROVAL_WAIT_MAX_MS = 300_000

/** A call the tool policy holds (requireApproval), as the gateway hands it over. */
export interface HeldCall {
  /** The tenant the call acts for; undefined for none. */
  userId: string | undefined
  name: string
  callId: string
  /** The policy rule that asked for the approval. */
  rule: string
  /** The tier the name resolved to. */
  route: Tier
  arguments: Record<string, unknown> | string
  allow: HeldRequest['allow']
  context: HeldRequest['context']
  caller: HeldRequest['caller']
  clientCapabilities?: HeldRequest['clientCapabilities']
  inputResponses?: HeldRequest['inputResponses']
  requestState?: HeldRequest['requestState']
}

/** An approved call, to run as its maker made it. */
export interface ApprovedCall {
  approvalId: string
  name: string
  callId: string
  userId: string | undefined
  arguments: HeldRequest['arguments']
  allow: HeldRequest['allow']
  context: HeldRequest['context']
  caller: HeldRequest['caller']
  clientCapabilities?: HeldRequest['clientCapabilities']
  inputResponses?: HeldRequest['inputResponses']
  requestState?: HeldRequest['requestState']
}

export interface DecisionBody {
  decision: 'approve' | 'deny'
  reason?: string
}

export interface ApprovalFacadeOptions {
  approvals: ApprovalService
  /** Where a denial is published, like every answered call (the journal records it). */
  calls: CallObserver
  /** Runs an approved call through the tool use case (Gateway.runApproved: journaled, with its approvalId). */
  run: (call: ApprovedCall) => Promise<InvokeOutcome>
  /** INVOKE_TIMEOUT_MS: an inline wait for a decision never outlasts a call. */
  invokeTimeoutMs: number
}

/**
 * The approval use cases (docs/ARCHITECTURE.md#policies), one method per HTTP operation of the
 * /approvals routes, with who may see and decide what applied here; and the two the gateway
 * uses for a call its tool policy holds: holding it, and waiting inline for its decision.
 * The store, the one-decision rule and the webhook are ApprovalService's.
 */
export class ApprovalFacade {
  readonly #approvals: ApprovalService
  readonly #calls: CallObserver
  readonly #run: ApprovalFacadeOptions['run']
  readonly #invokeTimeoutMs: number

  constructor (opts: ApprovalFacadeOptions) {
    this.#approvals = opts.approvals
    this.#calls = opts.calls
    this.#run = opts.run
    this.#invokeTimeoutMs = opts.invokeTimeoutMs
  }

  /** Holds a call; the message is the held call's result output, for the model. */
  async hold (call: HeldCall): Promise<{ approvalId: string, message: string }> {
    const request: HeldRequest = {
      arguments: call.arguments,
      allow: call.allow,
      context: call.context,
      route: call.route,
      caller: call.caller,
      ...(call.clientCapabilities !== undefined ? { clientCapabilities: call.clientCapabilities } : {}),
      ...(call.inputResponses !== undefined ? { inputResponses: call.inputResponses } : {}),
      ...(call.requestState !== undefined ? { requestState: call.requestState } : {})
    }
    const record = await this.#approvals.hold({ userId: call.userId, name: call.name, callId: call.callId, rule: call.rule, request })
    return {
      approvalId: record.approvalId,
      message: `The call awaits a human's approval (approvalId ${record.approvalId}, rule '${call.rule}'); it has not run. Its result comes once a person approves or denies it (until ${new Date(record.expiresAt).toISOString()}); do not repeat the call.`
    }
  }

  /**
   * Waits inline (waitForApprovalMs, at most APPROVAL_WAIT_MAX_MS and INVOKE_TIMEOUT_MS) for a
   * held call's result: the decided call's, or the refusal of an expired one; undefined when it
   * is still pending.
   */
  async awaitDecision (approvalId: string, waitMs: number, signal: AbortSignal): Promise<InvokeResult | undefined> {
    const ms = Math.min(waitMs, APPROVAL_WAIT_MAX_MS, this.#invokeTimeoutMs)
    if (ms <= 0) return undefined
    const record = await this.#approvals.wait(approvalId, ms, signal)
    if (record === undefined) return undefined
    return record.result !== undefined ? this.#approvals.openResult(record) as InvokeResult | undefined : expiredResult(record, undefined)
  }

  /** GET /approvals?userId=: the tenant's pending approvals (a tenant or approver key: its own). */
  async list (requestedUserId: string | undefined, caller: Caller): Promise<{ approvals: ApprovalView[] }> {
    const userId = actingUserId(caller, requestedUserId)
    const records = await this.#approvals.listPending(userId)
    return { approvals: records.map((r) => this.#approvals.view(r, expiredResult)) }
  }

  /** GET /approvals/{approvalId}. */
  async get (approvalId: string, caller: Caller): Promise<ApprovalView> {
    const record = await this.#approvals.get(approvalId)
    if (!caller.isAdmin && caller.userId !== record.userId) throw new HttpError('GW_TENANT_MISMATCH', 'The approval belongs to another tenant than the key\'s')
    return this.#approvals.view(record, expiredResult)
  }

  /**
   * POST /approvals/{approvalId}: an admin or the tenant's approver decides. The decision is a
   * compare-and-set in the store, so of concurrent decisions (on any instances) one wins; the
   * winner runs the call here, whichever instance held it, journals it and stores its result.
   */
  async decide (approvalId: string, body: DecisionBody, caller: Caller): Promise<ApprovalView> {
    const approvals = this.#approvals
    const current = await approvals.get(approvalId)
    if (!caller.isAdmin) {
      if (caller.role !== 'approver') throw new HttpError('GW_FORBIDDEN', 'Only an admin or an approver key (key:approver:{userId}) decides approvals')
      if (caller.userId !== current.userId) throw new HttpError('GW_TENANT_MISMATCH', 'The approval belongs to another tenant than the approver key\'s')
    }
    const { record, request } = await approvals.decide(approvalId, body.decision, { keyId: caller.keyId, reason: body.reason })
    const userId = record.userId === '' ? undefined : record.userId
    let result: InvokeResult
    if (body.decision === 'deny') {
      const reason = body.reason !== undefined && body.reason !== '' ? body.reason : 'no reason given'
      result = refusedResult(record, request.route as Tier, 'approval-denied', `A human denied the call: ${reason}`)
      this.#calls.publish({
        via: 'approval',
        end: 'finished',
        outcome: { ok: true, result },
        callId: record.callId,
        name: record.name,
        arguments: request.arguments,
        userId,
        serverId: undefined,
        keyId: request.caller.keyId,
        startedAt: performance.now(),
        approvalId,
        parentCallId: undefined
      })
    } else {
      // The call acts as its maker did, not as the approver; its own deadline bounds it, not the approver's connection.
      const outcome = await this.#run({
        approvalId,
        name: record.name,
        callId: record.callId,
        userId,
        arguments: request.arguments,
        allow: request.allow,
        context: request.context,
        caller: request.caller,
        clientCapabilities: request.clientCapabilities,
        inputResponses: request.inputResponses,
        requestState: request.requestState
      })
      if (outcome.ok) {
        const { toolMs: _toolMs, ...rest } = outcome.result
        result = { ...rest, toolMs: 0 }
      } else {
        result = {
          ...refusedResult(record, request.route as Tier, 'tool-error', outcome.error.message),
          output: refusalOutput(outcome.error.code, outcome.error.message, record.name, record.callId),
          error: { code: outcome.error.code, message: outcome.error.message }
        }
      }
    }
    await approvals.complete(record, result)
    return { ...approvals.view(record, () => null), result: publicResult(result) }
  }
}

/** The result of a held call nobody decided within APPROVAL_TTL. */
function expiredResult (record: ApprovalRecord, request: HeldRequest | undefined): InvokeResult {
  return refusedResult(record, (request?.route ?? record.route ?? 'builtin') as Tier, 'approval-expired', `Nobody approved or denied the call before ${new Date(record.expiresAt).toISOString()} (APPROVAL_TTL); it did not run`)
}

/** The result of a held call that did not run (denied, expired, or refused when it was to run). */
function refusedResult (record: ApprovalRecord, route: Tier, reason: 'approval-denied' | 'approval-expired' | 'tool-error', message: string): InvokeResult {
  return {
    callId: record.callId,
    name: record.name,
    route,
    output: toolErrorOutput(reason, message, record.name, record.callId),
    isError: true,
    error: { code: toolErrorCode(reason), message },
    truncated: false,
    trace: null,
    durationMs: 0,
    toolMs: 0
  }
}

/** A result as the API shows it (toolMs is for the gateway's own accounting). */
function publicResult (result: InvokeResult): Omit<InvokeResult, 'toolMs'> {
  const { toolMs: _toolMs, ...rest } = result
  return rest
}
