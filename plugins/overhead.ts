import { performance } from 'node:perf_hooks'
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'

declare module 'fastify' {
  interface FastifyRequest {
    /** Milliseconds spent inside tools for this request (the rest is gateway overhead). */
    toolMs: number
    /** performance.now() when the request arrived. */
    startedAt: number
  }
}

/** Adds `x-gateway-overhead-ms` to every response: time in the gateway outside the tools. */
export default fp(async function overheadPlugin (app: FastifyInstance) {
  app.decorateRequest('toolMs', 0)
  app.decorateRequest('startedAt', 0)
  app.addHook('onRequest', async (request) => {
    request.startedAt = performance.now()
  })
  app.addHook('onSend', async (request, reply) => {
    const overhead = Math.max(0, performance.now() - request.startedAt - request.toolMs)
    reply.header('x-gateway-overhead-ms', overhead.toFixed(3))
  })
}, { name: 'gateway-overhead' })
