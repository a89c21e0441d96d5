/**
 * What the gateway keeps of the documents an OAuth flow fetches from places a tenant chooses (its server's protected
 * resource metadata, the authorization server's metadata, a dynamic registration's answer): the fields the flow uses,
 * each string and list bounded. The SDK's schemas keep every unknown field, and each document may be 1 MiB
 * (tokens.ts): kept whole in each pending authorization and connection record, a tenant's server of ~1 MiB documents
 * made the gateway hold ~8 MiB per connected server and ~4 MiB per pending authorization (an audit).
 */
import type { OAuthDiscoveryState, StoredOAuthClientInformation } from '@modelcontextprotocol/client'

/** RFC 8414 (and OpenID discovery) fields a flow reads: endpoints, what the server supports, its issuer. */
const SERVER_FIELDS = [
  'issuer', 'authorization_endpoint', 'token_endpoint', 'registration_endpoint', 'revocation_endpoint', 'introspection_endpoint',
  'scopes_supported', 'response_types_supported', 'response_modes_supported', 'grant_types_supported', 'code_challenge_methods_supported',
  'token_endpoint_auth_methods_supported', 'revocation_endpoint_auth_methods_supported', 'client_id_metadata_document_supported',
  'authorization_response_iss_parameter_supported', 'jwks_uri', 'subject_types_supported', 'id_token_signing_alg_values_supported'
]
/** RFC 9728 fields. */
const RESOURCE_FIELDS = ['resource', 'authorization_servers', 'scopes_supported', 'bearer_methods_supported', 'resource_name']
/** RFC 7591 fields of a registration a flow presents again, and the SDK's issuer stamp. */
const CLIENT_FIELDS = [
  'client_id', 'client_secret', 'client_id_issued_at', 'client_secret_expires_at', 'token_endpoint_auth_method',
  'redirect_uris', 'grant_types', 'response_types', 'scope', 'issuer'
]
const MAX_STRING = 4096
const MAX_ITEMS = 64

/** Whether a string is kept: a longer one is left out, never cut (a cut URL would be another URL). */
function fits (v: unknown): v is string {
  return typeof v === 'string' && v.length <= MAX_STRING
}

/** `value` with only `fields`: strings of at most MAX_STRING characters, lists of at most MAX_ITEMS such strings. */
function pick<T> (value: T, fields: readonly string[]): T {
  if (value === null || typeof value !== 'object') return value
  const source = value as Record<string, unknown>
  const out: Record<string, unknown> = {}
  for (const field of fields) {
    const v = source[field]
    if (fits(v) || typeof v === 'number' || typeof v === 'boolean') out[field] = v
    else if (Array.isArray(v)) out[field] = v.filter(fits).slice(0, MAX_ITEMS)
  }
  return out as T
}

/** The discovery a flow keeps (the issuer's endpoints for refreshes and revocation), bounded. */
export function compactDiscovery (state: OAuthDiscoveryState): OAuthDiscoveryState {
  return {
    authorizationServerUrl: state.authorizationServerUrl,
    ...(fits(state.resourceMetadataUrl) ? { resourceMetadataUrl: state.resourceMetadataUrl } : {}),
    ...(state.resourceMetadata !== undefined ? { resourceMetadata: pick(state.resourceMetadata, RESOURCE_FIELDS) } : {}),
    ...(state.authorizationServerMetadata !== undefined ? { authorizationServerMetadata: pick(state.authorizationServerMetadata, SERVER_FIELDS) } : {})
  }
}

/** The registration a flow keeps (what it presents to the token endpoint), bounded. */
export function compactClient (info: StoredOAuthClientInformation): StoredOAuthClientInformation {
  return pick(info, CLIENT_FIELDS)
}
