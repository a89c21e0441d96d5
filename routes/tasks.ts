import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { TaskDetail, TaskParams } from '../src/api/tasks.js'
import { NoContent } from '../src/api/workspaces.js'
import { restTaskRequest } from '../src/mcp-server/tasks.js'
import { actingUserId } from '../src/routing/tenancy.js'
import { abortOnClientGone } from '../plugins/client-gone.js'

/**
 * MCP tasks (the Tasks extension, SEP-2663) over REST: a task a tool's server runs for a call
 * (POST /invoke with `task: true`, or an /mcp tools/call), polled (GET) and cancelled (DELETE) by its handle on
 * any instance (src/mcp-server/tasks.ts).
 */
async function taskRoutes (app: FastifyInstance): Promise<void> {
  const tags = ['invoke']
  app.get<{ Params: Static<typeof TaskParams> }>('/users/:userId/tasks/:taskId', {
    schema: {
      operationId: 'getTask',
      summary: 'An MCP task a tool\'s server runs for a call, by its handle',
      description: 'Asks the MCP server that runs the task (tasks/get) and answers what it reports: status, and when completed the tool\'s result, when failed the error. Any instance answers (the handle is self-contained, keyed from SECRETS_KEY). 404 GW_TASK_NOT_FOUND for a handle of another tenant or API key, an altered or expired one, or a task the server no longer knows.',
      tags,
      params: TaskParams,
      response: { 200: TaskDetail, ...errorResponses(400, 401, 403, 404, 429, 502, 503) }
    }
  }, async (request, reply) => {
    const userId = actingUserId(request.caller, request.params.userId)
    const { gateway, mcpRequestState } = app.services
    return await restTaskRequest(gateway, mcpRequestState, request.caller, userId, request.params.taskId, 'tasks/get', abortOnClientGone(reply))
  })

  app.delete<{ Params: Static<typeof TaskParams> }>('/users/:userId/tasks/:taskId', {
    schema: {
      operationId: 'cancelTask',
      summary: 'Cancels an MCP task (tasks/cancel to the server that runs it)',
      description: 'The server settles the task as cancelled (a task already done stays as it ended); GET the task for its status. 404 GW_TASK_NOT_FOUND as for GET.',
      tags,
      params: TaskParams,
      response: { 204: NoContent, ...errorResponses(400, 401, 403, 404, 429, 502, 503) }
    }
  }, async (request, reply) => {
    const userId = actingUserId(request.caller, request.params.userId)
    const { gateway, mcpRequestState } = app.services
    await restTaskRequest(gateway, mcpRequestState, request.caller, userId, request.params.taskId, 'tasks/cancel', abortOnClientGone(reply))
    return await reply.code(204).send()
  })
}

// Encapsulated like a plain plugin; fp adds the name and the dependencies, checked at boot.
export default fp(taskRoutes, {
  name: 'routes-tasks',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
