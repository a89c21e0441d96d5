import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'

/** GET /healthz: the process is up and serving. */
export default async function healthRoutes (app: FastifyInstance): Promise<void> {
  app.get('/healthz', {
    schema: {
      summary: 'Liveness: the process is up',
      tags: ['operations'],
      response: { 200: Type.Object({ status: Type.Literal('ok') }) }
    }
  }, async () => ({ status: 'ok' as const }))
}
