import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { Approval, ApprovalParams, ApprovalsQuery, ApprovalsResponse, DecisionBody } from '../src/api/approvals.js'
import type { DecisionBodyT } from '../src/api/approvals.js'

const WHO = 'An admin key, or an approver key (API_KEYS entry key:approver:{userId}) for its tenant; a tenant key reads its own approvals but never decides.'

/**
 * Held calls (human in the loop): the pending list of a tenant, one approval, and the decision
 * that runs or refuses the call. Who may do what is decided by ApprovalFacade (src/approvals/).
 */
async function approvalRoutes (app: FastifyInstance): Promise<void> {
  const approvals = app.services.approvals
  const tags = ['governance']

  app.get<{ Querystring: Static<typeof ApprovalsQuery> }>('/approvals', {
    config: { approver: true },
    schema: {
      operationId: 'listApprovals',
      summary: 'Calls awaiting a human\'s approval',
      description: `The pending (undecided, unexpired) held calls of a tenant, oldest first. A tenant or approver key lists its own tenant's; an admin key the userId's (none: calls that named no tenant). ${WHO}`,
      tags,
      querystring: ApprovalsQuery,
      response: { 200: ApprovalsResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request) => await approvals.list(request.query.userId, request.caller))

  app.get<{ Params: Static<typeof ApprovalParams> }>('/approvals/:approvalId', {
    config: { approver: true },
    schema: {
      operationId: 'getApproval',
      summary: 'One approval, with the call\'s result once decided',
      description: `status is pending, approved, denied or expired; result is the call's result once it ran or was refused. ${WHO}`,
      tags,
      params: ApprovalParams,
      response: { 200: Approval, ...errorResponses(400, 401, 403, 404, 429, 503) }
    }
  }, async (request) => await approvals.get(request.params.approvalId, request.caller))

  app.post<{ Params: Static<typeof ApprovalParams>, Body: DecisionBodyT }>('/approvals/:approvalId', {
    config: { approver: true },
    schema: {
      operationId: 'decideApproval',
      summary: 'Approve (run) or deny a held call',
      description: `Exactly one decision wins, even when several arrive on several instances: the winner's instance runs the approved call (as the caller who made it) and answers with its result; the call's journal entry carries the approvalId. deny: the result is a tool error APPROVAL_DENIED with the reason. 409 GW_APPROVAL_DECIDED when already decided, 410 APPROVAL_EXPIRED past APPROVAL_TTL. ${WHO}`,
      tags,
      params: ApprovalParams,
      body: DecisionBody,
      response: { 200: Approval, ...errorResponses(400, 401, 403, 404, 409, 410, 413, 415, 429, 503) }
    }
  }, async (request) => await approvals.decide(request.params.approvalId, request.body, request.caller))
}

// Encapsulated like a plain plugin; fp adds the name and the dependencies, checked at boot.
export default fp(approvalRoutes, {
  name: 'routes-approvals',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
