import { Readable } from 'node:stream'
import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { InvocationEntry, InvocationParams, InvocationsParams, InvocationsQuery, InvocationsResponse } from '../src/api/invocations.js'
import { abortOnClientGone } from '../plugins/client-gone.js'

const NDJSON = 'application/x-ndjson'

/**
 * The invocation journal of a tenant (docs/ARCHITECTURE.md#journal): pages, one entry, and an
 * NDJSON export for shipping to a log store. Who may read which journal is decided by the journal.
 */
async function invocationRoutes (app: FastifyInstance): Promise<void> {
  const journal = app.services.journal
  const tags = ['governance']

  app.get<{ Params: Static<typeof InvocationsParams>, Querystring: Static<typeof InvocationsQuery> }>('/users/:userId/invocations', {
    config: { approver: true },
    schema: {
      operationId: 'listInvocations',
      summary: "A tenant's invocation journal, newest first",
      description: 'Every call through /invoke, /invoke/batch and /mcp (refused ones too), masked and capped. Filters: since/until (when the call ended), tool, isError; pages with nextCursor. With Accept: application/x-ndjson, every selected entry streamed as NDJSON. A tenant key reads its own journal; an admin key any, and _global (calls that named no tenant).',
      tags,
      params: InvocationsParams,
      querystring: InvocationsQuery,
      response: { 200: InvocationsResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request, reply) => {
    const { userId } = request.params
    const accept = request.headers.accept ?? ''
    if (accept.includes(NDJSON)) {
      // Tenancy and the query are checked here, before the head: a refusal is still an HTTP error.
      const lines = journal.exportLines(request.caller, userId, request.query, abortOnClientGone(reply))
      return await reply.type(NDJSON).send(Readable.from(lines, { objectMode: false }))
    }
    return await journal.list(request.caller, userId, request.query)
  })

  app.get<{ Params: Static<typeof InvocationParams> }>('/users/:userId/invocations/:callId', {
    config: { approver: true },
    schema: {
      operationId: 'getInvocation',
      summary: 'One journal entry by callId',
      description: 'The latest entry of that callId in the tenant\'s journal; 404 GW_INVOCATION_NOT_FOUND when there is none.',
      tags,
      params: InvocationParams,
      response: { 200: InvocationEntry, ...errorResponses(400, 401, 403, 404, 429, 503) }
    }
  }, async (request) => await journal.get(request.caller, request.params.userId, request.params.callId))
}

// Encapsulated like a plain plugin; fp adds the name and the dependencies, checked at boot.
export default fp(invocationRoutes, {
  name: 'routes-invocations',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
