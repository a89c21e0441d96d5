import { Type } from '@sinclair/typebox'
import { IdString } from './common.js'

export const TaskParams = Type.Object({
  userId: IdString,
  taskId: Type.String({
    minLength: 1,
    maxLength: 8192,
    description: 'The gateway\'s task handle: the taskId of the CreateTaskResult (MCP) or of POST /invoke\'s `task`'
  })
})

const TaskStatus = Type.Union(['working', 'input_required', 'completed', 'failed', 'cancelled'].map((s) => Type.Literal(s)), {
  description: 'working, input_required (inputRequests says what; answer over MCP tasks/update), completed (result), failed (error) or cancelled'
})

export const TaskDetail = Type.Object({
  taskId: Type.String({ description: 'The handle, as asked for' }),
  status: Type.Union([TaskStatus, Type.String()]),
  createdAt: Type.Optional(Type.String()),
  lastUpdatedAt: Type.Optional(Type.String()),
  ttlMs: Type.Optional(Type.Union([Type.Integer(), Type.Null()], { description: 'How long the server keeps the task' })),
  pollIntervalMs: Type.Optional(Type.Integer({ description: 'How often the server suggests polling' })),
  statusMessage: Type.Optional(Type.String()),
  result: Type.Optional(Type.Unknown({ description: 'completed: the tool\'s MCP CallToolResult as the server sent it (content, structuredContent, isError)' })),
  error: Type.Optional(Type.Unknown({ description: 'failed: the JSON-RPC error {code, message, data?} the task ended with' })),
  inputRequests: Type.Optional(Type.Unknown({ description: 'input_required: the server\'s questions, in MCP\'s shape' }))
}, {
  additionalProperties: true,
  description: 'The task as the MCP server reports it (MCP Tasks extension, SEP-2663 DetailedTask), with the gateway\'s handle as taskId'
})
