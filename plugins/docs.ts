import fp from 'fastify-plugin'
import swagger from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import { STATUS_CODES } from 'node:http'
import type { FastifyInstance, FastifySchema, RouteOptions } from 'fastify'
import { OPERATION_EXAMPLES, PATH_PARAMETER_EXAMPLES } from '../src/api/examples.js'
import { VERSION } from '../src/version.js'

/** The one security scheme: the API key as a bearer token (plugins/auth.ts). */
const SECURITY_SCHEME = 'apiKey'

/**
 * Each operation's `security`, derived from the route's own config (the rule the auth plugin
 * enforces), never written by hand: a public route is `[]`, every other route, and a public one
 * that requires a key after all (METRICS_REQUIRE_KEY), needs the API key. Routes set their own
 * `security` in vain: it is overwritten.
 */
function securityOf (config: RouteOptions['config']): Array<Record<string, string[]>> {
  return config?.public === true && config.requireKey !== true ? [] : [{ [SECURITY_SCHEME]: [] }]
}

interface DocParameter { name: string, in: string, example?: unknown }
interface DocOperation {
  operationId?: string
  parameters?: DocParameter[]
  requestBody?: { content?: Record<string, { examples?: unknown }> }
  responses?: Record<string, { description?: string }>
}

/** What @fastify/swagger writes for a response whose schema has no description (Swagger UI shows it as is). */
const PLACEHOLDER = 'Default Response'

/**
 * A response without a description of its own is described by its status (`200 OK: <the operation's
 * summary>`), so Swagger UI never shows "Default Response" for a route that declares its answer.
 */
function describeResponses (document: { paths?: Record<string, Record<string, DocOperation & { summary?: string }> | undefined> }): void {
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item ?? {})) {
      for (const [status, response] of Object.entries(operation.responses ?? {})) {
        if (response.description !== undefined && response.description !== PLACEHOLDER) continue
        const phrase = `${status} ${STATUS_CODES[Number(status)] ?? 'Response'}`
        response.description = status.startsWith('2') && operation.summary !== undefined ? `${phrase}: ${operation.summary}` : phrase
      }
    }
  }
}

/** Adds the request examples (src/api/examples.ts) to the generated document. */
function addExamples (document: { paths?: Record<string, Record<string, DocOperation> | undefined> }): void {
  for (const item of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(item ?? {})) {
      const examples = OPERATION_EXAMPLES[operation.operationId ?? '']
      for (const parameter of operation.parameters ?? []) {
        const value = examples?.parameters?.[parameter.name] ?? (parameter.in === 'path' ? PATH_PARAMETER_EXAMPLES[parameter.name] : undefined)
        if (value !== undefined) parameter.example = value
      }
      const media = operation.requestBody?.content?.['application/json']
      if (examples?.body !== undefined && media !== undefined) media.examples = examples.body
    }
  }
}

/**
 * OpenAPI 3.1 generated from the route schemas (the single source of truth), served at
 * GET /openapi.json with Swagger UI at GET /docs. `npm run openapi` writes openapi.yaml.
 */
export default fp(async function docsPlugin (app: FastifyInstance) {
  // On the route's own schema rather than in a document transform, so that a route with a
  // transform of its own (the file route's wildcard) keeps it too.
  app.addHook('onRoute', (route) => {
    if ((route.schema as { hide?: boolean } | undefined)?.hide === true) return
    route.schema = { ...route.schema, security: securityOf(route.config) } as FastifySchema
  })
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'tool-gateway',
        version: VERSION,
        description: 'Multi-tenant gateway that lists tool schemas for LLMs from an explicit allow-list and executes the calls models return, routed by a fixed priority: built-in > tenant remote MCP > local MCP > local function > global remote MCP.',
        license: { name: 'Apache-2.0', identifier: 'Apache-2.0' }
      },
      // Relative: Swagger UI's "Try it out" calls the gateway that serves the document, whatever its address.
      servers: [{ url: '/', description: 'The gateway serving this document' }],
      components: {
        securitySchemes: {
          [SECURITY_SCHEME]: {
            type: 'http',
            scheme: 'bearer',
            description: 'An API key from API_KEYS or API_KEYS_FILE, sent as `Authorization: Bearer <key>`. An admin key acts for any tenant and manages global servers; a tenant key acts only as its own userId. With OAUTH_ISSUER, also a JWT access token of that issuer (README "Incoming OAuth"). A gateway started without keys or issuer (open mode) needs none.'
          }
        }
      },
      tags: [
        { name: 'tools', description: 'Listing tools for a model, and the catalog of what each tier offers' },
        { name: 'invoke', description: 'Executing the tool calls a model returned' },
        { name: 'mcp', description: 'The gateway as an MCP server (streamable HTTP, stateless): the same allow-list and calls for MCP clients' },
        { name: 'registry', description: 'Registering remote MCP servers, global (admin) and per tenant' },
        { name: 'oauth', description: 'Connecting OAuth-protected MCP servers: each tenant\'s user authorizes the gateway once (SPEC 16)' },
        { name: 'workspaces', description: 'Uploading, downloading, checkpointing and deleting tenant workspaces' },
        { name: 'governance', description: 'The invocation journal of each tenant, and calls held for a human\'s approval' },
        { name: 'policy', description: 'Tool policies: the default and each tenant\'s (deny, allowOnly, readOnly, bash.denyCommands, limits)' },
        { name: 'operations', description: 'Health, readiness, metrics and status' }
      ]
    },
    transformObject: (documentObject) => {
      const document = 'openapiObject' in documentObject ? documentObject.openapiObject : documentObject.swaggerObject
      addExamples(document as Parameters<typeof addExamples>[0])
      describeResponses(document as Parameters<typeof describeResponses>[0])
      return document
    }
  })
  // Swagger UI adds its routes (/docs and its assets) itself: they are made public as they are
  // added, in a context of their own so that no other route is.
  await app.register(async function publicDocs (docs) {
    docs.addHook('onRoute', (route) => { route.config = { ...route.config, public: true } })
    await docs.register(swaggerUi, {
      routePrefix: '/docs',
      uiConfig: {
        // Runs in the browser (serialised by swagger-ui). Swagger UI sends one Accept type, the
        // response type picked in its form; the MCP transport answers a POST that does not accept
        // both JSON and an event stream with 406, so "Try it out" on POST /mcp says both.
        requestInterceptor: function (request) {
          if (request.method === 'POST' && /\/mcp(\?|$)/.test(String(request.url))) {
            request.headers.Accept = 'application/json, text/event-stream'
          }
          return request
        }
      }
    })
  })
  app.get('/openapi.json', { config: { public: true }, schema: { hide: true } }, async () => app.swagger())
}, { name: 'gateway-docs' })
