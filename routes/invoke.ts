import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { errorResponses } from '../src/api/common.js'
import { BatchBody, BatchResponse, InvokeBody, InvokePending, InvokeResult } from '../src/api/invoke.js'
import type { InvokeBodyT } from '../src/api/invoke.js'
import { withRestTask } from '../src/mcp-server/tasks.js'
import { abortOnClientGone, callerAbortOnClientGone } from '../plugins/client-gone.js'

/** POST /invoke and POST /invoke/batch (docs/ARCHITECTURE.md#result-and-trace). */
async function invokeRoutes (app: FastifyInstance): Promise<void> {
  app.post<{ Body: InvokeBodyT }>('/invoke', {
    config: { invoke: true },
    schema: {
      operationId: 'invokeTool',
      summary: 'Execute a tool call the model returned',
      description: '200 once the name resolved and the caller is allowed, whatever the tool did (isError tells). HTTP errors are for calls that never reached a tool. 202 when the tool policy holds the call for a human\'s approval (requireApproval) and no decision came within waitForApprovalMs. ' +
        'A call that declares clientCapabilities may get 200 with status "input_required": the tool\'s MCP server asks for input (inputRequests, in MCP\'s shape); repeat the call with inputResponses and requestState.',
      tags: ['invoke'],
      body: InvokeBody,
      response: { 200: InvokeResult, 202: InvokePending, ...errorResponses(400, 401, 403, 404, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    const outcome = await app.services.gateway.invoke(request.body, request.caller, callerAbortOnClientGone(reply))
    if (!outcome.ok) throw outcome.error
    if (outcome.pending !== undefined) {
      request.logFields = {
        tool: outcome.result.name,
        route: outcome.result.route,
        tenant: request.body.userId ?? request.caller.userId ?? null,
        outcome: 'pending',
        approvalId: outcome.pending.approvalId
      }
      return await reply.code(202).send({ callId: outcome.result.callId, status: 'pending', approvalId: outcome.pending.approvalId })
    }
    const result = outcome.result
    request.toolMs = result.toolMs
    request.logFields = {
      tool: result.name,
      route: result.route,
      tenant: request.body.userId ?? request.caller.userId ?? null,
      // The server asks for input (MCP input_required): neither ok nor an error, and its state is in no log line.
      outcome: result.status === 'input_required' ? 'input_required' : result.isError ? result.error?.code : 'ok',
      durationMs: result.durationMs
    }
    // The response schema names the fields sent: toolMs (the gateway's own accounting) is not one of them.
    return withRestTask(app.services.mcpRequestState, request.caller, result)
  })

  app.post<{ Body: { calls: unknown[] } }>('/invoke/batch', {
    config: { invoke: true },
    schema: {
      operationId: 'invokeBatch',
      summary: 'Execute several tool calls concurrently; results in order',
      description: 'Each entry is the /invoke result, or for a call that never reached a tool { callId, name, output, isError: true, statusCode, error }, whose output is the TOOL_ERROR: {...} form of a tool failure and whose callId is generated when the call gave none; a call held for approval is { callId, name, status: "pending", approvalId, output, isError: true, statusCode: 202, error }; an entry may be status "input_required" like /invoke\'s result (each entry carries its own clientCapabilities, inputResponses and requestState). Writes to one workspace are serialised.',
      tags: ['invoke'],
      body: BatchBody,
      response: { 200: BatchResponse, ...errorResponses(400, 401, 403, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    const { results, toolMs } = await app.services.gateway.invokeBatch(request.body.calls, request.caller, abortOnClientGone(reply))
    request.toolMs = toolMs
    request.logFields = { calls: results.length, errors: results.filter((r) => r.isError).length }
    return { results: results.map((r) => ('toolMs' in r ? withRestTask(app.services.mcpRequestState, request.caller, stripToolMs(r)) : r)) }
  })
}

function stripToolMs<T extends { toolMs: number }> (r: T): Omit<T, 'toolMs'> {
  const { toolMs: _omit, ...rest } = r
  return rest
}

// Encapsulated like a plain plugin (what it sets up stays with its routes); fp adds the name and
// the dependencies, checked at boot: rate limiting, metrics and the docs hook routes as they are added.
export default fp(invokeRoutes, {
  name: 'routes-invoke',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit', 'gateway-metrics'],
  encapsulate: true
})
