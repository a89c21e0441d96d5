import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'
import { ClusterResponse } from '../src/api/cluster.js'
import { errorResponses } from '../src/api/common.js'
import { FORWARDED_PROCESS_CALL_PATH } from '../src/cluster/index.js'
import { FORWARDED_MCP_ANSWER_PATH } from '../src/mcp-server/client-requests.js'
import { FORWARDED_RESUME_PATH } from '../src/routing/parked-calls.js'
import type { InvokeOutcome } from '../src/routing/router.js'
import { HttpError } from '../src/errors.js'

/**
 * GET /cluster (admin): the live instances. POST /internal/cluster/processes: instance to
 * instance only (`config.cluster`: a CLUSTER_SECRET token instead of an API key, checked against
 * the raw body by the cluster-auth plugin before any parser or schema runs), hidden from openapi.yaml.
 */
async function clusterRoutes (app: FastifyInstance): Promise<void> {
  app.get('/cluster', {
    config: { admin: true },
    schema: {
      operationId: 'getCluster',
      summary: 'The live gateway instances sharing this Redis (membership heartbeats)',
      tags: ['operations'],
      response: { 200: ClusterResponse, ...errorResponses(401, 403, 429, 503) }
    }
  }, async () => {
    const membership = app.services.coordination?.membership
    if (membership === undefined) return { self: null, instances: [] }
    try {
      return { self: membership.id, instances: await membership.list() }
    } catch (err) {
      throw new HttpError('GW_REGISTRY_UNAVAILABLE', `Cluster membership cannot be read: ${(err as Error).message}`)
    }
  })

  app.post(FORWARDED_PROCESS_CALL_PATH, {
    config: { cluster: true },
    schema: { hide: true, body: Type.Object({}, { additionalProperties: true }) }
  }, async (request) => {
    const serve = app.services.builtins?.serveForwarded
    if (serve === undefined) throw new HttpError('GW_NOT_FOUND', 'This instance runs no built-in tools')
    return await serve(request.body)
  })

  // A retry of a call parked on this instance that reached another one (src/routing/parked-calls.ts).
  app.post<{ Body: { owner?: { tenant?: unknown, keyId?: unknown }, id?: unknown, inputResponses?: unknown } }>(FORWARDED_RESUME_PATH, {
    config: { cluster: true },
    schema: { hide: true, body: Type.Object({}, { additionalProperties: true }) }
  }, async (request) => {
    const { owner, id, inputResponses } = request.body
    if (typeof owner?.tenant !== 'string' || typeof owner.keyId !== 'string' || typeof id !== 'string') {
      throw new HttpError('GW_BAD_REQUEST', 'Not a forwarded resume of a parked call')
    }
    const responses = inputResponses !== null && typeof inputResponses === 'object' ? inputResponses as Record<string, unknown> : undefined
    const step = await app.services.parkedCalls.resume<InvokeOutcome>({ tenant: owner.tenant, keyId: owner.keyId }, id, responses, new AbortController().signal)
    if (step?.kind === 'done' && !step.value.ok) {
      // An HttpError does not travel as JSON: its code and message do.
      return { kind: 'done', value: { ok: false, error: { code: step.value.error.code, message: step.value.error.message } } }
    }
    return step ?? null
  })

  // A legacy /mcp client's answer that reached another instance (src/mcp-server/client-requests.ts).
  app.post(FORWARDED_MCP_ANSWER_PATH, {
    config: { cluster: true },
    schema: { hide: true, body: Type.Object({}, { additionalProperties: true }) }
  }, async (request) => {
    if (!app.services.mcpClientRequests.deliverForwarded(request.body)) throw new HttpError('GW_BAD_REQUEST', 'Not a forwarded MCP client answer')
    return { delivered: true }
  })
}

export default fp(clusterRoutes, {
  name: 'routes-cluster',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-cluster-auth'],
  encapsulate: true
})
