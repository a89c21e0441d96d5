import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { isPublicRoute } from './auth.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Fields a route or the error handler adds to the request's one log line. */
    logFields: Record<string, unknown> | undefined
  }
}

/**
 * One log line per request, written when the response is sent: method, url, status, time, and
 * whatever the route added to `request.logFields` (the tool, tier, tenant and outcome of an
 * invoke; the GW_ code of a refusal). Replaces Fastify's two lines per request (incoming,
 * completed) plus the route's own: at this request rate logging was a visible part of the CPU.
 * Health, readiness, metrics and docs answered OK are logged at debug (probes would flood info).
 */
export default fp(async function requestLogPlugin (app: FastifyInstance) {
  app.decorateRequest('logFields', undefined)
  app.addHook('onResponse', async (request, reply) => {
    const quiet = reply.statusCode < 400 && isPublicRoute(request)
    const line = {
      req: { method: request.method, url: request.url, remoteAddress: request.ip },
      res: { statusCode: reply.statusCode },
      responseTime: reply.elapsedTime,
      ...request.logFields
    }
    if (quiet) request.log.debug(line, 'request completed')
    else request.log.info(line, 'request completed')
  })
}, { name: 'gateway-request-log' })
