import { performance } from 'node:perf_hooks'
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'

declare module 'fastify' {
  interface FastifyRequest {
    /** Milliseconds spent inside tools for this request (the rest is gateway overhead). */
    toolMs: number
    /** performance.now() when the request arrived. */
    startedAt: number
    /** The x-gateway-overhead-ms value sent (ms; -1 until the response is sent). */
    overheadMs: number
  }
}

/** Adds `x-gateway-overhead-ms` to every response: time in the gateway outside the tools. */
export default fp(async function overheadPlugin (app: FastifyInstance) {
  app.decorateRequest('toolMs', 0)
  app.decorateRequest('startedAt', 0)
  app.decorateRequest('overheadMs', -1)
  // Callback hooks, not async ones: no promise per hook on every request.
  app.addHook('onRequest', (request, _reply, done) => {
    request.startedAt = performance.now()
    done()
  })
  app.addHook('onSend', (request, reply, payload, done) => {
    const overhead = Math.max(0, performance.now() - request.startedAt - request.toolMs)
    const text = overhead.toFixed(3)
    reply.header('x-gateway-overhead-ms', text)
    // The very number sent (rounded as in the header), for the metrics.
    request.overheadMs = Number(text)
    done(null, payload)
  })
}, { name: 'gateway-overhead' })
