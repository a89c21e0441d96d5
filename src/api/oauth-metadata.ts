import { Type } from '@sinclair/typebox'

/** RFC 9728 protected resource metadata: where an OAuth client finds the authorization server of the gateway's tokens. */
export const ProtectedResourceMetadata = Type.Object({
  resource: Type.String({ description: 'The protected resource: {PUBLIC_URL}/mcp for the /mcp path form, PUBLIC_URL for the root form' }),
  authorization_servers: Type.Array(Type.String(), { description: 'OAUTH_ISSUER: the one issuer whose access tokens the gateway accepts' }),
  bearer_methods_supported: Type.Array(Type.Literal('header'), { description: 'Tokens travel in `Authorization: Bearer`, never in a query or body' }),
  scopes_supported: Type.Optional(Type.Array(Type.String(), { description: 'OAUTH_ADMIN_SCOPE and OAUTH_APPROVER_SCOPE where set; absent when neither is' })),
  resource_name: Type.Literal('tool-gateway')
}, { additionalProperties: false })
