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
  // Callback hooks, not async ones: no promise per hook on every request.
  app.addHook('onRequest', (request, _reply, done) => {
    request.startedAt = performance.now()
    done()
  })
  app.addHook('onSend', (request, reply, payload, done) => {
    const overhead = Math.max(0, performance.now() - request.startedAt - request.toolMs)
    reply.header('x-gateway-overhead-ms', overhead.toFixed(3))
    done(null, payload)
  })
}, { name: 'gateway-overhead' })
