import { Type } from '@sinclair/typebox'
import type { Static } from '@sinclair/typebox'
import { TIERS } from '../routing/types.js'
import { IdString } from './common.js'

const Limits = Type.Object({
  readMaxChars: Type.Optional(Type.Integer({ minimum: 1 })),
  commandTimeoutMs: Type.Optional(Type.Integer({ minimum: 1 })),
  bashLogChars: Type.Optional(Type.Integer({ minimum: 1 })),
  maxProcessOutputChars: Type.Optional(Type.Integer({ minimum: 1 })),
  outputMaxChars: Type.Optional(Type.Integer({ minimum: 1 }))
}, { additionalProperties: false, description: 'Can only lower the server maxima' })

const InvokeContext = Type.Object({
  workspaceId: Type.Optional(Type.String({
    pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$',
    description: 'Selects WORKSPACES_DIR/{tenant}/{workspaceId}; default "default"'
  })),
  readRoots: Type.Optional(Type.Array(Type.String({ maxLength: 64 }), { maxItems: 32, description: 'Names of read-only roots configured with READ_ROOTS' })),
  limits: Type.Optional(Limits),
  workspaceRoot: Type.Optional(Type.String({ maxLength: 4096, description: 'Admin only: an absolute root under WORKSPACE_BASES' })),
  checkpoint: Type.Optional(Type.Boolean({
    description: 'Before a mutating built-in (write_file, edit, apply_patch, update_agents_md, bash) runs, take a checkpoint of the workspace; its id is the result\'s checkpointId (restore it with POST /users/{userId}/workspaces/{workspaceId}/checkpoints/{checkpointId}/restore)'
  }))
}, { additionalProperties: false })

const AllowList = Type.Object({
  functions: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 1000 })),
  mcp: Type.Optional(Type.Array(Type.String({ maxLength: 512 }), { maxItems: 1000 }))
}, { additionalProperties: false, description: 'When given, only tools GET /tools would list for it can be invoked' })

const ClientCapabilities = Type.Object({
  elicitation: Type.Optional(Type.Object({}, { additionalProperties: true })),
  sampling: Type.Optional(Type.Object({}, { additionalProperties: true })),
  roots: Type.Optional(Type.Object({}, { additionalProperties: true }))
}, {
  additionalProperties: true,
  description: 'MCP client capabilities (its shape: elicitation, sampling, roots; other keys are ignored): what the caller can answer when the tool\'s MCP server asks for input (2026-07-28 input_required). ' +
    'Without it (and without inputResponses and requestState) the server is told none, and a server that asks anyway is a tool error'
})

export const InvokeBody = Type.Object({
  name: Type.String({ minLength: 1, maxLength: 512, description: 'The tool name the model called' }),
  arguments: Type.Optional(Type.Union([Type.Object({}, { additionalProperties: true }), Type.String()], {
    description: 'An object, or the JSON string a model emitted'
  })),
  userId: Type.Optional(IdString),
  callId: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
  allow: Type.Optional(AllowList),
  context: Type.Optional(InvokeContext),
  trace: Type.Optional(Type.Boolean({ default: false, description: 'Include the structured trace in the result' })),
  task: Type.Optional(Type.Boolean({
    default: false,
    description: 'Take an MCP task (the Tasks extension, SEP-2663): the tool\'s MCP server is told the caller takes one, and a server that runs the call as a task answers at once: 200 with `task` (its taskId is the handle to poll with GET /users/{userId}/tasks/{taskId}, on any instance). Without it, or for a server that runs the call at once, the result as always'
  })),
  waitForApprovalMs: Type.Optional(Type.Integer({
    minimum: 0,
    maximum: 300_000,
    default: 0,
    description: 'A call the tool policy holds for approval (requireApproval): wait this long (at most 5 minutes, and never past INVOKE_TIMEOUT_MS) for the decision and answer 200 with the result; otherwise, or when still undecided, 202 {callId, status: "pending", approvalId}'
  })),
  clientCapabilities: Type.Optional(ClientCapabilities),
  inputResponses: Type.Optional(Type.Object({}, {
    additionalProperties: true,
    description: 'The retry of an input_required answer: the answers, keyed like its inputRequests, in MCP\'s shape (an elicitation\'s { action, content }, a sampling result, a roots list); passed to the server as sent'
  })),
  requestState: Type.Optional(Type.String({
    minLength: 1,
    maxLength: 1_048_576,
    description: 'The retry of an input_required answer: its requestState as is (the gateway\'s handle; with the same name and arguments). A handle that was altered, expired, or is another tenant\'s, key\'s, tool\'s, arguments\' or callId\'s is 400 GW_INVALID_REQUEST_STATE'
  }))
}, { additionalProperties: false, $id: 'InvokeBody' })
export type InvokeBodyT = Static<typeof InvokeBody>

export const InvokeResult = Type.Object({
  callId: Type.String(),
  name: Type.String(),
  route: Type.Union(TIERS.map((r) => Type.Literal(r))),
  output: Type.String({ description: 'The string for the model; TOOL_ERROR: {...} on failure' }),
  isError: Type.Boolean(),
  error: Type.Union([Type.Object({ code: Type.String(), message: Type.String() }), Type.Null()]),
  truncated: Type.Boolean(),
  trace: Type.Unknown({ description: 'Structured side channel, null unless trace: true was asked for' }),
  durationMs: Type.Number(),
  checkpointId: Type.Optional(Type.String({ description: 'With context.checkpoint on a mutating built-in: the checkpoint taken before the tool ran' })),
  status: Type.Optional(Type.Literal('input_required', {
    description: 'Only when the tool\'s MCP server asks for input before it answers (the call declared clientCapabilities): answer inputRequests and repeat the call (same name, arguments and callId) with inputResponses and requestState. A result has no status'
  })),
  inputRequests: Type.Optional(Type.Object({}, {
    additionalProperties: true,
    description: 'With status input_required: what the server asks, exactly as it sent it (MCP\'s shape: { key: { method: "elicitation/create" | "sampling/createMessage" | "roots/list", params } })'
  })),
  requestState: Type.Optional(Type.String({
    description: 'With status input_required: the gateway\'s handle for the retry (opaque; good for 10 minutes, on any instance sharing SECRETS_KEY)'
  })),
  task: Type.Optional(Type.Object({
    taskId: Type.String({ description: 'The handle: GET /users/{userId}/tasks/{taskId} polls it, DELETE cancels it' }),
    status: Type.String({ description: 'working (or input_required, or already terminal)' }),
    createdAt: Type.Optional(Type.String()),
    lastUpdatedAt: Type.Optional(Type.String()),
    ttlMs: Type.Optional(Type.Union([Type.Integer(), Type.Null()])),
    pollIntervalMs: Type.Optional(Type.Integer())
  }, {
    additionalProperties: true,
    description: 'With `task: true`, when the tool\'s MCP server runs the call as a task: the task (output then only says so); its result comes with GET /users/{userId}/tasks/{taskId}'
  }))
})

export const BatchBody = Type.Object({
  calls: Type.Array(Type.Unknown(), { minItems: 1, description: 'Invoke bodies; each is validated on its own so one bad call never fails the batch' })
}, { additionalProperties: false })

const BatchEntryError = Type.Object({
  callId: Type.String({ description: 'The call\'s callId, or one generated like a successful call\'s' }),
  name: Type.Union([Type.String(), Type.Null()], { description: 'null when the entry had no string name' }),
  output: Type.String({
    description: 'TOOL_ERROR: {"errorType", "error", "tool", "callId"}, the tool message to give the model; errorType is the GW_ code in PascalCase (GW_TOOL_NOT_FOUND: ToolNotFound)'
  }),
  isError: Type.Literal(true),
  statusCode: Type.Integer(),
  error: Type.Object({ code: Type.String(), message: Type.String() })
})

export const InvokePending = Type.Object({
  callId: Type.String(),
  status: Type.Literal('pending'),
  approvalId: Type.String({ description: 'Decide it with POST /approvals/{approvalId}; read it with GET /approvals/{approvalId}' })
}, { description: 'The tool policy holds the call for a human\'s approval (requireApproval): it has not run' })

const BatchEntryPending = Type.Object({
  callId: Type.String(),
  name: Type.String(),
  status: Type.Literal('pending'),
  approvalId: Type.String(),
  output: Type.String({ description: 'TOOL_ERROR: {"errorType": "ApprovalPending", ...}: tells the model the call awaits approval' }),
  isError: Type.Literal(true),
  statusCode: Type.Literal(202),
  error: Type.Object({ code: Type.String(), message: Type.String() })
}, { description: 'An entry held for a human\'s approval, as /invoke\'s 202' })

export const BatchResponse = Type.Object({
  results: Type.Array(Type.Union([BatchEntryPending, InvokeResult, BatchEntryError]))
})
