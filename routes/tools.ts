import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { CatalogQuery, CatalogResponse, ToolsQuery, ToolsResponse } from '../src/api/tools.js'
import { listingJson } from '../src/gateway.js'
import { abortOnClientGone } from './abort.js'

/** GET /tools (SPEC 2) and GET /catalog. */
export default async function toolsRoutes (app: FastifyInstance): Promise<void> {
  app.get<{ Querystring: Static<typeof ToolsQuery> }>('/tools', {
    schema: {
      summary: 'Tool schemas for a model, from an explicit allow-list',
      tags: ['tools'],
      querystring: ToolsQuery,
      response: { 200: ToolsResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request, reply) => {
    const listing = await app.services.gateway.listTools(request.query, request.caller, abortOnClientGone(reply))
    // Cached listings keep their serialised bytes: no re-serialisation of a large catalog per request.
    return await reply.type('application/json; charset=utf-8').send(listingJson(listing))
  })

  app.get<{ Querystring: Static<typeof CatalogQuery> }>('/catalog', {
    schema: {
      summary: 'Every name each tier could offer a tenant, with shadowing (for debugging, never for a model)',
      tags: ['tools'],
      querystring: CatalogQuery,
      response: { 200: CatalogResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request, reply) => {
    return await app.services.gateway.catalog(request.query.userId, request.caller, abortOnClientGone(reply))
  })
}
