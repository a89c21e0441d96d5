import { Type } from '@sinclair/typebox'
import type { Static } from '@sinclair/typebox'
import { IdString } from './common.js'
import { InvokeResult } from './invoke.js'

export const ApprovalParams = Type.Object({
  approvalId: Type.String({ minLength: 1, maxLength: 128, pattern: '^[A-Za-z0-9_-]+$', description: 'As POST /invoke\'s 202 answer (or the webhook) gave it' })
})

export const ApprovalsQuery = Type.Object({
  userId: Type.Optional(IdString)
}, { additionalProperties: false })

export const DecisionBody = Type.Object({
  decision: Type.Union([Type.Literal('approve'), Type.Literal('deny')]),
  reason: Type.Optional(Type.String({ maxLength: 2000, description: 'Told to the model in the denied call\'s result, and kept with the approval' }))
}, { additionalProperties: false })
export type DecisionBodyT = Static<typeof DecisionBody>

export const Approval = Type.Object({
  approvalId: Type.String(),
  userId: Type.Union([Type.String(), Type.Null()], { description: 'The tenant the call acts for; null for an admin\'s call that named none' }),
  name: Type.String({ description: 'The tool name as invoked' }),
  callId: Type.String(),
  rule: Type.String({ description: 'The requireApproval pattern that held the call' }),
  status: Type.Union([Type.Literal('pending'), Type.Literal('approved'), Type.Literal('denied'), Type.Literal('expired')]),
  arguments: Type.Unknown({ description: 'The call\'s arguments, values under secret-looking keys masked as in the journal' }),
  createdAt: Type.String({ format: 'date-time' }),
  expiresAt: Type.String({ format: 'date-time', description: 'createdAt + APPROVAL_TTL: undecided by then, the call is APPROVAL_EXPIRED' }),
  decidedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  reason: Type.Union([Type.String(), Type.Null()]),
  result: Type.Union([InvokeResult, Type.Null()], {
    description: 'The call\'s result: what it returned once approved, APPROVAL_DENIED or APPROVAL_EXPIRED (isError true); null while pending or while the approved call runs'
  })
})

export const ApprovalsResponse = Type.Object({
  approvals: Type.Array(Approval, { description: 'Pending approvals, oldest first (at most 500)' })
})
