import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { errorResponses } from '../src/api/common.js'
import { ProtectedResourceMetadata } from '../src/api/oauth-metadata.js'
import type { OAuthResource } from '../src/auth/oauth-bearer.js'
import { HttpError } from '../src/errors.js'

export interface OAuthMetadataRoutesOptions {
  /** Incoming OAuth from the config; undefined (no OAUTH_ISSUER) answers 404 like any unknown route. */
  oauth: OAuthResource | undefined
}

/**
 * The protected resource metadata (RFC 9728) of the gateway's incoming OAuth: the document a
 * 401's `resource_metadata` names (the /mcp path form, section 3.1's path insertion) and the
 * root form. Public: a client reads it before it has a token.
 */
async function oauthMetadataRoutes (app: FastifyInstance, opts: OAuthMetadataRoutesOptions): Promise<void> {
  const { oauth } = opts
  const documentOf = (form: 'mcp' | 'root'): Record<string, unknown> => {
    // Without an issuer, or without PUBLIC_URL (no resource to name), there is no document to serve.
    if (oauth?.resource === undefined) throw new HttpError('GW_NOT_FOUND', 'Incoming OAuth is not configured (OAUTH_ISSUER and PUBLIC_URL)')
    const scopes = oauth.verifier.scopes
    return {
      resource: oauth.resource[form],
      authorization_servers: [oauth.verifier.issuer],
      bearer_methods_supported: ['header'],
      ...(scopes.length > 0 ? { scopes_supported: scopes } : {}),
      resource_name: 'tool-gateway'
    }
  }
  const schema = (form: string): Record<string, unknown> => ({
    operationId: form === 'mcp' ? 'getProtectedResourceMetadataMcp' : 'getProtectedResourceMetadata',
    summary: form === 'mcp'
      ? 'OAuth protected resource metadata (RFC 9728) of /mcp: the document every 401\'s resource_metadata names'
      : 'OAuth protected resource metadata (RFC 9728) of the gateway as a whole (resource = PUBLIC_URL)',
    description: '404 without OAUTH_ISSUER and PUBLIC_URL. See README "Incoming OAuth".',
    tags: ['operations'],
    response: { 200: ProtectedResourceMetadata, ...errorResponses(404) }
  })
  app.get('/.well-known/oauth-protected-resource/mcp', { config: { public: true }, schema: schema('mcp') }, async () => documentOf('mcp'))
  app.get('/.well-known/oauth-protected-resource', { config: { public: true }, schema: schema('root') }, async () => documentOf('root'))
}

// Encapsulated like the other route modules; fp adds the name and the dependencies, checked at boot.
export default fp(oauthMetadataRoutes, {
  name: 'routes-oauth-metadata',
  dependencies: ['gateway-errors', 'gateway-docs', 'gateway-auth'],
  encapsulate: true
})
