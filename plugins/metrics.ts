import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Type } from '@sinclair/typebox'
import { createMetrics } from '../src/metrics.js'
import type { GatewayMetrics, InvocationRecord } from '../src/metrics.js'
import { errorResponses } from '../src/api/common.js'
import { rulesOf } from './route-config.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** Prometheus metrics of this app (GET /metrics renders them). */
    metrics: GatewayMetrics
  }
}

interface ResultLike {
  route?: unknown
  isError?: unknown
  error?: { code?: unknown } | null
  durationMs?: unknown
  statusCode?: unknown
}

/** One entry of an /invoke or /invoke/batch answer as a metrics record. */
function toRecord (endpoint: string, r: ResultLike): InvocationRecord {
  if (typeof r.statusCode === 'number') {
    // A batch entry that never reached a tool, or a refused request ({ statusCode, code }).
    const code = r.error?.code ?? (r as { code?: unknown }).code
    return { endpoint, route: undefined, outcome: typeof code === 'string' ? code : 'other', durationMs: undefined }
  }
  // POST /invoke's 202 for a call held for approval ({ callId, status: 'pending', approvalId }): not
  // ok, it has not run; the same outcome as a held entry of a batch.
  if ((r as { status?: unknown }).status === 'pending') return { endpoint, route: undefined, outcome: 'GW_APPROVAL_PENDING', durationMs: undefined }
  const code = r.error?.code
  return {
    endpoint,
    route: typeof r.route === 'string' ? r.route : undefined,
    outcome: r.isError === true ? (typeof code === 'string' ? code : 'other') : 'ok',
    durationMs: typeof r.durationMs === 'number' ? r.durationMs : undefined
  }
}

/**
 * GET /metrics (Prometheus text format) and the hooks that feed it: invocation outcomes and
 * latencies from the /invoke answers, the gateway overhead from the x-gateway-overhead-ms
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

  // Only answers that are invoke results: a JSON-RPC answer (/mcp) is no result, and that route
  // records each of its tools/call itself.
  const isInvoke = (request: FastifyRequest): boolean => rulesOf(request).invoke === true

  // preSerialization sees the answer as an object, for results and for errors alike (the error
  // handler sends its body through it too), before anything is turned into a string.
  // Callback hooks, not async ones: no promise per hook on every request.
  app.addHook('preSerialization', (request, _reply, payload, done) => {
    if (!isInvoke(request) || payload === null || typeof payload !== 'object') {
      done(null, payload)
      return
    }
    const endpoint = rulesOf(request).url ?? ''
    const results = (payload as { results?: unknown }).results
    if (Array.isArray(results)) {
      for (const r of results) metrics.recordInvocation(toRecord(endpoint, (r ?? {}) as ResultLike))
    } else {
      metrics.recordInvocation(toRecord(endpoint, payload as ResultLike))
    }
    done(null, payload)
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
