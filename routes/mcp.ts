import { performance } from 'node:perf_hooks'
import { Type } from '@sinclair/typebox'
import fp from 'fastify-plugin'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { HttpError } from '../src/errors.js'
import { LOG_CENSOR } from '../src/logger.js'
import { maskText } from '../src/secrets/detector.js'
import { McpEndpoint } from '../src/mcp-server/endpoint.js'
import type { McpEndpointOptions } from '../src/mcp-server/endpoint.js'
import { JsonRpcErrorResponse, MCP_METHODS, McpQuery, jsonRpcRefusalBody, methodNotAllowed } from '../src/mcp-server/json-rpc.js'
import type { McpQueryT } from '../src/mcp-server/json-rpc.js'
import jsonBodyPlugin from '../plugins/json-body.js'
import { loggedInput } from '../plugins/request-log.js'

export type McpRoutesOptions = Pick<McpEndpointOptions, 'pollMs' | 'maxStreams' | 'maxStreamsPerTenant' | 'lean' | 'answerBytes'>

const SCOPE =
  'The endpoint URL carries the allow-list and tenant of GET /tools (functions, mcp, userId; a tenant key acts as its own userId), so tools/list is exactly GET /tools?format=mcp for the same query and tools/call is POST /invoke with that allow-list.'
const errors = (...codes: number[]): Record<number, typeof JsonRpcErrorResponse> => Object.fromEntries(codes.map((c) => [c, JsonRpcErrorResponse]))

/** The methods with a route of their own: those /mcp serves (MCP_METHODS), and DELETE (documented: a legacy session's end). */
const ROUTED = new Set(['GET', 'POST', 'DELETE'])

/**
 * Every method /mcp does not take: 405 with MCP_METHODS in its Allow header and message, a JSON-RPC
 * body (the routes' error handler). After the key and the rate limit, as on every route (DELETE's
 * documented 401 and 429).
 */
async function notAllowed (request: FastifyRequest, reply: FastifyReply): Promise<never> {
  reply.header('allow', MCP_METHODS)
  throw methodNotAllowed(request.method, MCP_METHODS, request.method === 'DELETE' ? ' (the endpoint is stateless: there is no session to terminate)' : '')
}

/**
 * POST/GET /mcp, and a 405 for every other method: the gateway itself as an MCP server over
 * streamable HTTP (the SDK's transport on the raw request/response). Every error on these routes
 * is a JSON-RPC error body, so MCP clients can read it, with the HTTP status of the other routes.
 */
async function mcpRoutes (app: FastifyInstance, opts: McpRoutesOptions): Promise<void> {
  const endpoint = new McpEndpoint({
    gateway: app.services.gateway,
    subscribe: app.services.subscribe,
    watchServers: app.services.watchUpstream,
    requestState: app.services.mcpRequestState,
    clientRequests: app.services.mcpClientRequests,
    ...opts,
    onError: (err, what) => app.log.error({ err }, what),
    // Logged as the other refusals of these routes are (the error handler below): the client's mistake, at info.
    // The SDK's reason may quote what the client sent (a header's value): masked as the request log masks a refusal.
    onRefused: (err, what) => app.log.info({ reason: maskText(err instanceof Error ? err.message : String(err), { mask: LOG_CENSOR }) }, what)
  })
  // SSE streams would keep the HTTP server from closing; the calls in flight are answered during the drain, before onClose.
  app.addHook('preClose', async () => { await endpoint.closeStreams() })
  app.addHook('onClose', async () => { await endpoint.close() })

  // Malformed JSON is a JSON-RPC parse error here (-32700, toJsonRpcRefusal), and a POST needs a body.
  await app.register(jsonBodyPlugin, { malformed: 'Parse error', emptyIsMalformed: (request) => request.method === 'POST' })
  // MCP messages are JSON only: a text/plain body is refused here (415, the gateway's code in `data`), as any other type is.
  app.removeContentTypeParser('text/plain')

  app.setErrorHandler((err: FastifyError | HttpError, request, reply) => {
    const body = jsonRpcRefusalBody(err, request.body)
    const { statusCode, code } = body.error.data
    if (statusCode >= 500) request.log.error({ err }, 'request failed')
    // Masked as the request log masks a refusal's message (none of this route's quotes the client's input today).
    else request.log.info({ code, statusCode }, maskText(body.error.message, { mask: LOG_CENSOR }))
    reply.code(statusCode).type('application/json').send(body)
  })

  app.post<{ Querystring: McpQueryT }>('/mcp', {
    // Its tools/calls count against the tenant's limits; the gateway's observer counts them in the metrics.
    config: { invoke: 'json-rpc' },
    schema: {
      operationId: 'mcpPost',
      summary: 'MCP (streamable HTTP, stateless, revisions 2026-07-28 and 2025-11-25 or earlier): JSON-RPC from an MCP client',
      description: `${SCOPE} Both protocol eras on one URL: a request whose params._meta names io.modelcontextprotocol/protocolVersion 2026-07-28 is served in that revision (server/discover, the Mcp-Method and Mcp-Name headers checked against the body: -32020 on a mismatch, -32022 for an unknown revision, -32602 without the envelope, 404 -32601 for methods the revision removed; results carry resultType, and listings cacheScope private with ttlMs 0, since they depend on the caller); anything else (initialize, batches) in the legacy revisions. Stateless: any instance answers any request; the Mcp-Session-Id the answer to initialize gives only carries what the client declared (its elicitation, sampling and roots capabilities). Answers are application/json, except a tools/call that sends something before its result: the upstream server's progress under the client's progressToken, its log messages (notifications/message), or its requests of the client (elicitation/create, sampling/createMessage, roots/list, only when the client declared the capability, also for a 2026-07-28 server's input_required): that one is answered as a text/event-stream. The client POSTs its answers to those requests back to /mcp (202), to any instance. Unknown tools and tools outside the allow-list are JSON-RPC errors (-32602), tool failures are results with isError. A refusal keeps the id of the request it refuses once the body was read. Send Accept: application/json, text/event-stream.`,
      tags: ['mcp'],
      querystring: McpQuery,
      body: Type.Unknown({ description: 'A JSON-RPC 2.0 message or batch (MCP)' }),
      response: {
        200: Type.Unknown({ description: 'The JSON-RPC response(s)' }),
        202: Type.Null({ description: 'Only notifications or responses were sent' }),
        ...errors(400, 401, 403, 406, 413, 415, 429)
      }
    }
  }, async (request, reply) => {
    const exchange = endpoint.exchange(request.query, request.caller)
    const single = !Array.isArray(request.body)
    reply.hijack()
    await endpoint.post(request.raw, reply.raw, request.body, exchange, {
      // Set by the rate-limit plugin: each tools/call of a batch counts against the tenant's limits.
      ...(request.callBudget !== undefined ? { limits: request.callBudget } : {}),
      // A 2026-07-28 subscriptions/listen counts against the same share of streams as GET /mcp.
      ...(request.tenantBucket !== undefined ? { tenantKey: request.tenantBucket } : {}),
      onCall: (record) => {
        const tenant = exchange.tenant ?? null
        const fields = record.ok
          ? {
              tool: record.result.name,
              route: record.result.route,
              tenant,
              // The server asks for input (MCP input_required): its state is in no log line.
              outcome: record.result.status === 'input_required' ? 'input_required' : record.result.isError ? record.result.error?.code : 'ok',
              durationMs: record.result.durationMs,
              via: 'mcp'
            }
          // The call never resolved: its name is the client's text, logged as a refusal's message is.
          : { tool: loggedInput(record.name), tenant, outcome: record.error.code, via: 'mcp' }
        if (record.ok) {
          const { result } = record
          request.toolMs += result.toolMs
          if (result.trace !== null) request.log.debug({ tool: result.name, callId: result.callId, trace: result.trace }, 'invoke trace')
        }
        // One message: its call goes into the request's one log line, as POST /invoke's does (a log
        // write per line was a visible part of the CPU); each call of a batch gets a line of its own.
        if (single && request.logFields === undefined) request.logFields = fields
        else request.log.info(fields, 'invoke')
      },
      overheadMs: () => performance.now() - request.startedAt - request.toolMs
    })
  })

  app.get<{ Querystring: McpQueryT }>('/mcp', {
    // HEAD is no stream: refused with the other methods below.
    exposeHeadRoute: false,
    schema: {
      operationId: 'mcpStream',
      summary: 'MCP (streamable HTTP, revisions 2025-11-25 and earlier): SSE stream of notifications/tools/list_changed',
      description: `${SCOPE} The stream sends notifications/tools/list_changed when the listing for the same key and URL changes (a registry change, a remote server's own tool list); nothing else. Send Accept: text/event-stream. The 2026-07-28 revision has no GET stream: a GET with MCP-Protocol-Version 2026-07-28 is 405 (Allow: POST), its client POSTs subscriptions/listen instead.`,
      tags: ['mcp'],
      querystring: McpQuery,
      response: { 200: Type.Unknown({ description: 'text/event-stream' }), ...errors(400, 401, 403, 405, 406, 429) }
    }
  }, async (request, reply) => {
    const exchange = endpoint.exchange(request.query, request.caller)
    reply.hijack()
    // Each tenant (rate-limit bucket) gets a share of the instance's streams.
    await endpoint.get(request.raw, reply.raw, exchange, ...(request.tenantBucket !== undefined ? [request.tenantBucket] : []))
  })

  app.delete('/mcp', {
    schema: {
      operationId: 'mcpDeleteSession',
      summary: 'MCP session termination: not used (the endpoint is stateless)',
      description: `The endpoint issues no Mcp-Session-Id, so there is no session to end: always 405 (Allow: ${MCP_METHODS}), as every method /mcp does not take.`,
      tags: ['mcp'],
      response: errors(401, 405, 429)
    }
  }, notAllowed)

  // Fastify's other methods (HEAD, PUT, PATCH, OPTIONS, ...): the 404 handler's 405 was the gateway's plain body.
  app.route({ method: app.supportedMethods.filter((m) => !ROUTED.has(m)), url: '/mcp', schema: { hide: true }, handler: notAllowed })
}

// Encapsulated like a plain plugin (what it sets up stays with its routes); fp adds the name and
// the dependencies, checked at boot: rate limiting, metrics and the docs hook routes as they are added.
export default fp(mcpRoutes, {
  name: 'routes-mcp',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit', 'gateway-metrics'],
  encapsulate: true
})
