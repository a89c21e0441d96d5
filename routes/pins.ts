import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { AcceptPinsBody, AcceptPinsResponse, PinsResponse } from '../src/api/pins.js'
import { ServerParams, UserServerParams } from '../src/api/registry.js'
import { abortOnClientGone } from '../plugins/client-gone.js'

const GLOBAL = { kind: 'global' } as const

/**
 * Definition pins (SPEC 18): what a tenant (or, admin, calls without a tenant) pinned of a remote
 * server's tools, against what the server offers now; and accepting what it offers now. Tenancy
 * is the pins facade's (the registry's rules).
 */
async function pinRoutes (app: FastifyInstance): Promise<void> {
  const pins = app.services.pins
  const tags = ['registry']
  const user = (userId: string) => ({ kind: 'user', userId }) as const

  for (const [path, scopeOf, admin, suffix, who] of [
    ['/users/:userId/mcp/servers/:serverId/pins', (p: { userId?: string }) => user(p.userId as string), false, 'UserServer', 'the tenant'],
    ['/mcp/servers/:serverId/pins', () => GLOBAL, true, 'GlobalServer', 'calls without a tenant (admin)']
  ] as const) {
    const params = admin ? ServerParams : UserServerParams
    app.get<{ Params: { userId?: string, serverId: string } }>(path, {
      config: { admin },
      schema: {
        operationId: `get${suffix}Pins`,
        summary: `The pinned tool definitions of a server for ${who}, against what it offers now`,
        description: 'Each tool\'s status (pinned, changed, unpinned, removed), both digests, the fields that changed and both definitions (the diff). The id names the tenant\'s own server, else the global server of that id.',
        tags,
        params,
        response: { 200: PinsResponse, ...errorResponses(400, 401, 403, 404, 429, 503) }
      }
    }, async (request, reply) => await pins.read(request.caller, scopeOf(request.params), request.params.serverId, abortOnClientGone(reply)))

    app.post<{ Params: { userId?: string, serverId: string }, Body: Static<typeof AcceptPinsBody> }>(path, {
      config: { admin },
      schema: {
        operationId: `accept${suffix}Pins`,
        summary: `Accept a server's current tool definitions for ${who}`,
        description: 'Pins the definitions the server offers now (all, or `tools`), so changed ones are listed and callable again under `pinning: hold`. ' +
          'With `digests`, only if each tool is still offered as read (409 GW_DEFINITION_CHANGED otherwise). No body (or {}) accepts everything.',
        tags,
        params,
        body: AcceptPinsBody,
        response: { 200: AcceptPinsResponse, ...errorResponses(400, 401, 403, 404, 409, 413, 415, 429, 502, 503) }
      }
    }, async (request, reply) => {
      const result = await pins.accept(request.caller, scopeOf(request.params), request.params.serverId, request.body ?? {}, abortOnClientGone(reply))
      request.log.info({ serverId: request.params.serverId, tenant: request.params.userId, accepted: result.accepted.length }, 'definitions pinned')
      return result
    })
  }
}

export default fp(pinRoutes, {
  name: 'routes-pins',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
