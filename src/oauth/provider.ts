/**
 * The MCP SDK's `OAuthClientProvider` over one tenant's connection record to one server: the SDK's
 * `auth()` does the protocol (discovery with its fallbacks, registration by client ID metadata
 * document or RFC 7591, PKCE, `resource`, `iss`, refresh; SPEC 16), this object only hands it what
 * is stored and collects what it saves. service.ts loads the record, runs one `auth()` with a
 * provider, and persists the record afterwards (sealed, one write).
 */
import type {
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens
} from '@modelcontextprotocol/client'
import { compactClient, compactDiscovery } from './compact.js'

/** What the gateway holds of one tenant's (or a global) OAuth connection to one server. */
export interface ConnectionRecord {
  /** The server URL the tokens were obtained for: a config pointing elsewhere never gets them. */
  serverUrl: string
  status: 'connected' | 'authorization_required' | 'refresh_failed'
  tokens?: StoredOAuthTokens & { obtainedAt: number }
  /** The client registration (dynamic, or the metadata document URL as client_id); absent for a pre-registered client. */
  client?: StoredOAuthClientInformation
  /** Where the authorization server was found (kept for refreshes: they go to the server that issued the tokens). */
  discovery?: OAuthDiscoveryState
  /** What the server's last refusal asked for (401 or 403 insufficient_scope): the next authorization uses it. */
  challenge?: { scope?: string, resourceMetadataUrl?: string }
  /** New authorizations asked for more scope since the last call that passed (bounded: MAX_STEP_UPS). */
  stepUps?: number
  /** Why the last refresh or authorization failed, for the status route (never a token). */
  error?: string
  updatedAt: number
}

export interface FlowOptions {
  redirectUrl?: string
  clientMetadataUrl?: string
  clientMetadata: OAuthClientMetadata
  /** The `state` of a new authorization. */
  state?: string
  /** The code verifier of the authorization being completed (the callback). */
  codeVerifier?: string
  /** A client registered beforehand (the server config's clientId and clientSecret). */
  preRegistered?: { client_id: string, client_secret?: string }
  /** A new authorization must not refresh the tokens it replaces. */
  hideTokens?: boolean
  now: () => number
}

export class FlowProvider implements OAuthClientProvider {
  /** Where `auth()` sent the user (a new authorization). */
  authorizationUrl: URL | undefined
  /** The PKCE verifier `auth()` made for it. */
  savedVerifier: string | undefined
  readonly record: ConnectionRecord
  readonly #o: FlowOptions

  constructor (record: ConnectionRecord, options: FlowOptions) {
    this.record = record
    this.#o = options
  }

  get redirectUrl (): string | undefined { return this.#o.redirectUrl }
  get clientMetadataUrl (): string | undefined { return this.#o.clientMetadataUrl }
  get clientMetadata (): OAuthClientMetadata { return this.#o.clientMetadata }

  state (): string {
    // Only a new authorization needs a state; `auth()` asks for one during a refresh when the refresh token was refused.
    if (this.#o.state === undefined) throw new Error('the authorization server refused the refresh token: the user must authorize again')
    return this.#o.state
  }

  clientInformation (): StoredOAuthClientInformation | undefined {
    return this.#o.preRegistered ?? this.record.client
  }

  saveClientInformation (info: StoredOAuthClientInformation): void {
    // A pre-registered client stays the config's (the SDK only stamps its issuer on it).
    if (this.#o.preRegistered === undefined) this.record.client = compactClient(info)
  }

  tokens (): StoredOAuthTokens | undefined {
    return this.#o.hideTokens === true ? undefined : this.record.tokens
  }

  saveTokens (tokens: StoredOAuthTokens): void {
    // A refresh answer without a new refresh token keeps the old one (RFC 6749 section 6); a rotated one replaces it.
    const refresh = tokens.refresh_token ?? this.record.tokens?.refresh_token
    this.record.tokens = { ...tokens, ...(refresh !== undefined ? { refresh_token: refresh } : {}), obtainedAt: this.#o.now() }
    this.record.status = 'connected'
    delete this.record.error
  }

  redirectToAuthorization (url: URL): void {
    this.authorizationUrl = url
  }

  saveCodeVerifier (verifier: string): void {
    this.savedVerifier = verifier
  }

  codeVerifier (): string {
    if (this.#o.codeVerifier === undefined) throw new Error('no code verifier: the authorization was not started here')
    return this.#o.codeVerifier
  }

  invalidateCredentials (scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'client') delete this.record.client
    if (scope === 'all' || scope === 'tokens') delete this.record.tokens
    if (scope === 'all' || scope === 'discovery') delete this.record.discovery
  }

  saveDiscoveryState (state: OAuthDiscoveryState): void {
    this.record.discovery = compactDiscovery(state)
  }

  discoveryState (): OAuthDiscoveryState | undefined {
    return this.record.discovery
  }
}
