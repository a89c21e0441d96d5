import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'

const Readiness = Type.Object({
  ready: Type.Boolean(),
  reasons: Type.Array(Type.String()),
  registry: Type.Object({ backend: Type.String(), reachable: Type.Boolean() }),
  sandbox: Type.Object({ mode: Type.String(), ok: Type.Boolean(), reason: Type.String(), warning: Type.Union([Type.String(), Type.Null()]) }),
  sources: Type.Object({ builtin: Type.Integer(), functions: Type.Integer(), localMcpTools: Type.Integer() })
})

/** GET /healthz (the process is up) and GET /readyz (it can serve). */
async function healthRoutes (app: FastifyInstance): Promise<void> {
  app.get('/healthz', {
    config: { public: true, anyHost: true },
    schema: {
      operationId: 'getLiveness',
      summary: 'Liveness: the process is up',
      tags: ['operations'],
      response: { 200: Type.Object({ status: Type.Literal('ok') }) }
    }
  }, async () => ({ status: 'ok' as const }))

  app.get('/readyz', {
    config: { public: true, anyHost: true },
    schema: {
      operationId: 'getReadiness',
      summary: 'Readiness: registry reachable, sandbox probe result, loaded sources (503 with the reasons when not ready)',
      description: 'sandbox.warning is set when bash runs unsandboxed (SANDBOX=none or auto without bubblewrap).',
      tags: ['operations'],
      response: { 200: Readiness, 503: Readiness }
    }
  }, async (_request, reply) => {
    const readiness = await app.services.readiness()
    return await reply.code(readiness.ready ? 200 : 503).send(readiness)
  })
}

// Encapsulated like a plain plugin (what it sets up stays with its routes); fp adds the name and
// the dependencies, checked at boot: rate limiting, metrics and the docs hook routes as they are added.
export default fp(healthRoutes, { name: 'routes-health', dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs'], encapsulate: true })
