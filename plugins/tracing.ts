import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify'
import type { RequestSpan } from '../src/tracing/index.js'

/**
 * OpenTelemetry's server span of each request (SPEC 18, src/tracing/README.md): started on
 * arrival, continuing the caller's W3C trace context (`traceparent`, `tracestate`), named
 * `<METHOD> <route pattern>`, ended with the status code; the route handler runs inside it, so the
 * tool-call spans the Gateway starts are its children. With tracing off nothing is registered: no
 * hook, no wrapper, nothing per request.
 */
export default fp(async function tracingPlugin (app: FastifyInstance) {
  const tracing = app.services.tracing
  if (!tracing.enabled) return
  // Not a request decoration: nothing of the request's shape changes with tracing.
  const spans = new WeakMap<FastifyRequest, RequestSpan>()

  // Every route added after this plugin (routes are registered last in app.ts) runs its handler in the request's span.
  app.addHook('onRoute', (route) => {
    const handler = route.handler
    route.handler = function tracedHandler (this: FastifyInstance, request: FastifyRequest, reply: FastifyReply) {
      const span = spans.get(request)
      return span === undefined ? handler.call(this, request, reply) : tracing.within(span, () => handler.call(this, request, reply))
    } as RouteHandlerMethod
  })
  app.addHook('onRequest', (request, _reply, done) => {
    spans.set(request, tracing.startRequest(request.method, request.routeOptions.url, request.headers))
    done()
  })
  app.addHook('onResponse', (request, reply, done) => {
    spans.get(request)?.end(reply.statusCode)
    done()
  })
  // A client that went away before its answer: no onResponse comes.
  app.addHook('onRequestAbort', (request, done) => {
    spans.get(request)?.end(undefined)
    done()
  })
}, { name: 'gateway-tracing', dependencies: ['gateway-services'] })
