import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { CatalogQuery, CatalogResponse, ToolSearchQuery, ToolSearchResponse, ToolsQuery, ToolsResponse } from '../src/api/tools.js'
import { listingJson } from '../src/listing/listings.js'
import { abortOnClientGone } from '../plugins/client-gone.js'

/** GET /tools (docs/ARCHITECTURE.md#allow-list), GET /tools/search (README "Tool search") and GET /catalog. */
async function toolsRoutes (app: FastifyInstance): Promise<void> {
  app.get<{ Querystring: Static<typeof ToolsQuery> }>('/tools', {
    schema: {
      operationId: 'listTools',
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

  app.get<{ Querystring: Static<typeof ToolSearchQuery> }>('/tools/search', {
    schema: {
      operationId: 'searchTools',
      summary: 'The allow-list\'s tools ranked by relevance to a query (full text), in a provider format',
      tags: ['tools'],
      querystring: ToolSearchQuery,
      response: { 200: ToolSearchResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request, reply) => {
    return await app.services.gateway.searchTools(request.query, request.caller, abortOnClientGone(reply))
  })

  app.get<{ Querystring: Static<typeof CatalogQuery> }>('/catalog', {
    schema: {
      operationId: 'getCatalog',
      summary: 'Every name each tier could offer a tenant, with shadowing (for debugging, never for a model)',
      tags: ['tools'],
      querystring: CatalogQuery,
      response: { 200: CatalogResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request, reply) => {
    return await app.services.gateway.catalog(request.query.userId, request.caller, abortOnClientGone(reply))
  })
}

// Encapsulated like a plain plugin (what it sets up stays with its routes); fp adds the name and
// the dependencies, checked at boot: rate limiting, metrics and the docs hook routes as they are added.
export default fp(toolsRoutes, {
  name: 'routes-tools',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
