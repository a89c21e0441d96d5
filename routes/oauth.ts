import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { AuthorizeBody, AuthorizeResponse, CallbackQuery, ClientMetadataDocument, OAuthStatusResponse } from '../src/api/oauth.js'
import { ServerParams, UserServerParams } from '../src/api/registry.js'

const GLOBAL = { kind: 'global' } as const

/**
 * The gateway as an OAuth client of MCP servers (SPEC 16): start an authorization for a tenant's
 * (or, admin, a global) server, its public callback, its status, and disconnect. Tenancy is the
 * OAuth facade's (the registry's rules).
 */
async function oauthRoutes (app: FastifyInstance): Promise<void> {
  const oauth = app.services.oauth
  const tags = ['oauth']
  const user = (userId: string) => ({ kind: 'user', userId }) as const

  for (const [path, scopeOf, admin, suffix] of [
    ['/users/:userId/mcp/servers/:serverId/oauth', (p: { userId?: string }) => user(p.userId as string), false, 'UserServer'],
    ['/mcp/servers/:serverId/oauth', () => GLOBAL, true, 'GlobalServer']
  ] as const) {
    const params = admin ? ServerParams : UserServerParams
    const who = admin ? ' (admin)' : ''
    app.post<{ Params: { userId?: string, serverId: string }, Body: Static<typeof AuthorizeBody> }>(`${path}/authorize`, {
      config: { admin },
      schema: {
        operationId: `authorize${suffix}OAuth`,
        summary: `Start the OAuth authorization of a server${who}: the URL to send the user to`,
        description: 'Discovers the server\'s authorization server (its 401, RFC 9728, RFC 8414), registers the gateway when needed, and answers the authorization URL (PKCE, resource indicator). The user\'s browser ends at GET /oauth/callback.',
        tags,
        params,
        body: AuthorizeBody,
        response: { 200: AuthorizeResponse, ...errorResponses(400, 401, 403, 404, 413, 415, 429, 502, 503) }
      }
    }, async (request) => await oauth.authorize(request.caller, scopeOf(request.params), request.params.serverId, request.body?.returnTo))

    app.get<{ Params: { userId?: string, serverId: string } }>(path, {
      config: { admin },
      schema: {
        operationId: `get${suffix}OAuth`,
        summary: `The OAuth connection of a server${who}: status, issuer, scopes, expiry (never a token)`,
        tags,
        params,
        response: { 200: OAuthStatusResponse, ...errorResponses(400, 401, 403, 404, 429, 503) }
      }
    }, async (request) => await oauth.status(request.caller, scopeOf(request.params), request.params.serverId))

    app.delete<{ Params: { userId?: string, serverId: string } }>(path, {
      config: { admin },
      schema: {
        operationId: `delete${suffix}OAuth`,
        summary: `Disconnect a server${who}: its tokens are revoked where the authorization server supports it, and forgotten`,
        tags,
        params,
        response: { 204: { type: 'null', description: 'Forgotten' }, ...errorResponses(400, 401, 403, 404, 429, 503) }
      }
    }, async (request, reply) => {
      await oauth.disconnect(request.caller, scopeOf(request.params), request.params.serverId)
      return await reply.code(204).send()
    })
  }

  app.get<{ Querystring: Static<typeof CallbackQuery> }>('/oauth/callback', {
    config: { public: true, secretQuery: true },
    schema: {
      operationId: 'oauthCallback',
      summary: 'Where the authorization server sends the user back (public; the single-use state names the tenant and server)',
      tags,
      querystring: CallbackQuery,
      response: { 200: { type: 'string', description: 'A page saying the server is connected' }, ...errorResponses(400, 429, 503) }
    }
  }, async (request, reply) => {
    const done = await oauth.callback(request.query)
    request.log.info({ serverId: done.serverId }, 'OAuth server connected')
    if (done.returnTo !== undefined) return await reply.redirect(done.returnTo, 302)
    return await reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(connectedPage(done.serverId))
  })

  app.get('/oauth/client-metadata.json', {
    config: { public: true },
    schema: {
      operationId: 'oauthClientMetadata',
      summary: 'The gateway\'s OAuth client ID metadata document (public): its client_id at authorization servers that accept such documents',
      tags,
      response: { 200: ClientMetadataDocument, ...errorResponses(404) }
    }
  }, async () => oauth.clientMetadata())
}

/** The page a user sees at the end of an authorization without returnTo; serverIds are [A-Za-z0-9-], nothing to escape. */
function connectedPage (serverId: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><title>Connected</title></head><body><p>${serverId} is connected. You can close this window.</p></body></html>\n`
}

export default fp(oauthRoutes, { name: 'oauth-routes' })
