import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { errorResponses } from '../src/api/common.js'
import { WhoAmIResponse } from '../src/api/whoami.js'

/** GET /whoami: what the request's key is (a console or a client finds its tenant without being told). */
async function whoamiRoutes (app: FastifyInstance): Promise<void> {
  app.get('/whoami', {
    config: { approver: true },
    schema: {
      operationId: 'getWhoAmI',
      summary: 'The caller: its role and tenant, as the gateway authenticated the request\'s key',
      tags: ['operations'],
      response: { 200: WhoAmIResponse, ...errorResponses(401, 429) }
    }
  }, async (request) => {
    const { caller } = request
    return {
      role: caller.isAdmin ? 'admin' as const : caller.role === 'approver' ? 'approver' as const : 'tenant' as const,
      userId: caller.isAdmin ? null : caller.userId ?? null,
      keyId: caller.keyId ?? null,
      auth: app.authMode
    }
  })
}

// Encapsulated like the other route modules; fp adds the name and the dependencies, checked at boot.
export default fp(whoamiRoutes, {
  name: 'routes-whoami',
  dependencies: ['gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
