import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyInstance } from 'fastify'
import { VERSION } from '../src/version.js'

/**
 * OpenAPI 3.1 generated from the route schemas (the single source of truth), served at
 * GET /openapi.json with Swagger UI at GET /docs. `npm run openapi` writes openapi.yaml.
 */
export default fp(async function docsPlugin (app: FastifyInstance) {
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'tool-gateway',
        version: VERSION,
        description: 'Multi-tenant gateway that lists tool schemas for LLMs from an explicit allow-list and executes the calls models return, routed by a fixed priority: built-in > tenant remote MCP > local MCP > local function > global remote MCP.'
      },
      tags: [
        { name: 'tools', description: 'Listing tools for a model' },
        { name: 'invoke', description: 'Executing tool calls' },
        { name: 'workspaces', description: 'Uploading, downloading, checkpointing and deleting tenant workspaces' },
        { name: 'operations', description: 'Health and documentation' }
      ]
    }
  })
  // Swagger UI adds its routes (/docs and its assets) itself: they are made public as they are
  // added, in a context of their own so that no other route is.
  await app.register(async function publicDocs (docs) {
    docs.addHook('onRoute', (route) => { route.config = { ...route.config, public: true } })
    await docs.register(swaggerUi, { routePrefix: '/docs' })
  })
  app.get('/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger())
}, { name: 'gateway-docs' })
