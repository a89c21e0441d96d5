import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { HttpError } from '../src/errors.js'
import type { RegistryScope } from '../src/registry/types.js'
import { errorResponses } from '../src/api/common.js'
import {
  DeleteServerResponse, LiveToolsResponse, PutServerBody, PutServerResponse, ServerList, ServerParams,
  StatusResponse, UserParams, UserServerParams
} from '../src/api/registry.js'
import { actingUserId } from '../src/tools/tenancy.js'
import { abortOnClientGone } from './abort.js'

function requireAdmin (request: FastifyRequest): void {
  if (!request.caller.isAdmin) throw new HttpError('GW_FORBIDDEN', 'Global servers are managed with an admin key')
}

/** The tenant scope of a /users/{userId}/... route: a tenant key may only name itself. */
function userScope (request: FastifyRequest<{ Params: { userId: string } }>): RegistryScope {
  const userId = actingUserId(request.caller, request.params.userId)
  return { kind: 'user', userId: userId ?? request.params.userId }
}

/** The MCP server registry (SPEC 5) and GET /status. */
export default async function registryRoutes (app: FastifyInstance): Promise<void> {
  const registry = app.services.registry
  const tags = ['registry']

  // Admin only: global configs name the operator's internal URLs and commands. Tenants see
  // which tools global servers offer through GET /catalog.
  app.get('/mcp/servers', {
    schema: { summary: 'Global MCP servers (admin; secrets masked)', tags, response: { 200: ServerList, ...errorResponses(401, 403, 429, 503) } }
  }, async (request) => {
    requireAdmin(request)
    return { servers: await registry.list({ kind: 'global' }) }
  })

  app.put<{ Params: Static<typeof ServerParams>, Body: Static<typeof PutServerBody> }>('/mcp/servers/:serverId', {
    schema: {
      summary: 'Create or replace a global MCP server (admin)',
      description: 'type: streamable_http | sse | stdio (aliases http, streamable-http, mcp). Header and env values are encrypted at rest; sending back a masked value keeps the stored one.',
      tags,
      params: ServerParams,
      body: PutServerBody,
      response: { 200: PutServerResponse, 201: PutServerResponse, ...errorResponses(400, 401, 403, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    requireAdmin(request)
    const result = await registry.put({ kind: 'global' }, request.params.serverId, request.body, { allowStdio: true })
    if (!result.ok) throw result.error
    request.log.info({ serverId: request.params.serverId, scope: 'global', created: result.value.created }, 'server registered')
    return await reply.code(result.value.created ? 201 : 200).send({ serverId: request.params.serverId, ...result.value })
  })

  app.delete<{ Params: Static<typeof ServerParams> }>('/mcp/servers/:serverId', {
    schema: { summary: 'Remove a global MCP server (admin)', tags, params: ServerParams, response: { 200: DeleteServerResponse, ...errorResponses(400, 401, 403, 404, 429, 503) } }
  }, async (request) => {
    requireAdmin(request)
    const result = await registry.remove({ kind: 'global' }, request.params.serverId)
    if (!result.ok) throw result.error
    return { serverId: request.params.serverId, deleted: true as const, version: result.value.version }
  })

  app.get<{ Params: Static<typeof UserParams> }>('/users/:userId/mcp/servers', {
    schema: { summary: "A tenant's MCP servers (secrets masked)", tags, params: UserParams, response: { 200: ServerList, ...errorResponses(400, 401, 403, 429, 503) } }
  }, async (request) => ({ servers: await registry.list(userScope(request)) }))

  app.put<{ Params: Static<typeof UserServerParams>, Body: Static<typeof PutServerBody> }>('/users/:userId/mcp/servers/:serverId', {
    schema: {
      summary: "Create or replace a tenant's MCP server",
      description: 'Tenants may register streamable_http and sse servers only (stdio runs a command on the gateway host: admin only). The URL must not reach loopback, private, link-local, CGNAT, multicast or metadata addresses unless EGRESS_ALLOW opens them.',
      tags,
      params: UserServerParams,
      body: PutServerBody,
      response: { 200: PutServerResponse, 201: PutServerResponse, ...errorResponses(400, 401, 403, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    const scope = userScope(request)
    const result = await registry.put(scope, request.params.serverId, request.body, { allowStdio: request.caller.isAdmin })
    if (!result.ok) throw result.error
    request.log.info({ serverId: request.params.serverId, tenant: request.params.userId, created: result.value.created }, 'server registered')
    return await reply.code(result.value.created ? 201 : 200).send({ serverId: request.params.serverId, ...result.value })
  })

  app.delete<{ Params: Static<typeof UserServerParams> }>('/users/:userId/mcp/servers/:serverId', {
    schema: { summary: "Remove a tenant's MCP server", tags, params: UserServerParams, response: { 200: DeleteServerResponse, ...errorResponses(400, 401, 403, 404, 429, 503) } }
  }, async (request) => {
    const result = await registry.remove(userScope(request), request.params.serverId)
    if (!result.ok) throw result.error
    return { serverId: request.params.serverId, deleted: true as const, version: result.value.version }
  })

  app.get<{ Params: Static<typeof UserServerParams> }>('/users/:userId/mcp/servers/:serverId/tools', {
    schema: {
      summary: "Live tools/list of one of a tenant's servers (for debugging with curl)",
      tags,
      params: UserServerParams,
      response: { 200: LiveToolsResponse, ...errorResponses(400, 401, 403, 404, 429, 502, 503) }
    }
  }, async (request, reply) => {
    const scope = userScope(request)
    if (scope.kind !== 'user') throw new Error('unreachable')
    const result = await app.services.router.liveTools('user_mcp', request.params.serverId, { userId: scope.userId, signal: abortOnClientGone(reply) })
    if (!result.ok) throw result.error
    return { serverId: request.params.serverId, tools: result.tools }
  })

  app.get('/status', {
    schema: { summary: 'Client pool and gateway status (AI4J getGatewayStatus shape + sandbox + registry)', tags: ['operations'], response: { 200: StatusResponse, ...errorResponses(401, 403, 429) } }
  }, async (request) => {
    requireAdmin(request)
    return app.services.status()
  })
}
