import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'
import { createMetrics } from '../src/metrics.js'
import type { GatewayMetrics } from '../src/metrics.js'
import { errorResponses } from '../src/api/common.js'
import { toHttpFailure } from '../src/errors.js'
import { fromFastifyError } from './errors.js'
import { rulesOf } from './route-config.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Prometheus metrics of this app (GET /metrics renders them). */
    metrics: GatewayMetrics
  }
}

/**
 * GET /metrics (Prometheus text format) and what feeds it: invocation outcomes and latencies
 * from the gateway's outcome observer and the refused invoke requests, the gateway overhead from the x-gateway-overhead-ms
 * header (registered after the overhead plugin, so it reads the value that was sent).
 * Public unless METRICS_REQUIRE_KEY (`requireKey`).
 */
export default fp(async function metricsPlugin (app: FastifyInstance, opts: { requireKey?: boolean }) {
  const services = app.services
  const builtins = services.builtins
  const metrics = createMetrics({
    status: () => services.status(),
    counters: services.counters,
    sandbox: builtins !== undefined ? () => builtins.sandbox.stats() : undefined,
    processes: builtins !== undefined ? () => builtins.processes.stats() : undefined,
    rateLimitRedisErrors: () => app.rateLimitRedisErrors(),
    journal: () => services.journal.stats(),
    invocationsInFlight: () => {
      let n = 0
      for (const v of app.invocationsInFlight.values()) n += v
      return n
    }
  })
  app.decorate('metrics', metrics)

  // Tool calls are counted where the journal records them: the gateway publishes every answered
  // call once (docs/ARCHITECTURE.md#journal), an /invoke result, each batch entry, each /mcp
  // tools/call. POST /invoke answers a refused call with its HTTP error, counted below with the
  // other refused requests.
  const unsubscribe = services.gateway.calls.subscribe((call) => {
    if (call.via !== 'invoke' || call.outcome.ok) metrics.recordCall(call)
  })
  app.addHook('onClose', (_app, done) => {
    unsubscribe()
    done()
  })

  // An /invoke or /invoke/batch request answered with an HTTP error counts as one refused call
  // (route none, its GW_ code), whoever refused it: auth, the rate limit, the body, the schema,
  // or the gateway. An /mcp request's error is a JSON-RPC answer, not a call (its route is `json-rpc`).
  // onError runs on errors only: nothing is added to a request that succeeds.
  app.addHook('onError', (request, _reply, error, done) => {
    const rules = rulesOf(request)
    if (rules.invoke === true) {
      metrics.recordInvocation({ endpoint: rules.url ?? '', route: undefined, outcome: toHttpFailure(fromFastifyError(error)).code, durationMs: undefined })
    }
    done()
  })

  app.addHook('onResponse', (request, _reply, done) => {
    if (request.overheadMs >= 0) metrics.recordOverhead(rulesOf(request).url ?? 'unmatched', request.overheadMs)
    done()
  })

  app.get('/metrics', {
    config: { public: true, requireKey: opts.requireKey === true },
    schema: {
      operationId: 'getMetrics',
      summary: 'Prometheus metrics (text exposition format)',
      description: 'Public unless METRICS_REQUIRE_KEY=true, then any API key. Labels never carry userIds, tool names or arguments.',
      tags: ['operations'],
      response: {
        200: {
          description: 'Prometheus text format 0.0.4',
          content: { 'text/plain': { schema: Type.String() } }
        },
        ...errorResponses(401)
      }
    }
  }, async (_request, reply) => {
    const body = await metrics.render()
    return await reply.type(metrics.contentType).send(body)
  })
}, { name: 'gateway-metrics', dependencies: ['gateway-services', 'gateway-overhead', 'gateway-rate-limit'] })
