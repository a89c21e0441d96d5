import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import {
  DeleteServerResponse, LiveToolsResponse, PutServerBody, PutServerResponse, ServerList, ServerParams,
  StatusResponse, UserParams, UserServerParams
} from '../src/api/registry.js'
import { abortOnClientGone } from '../plugins/client-gone.js'

const GLOBAL = { kind: 'global' } as const

/**
 * The MCP server registry and GET /status. Who may act on which scope (admin-only global
 * servers, a tenant key only on its own userId) is decided by the registry facade.
 */
async function registryRoutes (app: FastifyInstance): Promise<void> {
  const registry = app.services.registry
  const tags = ['registry']
  const user = (userId: string) => ({ kind: 'user', userId }) as const

  // Admin only: global configs name the operator's internal URLs and commands. Tenants see
  // which tools global servers offer through GET /catalog.
  app.get('/mcp/servers', {
    config: { admin: true },
    schema: {
      operationId: 'listGlobalServers',
      summary: 'Global MCP servers (admin; secrets masked)',
      tags,
      response: { 200: ServerList, ...errorResponses(401, 403, 429, 503) }
    }
  }, async (request) => ({ servers: await registry.list(request.caller, GLOBAL) }))

  app.put<{ Params: Static<typeof ServerParams>, Body: Static<typeof PutServerBody> }>('/mcp/servers/:serverId', {
    config: { admin: true },
    schema: {
      operationId: 'putGlobalServer',
      summary: 'Create or replace a global MCP server (admin)',
      description: 'type: streamable_http | sse | stdio (aliases http, streamable-http, mcp). Header and env values are encrypted at rest; sending back a masked value keeps the stored one.',
      tags,
      params: ServerParams,
      body: PutServerBody,
      response: { 200: PutServerResponse, 201: PutServerResponse, ...errorResponses(400, 401, 403, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    const result = await registry.put(request.caller, GLOBAL, request.params.serverId, request.body)
    request.log.info({ serverId: request.params.serverId, scope: 'global', created: result.created }, 'server registered')
    return await reply.code(result.created ? 201 : 200).send({ serverId: request.params.serverId, ...result })
  })

  app.delete<{ Params: Static<typeof ServerParams> }>('/mcp/servers/:serverId', {
    config: { admin: true },
    schema: {
      operationId: 'deleteGlobalServer',
      summary: 'Remove a global MCP server (admin)',
      tags,
      params: ServerParams,
      response: { 200: DeleteServerResponse, ...errorResponses(400, 401, 403, 404, 429, 503) }
    }
  }, async (request) => {
    const { version } = await registry.remove(request.caller, GLOBAL, request.params.serverId)
    return { serverId: request.params.serverId, deleted: true as const, version }
  })

  app.get<{ Params: Static<typeof ServerParams> }>('/mcp/servers/:serverId/tools', {
    config: { admin: true },
    schema: {
      operationId: 'listGlobalServerTools',
      summary: 'Live tools/list of a global server (admin; for debugging with curl)',
      description: 'A stdio server whose first start is still under way (npx downloading its package) answers 502 with a message saying `starting`.',
      tags,
      params: ServerParams,
      response: { 200: LiveToolsResponse, ...errorResponses(400, 401, 403, 404, 409, 429, 502, 503) }
    }
  }, async (request, reply) => {
    const tools = await registry.liveGlobalTools(request.caller, request.params.serverId, abortOnClientGone(reply))
    return { serverId: request.params.serverId, tools }
  })

  app.get<{ Params: Static<typeof UserParams> }>('/users/:userId/mcp/servers', {
    schema: {
      operationId: 'listUserServers',
      summary: "A tenant's MCP servers (secrets masked)",
      tags,
      params: UserParams,
      response: { 200: ServerList, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request) => ({ servers: await registry.list(request.caller, user(request.params.userId)) }))

  app.put<{ Params: Static<typeof UserServerParams>, Body: Static<typeof PutServerBody> }>('/users/:userId/mcp/servers/:serverId', {
    schema: {
      operationId: 'putUserServer',
      summary: "Create or replace a tenant's MCP server",
      description: 'Tenants may register streamable_http and sse servers only (stdio runs a command on the gateway host: admin only). The URL must not reach loopback, private, link-local, CGNAT, multicast or metadata addresses unless EGRESS_ALLOW opens them.',
      tags,
      params: UserServerParams,
      body: PutServerBody,
      response: { 200: PutServerResponse, 201: PutServerResponse, ...errorResponses(400, 401, 403, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    const result = await registry.put(request.caller, user(request.params.userId), request.params.serverId, request.body)
    request.log.info({ serverId: request.params.serverId, tenant: request.params.userId, created: result.created }, 'server registered')
    return await reply.code(result.created ? 201 : 200).send({ serverId: request.params.serverId, ...result })
  })

  app.delete<{ Params: Static<typeof UserServerParams> }>('/users/:userId/mcp/servers/:serverId', {
    schema: {
      operationId: 'deleteUserServer',
      summary: "Remove a tenant's MCP server",
      tags,
      params: UserServerParams,
      response: { 200: DeleteServerResponse, ...errorResponses(400, 401, 403, 404, 429, 503) }
    }
  }, async (request) => {
    const { version } = await registry.remove(request.caller, user(request.params.userId), request.params.serverId)
    return { serverId: request.params.serverId, deleted: true as const, version }
  })

  app.get<{ Params: Static<typeof UserServerParams> }>('/users/:userId/mcp/servers/:serverId/tools', {
    schema: {
      operationId: 'listUserServerTools',
      summary: "Live tools/list of one of a tenant's servers (for debugging with curl)",
      tags,
      params: UserServerParams,
      response: { 200: LiveToolsResponse, ...errorResponses(400, 401, 403, 404, 409, 429, 502, 503) }
    }
  }, async (request, reply) => {
    const tools = await registry.liveTools(request.caller, request.params.userId, request.params.serverId, abortOnClientGone(reply))
    return { serverId: request.params.serverId, tools }
  })

  app.get('/status', {
    config: { admin: true },
    schema: {
      operationId: 'getStatus',
      summary: 'Client pool and gateway status (AI4J getGatewayStatus shape + sandbox + registry)',
      tags: ['operations'],
      response: { 200: StatusResponse, ...errorResponses(401, 403, 429) }
    }
  }, async () => app.services.status())
}

// Encapsulated like a plain plugin (what it sets up stays with its routes); fp adds the name and
// the dependencies, checked at boot: rate limiting, metrics and the docs hook routes as they are added.
export default fp(registryRoutes, {
  name: 'routes-registry',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
