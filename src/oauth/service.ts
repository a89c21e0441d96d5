/**
 * The gateway as an OAuth 2.1 client of MCP servers (SPEC 16), per tenant and server:
 *
 * - `authorize`: probes the server for its challenge (401 `WWW-Authenticate`: `resource_metadata`,
 *   `scope`), then one `auth()` of the MCP SDK (discovery RFC 9728 / RFC 8414 / OpenID with the
 *   spec's fallbacks, registration by pre-registered client, client ID metadata document or RFC
 *   7591, PKCE S256, `resource`) that ends at the authorization URL the user is sent to. What the
 *   callback needs (verifier, discovery, returnTo) waits under a random `state` (store.ts, 10 min).
 * - `complete` (the public callback): takes the state once, checks the authorization server's
 *   `iss` (RFC 9207, in `auth()`), exchanges the code, stores the tokens sealed.
 * - `authorization`: what a connection's transport asks before each request (tokens.ts).
 * - `status`, `disconnect` (revoking where the server supports it).
 *
 * Every request of the flow goes through `fetchFor(scope)`: for a tenant's server the egress
 * guard's fetch, so a server's metadata cannot make the gateway dial loopback or metadata addresses.
 */
import { randomBytes } from 'node:crypto'
import { auth, extractWWWAuthenticateParams } from '@modelcontextprotocol/client'
import type { FetchLike, OAuthClientMetadata } from '@modelcontextprotocol/client'
import { HttpError } from '../errors.js'
import type { Logger } from '../logger.js'
import type { ServerAuth, ServerConfig } from '../registry/server-config.js'
import type { RegistryScope } from '../registry/types.js'
import type { WriteLock } from '../cluster/index.js'
import type { SecretBox } from '../registry/secrets.js'
import type { UpstreamAuthorization } from '../remote-mcp/index.js'
import { FlowProvider } from './provider.js'
import type { ConnectionRecord } from './provider.js'
import { ConnectionRecords } from './records.js'
import { scopeKey, STATE_TTL_MS } from './store.js'
import type { OAuthStore } from './store.js'
import { TokenKeeper, describe, flowFetch, unionScopes } from './tokens.js'

export interface UpstreamOAuthOptions {
  store: OAuthStore
  box: SecretBox
  /** Single-flight of refreshes: a LeaseLock over Redis (every instance), else a KeyedMutex. */
  lock: WriteLock
  /** PUBLIC_URL: without it there is no redirect URI, so no authorization code flow. */
  publicUrl: string | undefined
  /** OAUTH_CLIENT_METADATA_URL, else `${PUBLIC_URL}/oauth/client-metadata.json` when that is https. */
  clientMetadataUrl: string | undefined
  /** OAUTH_RETURN_ALLOW: origins a returnTo may name. */
  returnAllow: readonly string[]
  /** The fetch of the flow's requests for servers of `scope` (tenants: the egress guard's). */
  fetchFor: (scope: RegistryScope) => FetchLike
  /** The tokens of a server changed (connected, disconnected): its pooled connections must reconnect. */
  onChanged: (scope: RegistryScope, serverId: string) => void
  logger: Logger
  now?: () => number
}

/** What a pending authorization keeps until its callback (sealed under its state). */
interface PendingAuthorization {
  scope: RegistryScope
  serverId: string
  serverUrl: string
  verifier: string
  discovery: ConnectionRecord['discovery']
  /** The registration the authorization was made with (a dynamic one is kept in the record too). */
  client: ConnectionRecord['client']
  requestedScope?: string
  resourceMetadataUrl?: string
  returnTo?: string
  expiresAt: number
}

export interface OAuthStatus {
  status: ConnectionRecord['status']
  issuer?: string
  scopes?: string[]
  expiresAt?: string
  /** Why the last authorization or refresh failed (never a token). */
  error?: string
  /** What the server asked for that the stored authorization lacks (scope step-up). */
  requiredScopes?: string[]
}

const STATE_AAD = 'oauth-state'

export class UpstreamOAuth {
  readonly #o: UpstreamOAuthOptions
  readonly #now: () => number
  readonly #records: ConnectionRecords
  readonly #tokens: TokenKeeper
  readonly #redirectUrl: string | undefined
  readonly #metadataUrl: string | undefined

  constructor (options: UpstreamOAuthOptions) {
    this.#o = options
    this.#now = options.now ?? Date.now
    this.#records = new ConnectionRecords(options.store, options.box, this.#now)
    const base = options.publicUrl?.replace(/\/+$/, '')
    this.#redirectUrl = base === undefined ? undefined : `${base}/oauth/callback`
    // The SDK takes a metadata document URL only over https with a path (SEP-991).
    const own = base !== undefined && base.startsWith('https://') ? `${base}/oauth/client-metadata.json` : undefined
    this.#metadataUrl = options.clientMetadataUrl ?? own
    this.#tokens = new TokenKeeper({
      records: this.#records,
      lock: options.lock,
      fetchFor: options.fetchFor,
      flow: (record, auth, extra) => new FlowProvider(record, { ...this.#flowBase(auth), ...extra }),
      logger: options.logger,
      now: this.#now
    })
  }

  /** The client metadata the gateway registers with (RFC 7591) and serves as its client ID metadata document. */
  clientMetadata (): OAuthClientMetadata & { client_id?: string, application_type: 'web' | 'native' } {
    const redirect = this.#redirectUrl ?? ''
    // OpenID's rule: a web client's redirect URIs are https and not loopback; a gateway on a loopback http URL is a native one.
    const web = redirect.startsWith('https://') && !/^https:\/\/(localhost|127\.|\[::1\])/.test(redirect)
    return {
      ...(this.#metadataUrl !== undefined ? { client_id: this.#metadataUrl } : {}),
      client_name: 'tool-gateway',
      redirect_uris: redirect === '' ? [] : [redirect],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
      application_type: web ? 'web' : 'native'
    }
  }

  #flowBase (serverAuth: ServerAuth): ConstructorParameters<typeof FlowProvider>[1] {
    const { client_id: _id, ...metadata } = this.clientMetadata()
    return {
      ...(this.#redirectUrl !== undefined ? { redirectUrl: this.#redirectUrl } : {}),
      ...(this.#metadataUrl !== undefined ? { clientMetadataUrl: this.#metadataUrl } : {}),
      clientMetadata: metadata,
      ...(serverAuth.clientId !== undefined
        ? { preRegistered: { client_id: serverAuth.clientId, ...(serverAuth.clientSecret !== undefined ? { client_secret: serverAuth.clientSecret } : {}) } }
        : {}),
      now: this.#now
    }
  }

  /** What the transports of `serverId`'s connections ask before each request; undefined for a server without OAuth. */
  authorization (scope: RegistryScope, serverId: string, config: ServerConfig): UpstreamAuthorization | undefined {
    if (config.auth === undefined || config.url === undefined) return undefined
    return this.#tokens.authorization(scope, serverId, config.url, config.auth)
  }

  /** Starts an authorization: the URL the user is sent to, valid until expiresAt. */
  async authorize (scope: RegistryScope, serverId: string, config: ServerConfig, returnTo?: string): Promise<{ authorizationUrl: string, expiresAt: string }> {
    const serverAuth = this.#oauthOf(config, serverId)
    if (serverAuth.grant === 'client_credentials') {
      throw new HttpError('GW_OAUTH_NOT_CONFIGURED', `Server '${serverId}' uses the client_credentials grant: the gateway gets its tokens itself, nobody authorizes it`)
    }
    if (this.#redirectUrl === undefined) {
      throw new HttpError('GW_OAUTH_NOT_CONFIGURED', 'PUBLIC_URL is not set: the gateway has no redirect URI for an authorization')
    }
    if (returnTo !== undefined) this.#checkReturnTo(returnTo)
    const serverUrl = config.url as string
    const fetchFn = flowFetch(this.#o.fetchFor(scope))
    const stored = await this.#records.load(scope, serverId, true)
    const record: ConnectionRecord = stored?.serverUrl === serverUrl
      ? { ...stored }
      : { serverUrl, status: 'authorization_required', updatedAt: this.#now() }
    // A new authorization finds its authorization server again (it may have moved), unless the config names it.
    record.discovery = serverAuth.authorizationServer !== undefined ? { authorizationServerUrl: serverAuth.authorizationServer } : undefined
    const probed = await this.#probe(serverUrl, fetchFn)
    const challenge = { ...record.challenge, ...probed }
    // What was granted, what a refused call asked for (step-up), what the server asks of anyone now (SEP-2350: the union).
    const requested = serverAuth.scopes !== undefined
      ? unionScopes(serverAuth.scopes.join(' '), record.challenge?.scope)
      : unionScopes(record.tokens?.scope, record.challenge?.scope, probed.scope)
    const state = randomBytes(32).toString('base64url')
    const provider = new FlowProvider(record, { ...this.#flowBase(serverAuth), state, hideTokens: true })
    try {
      const result = await auth(provider, {
        serverUrl,
        ...(requested !== undefined ? { scope: requested } : {}),
        ...(challenge.resourceMetadataUrl !== undefined ? { resourceMetadataUrl: new URL(challenge.resourceMetadataUrl) } : {}),
        fetchFn
      })
      if (result !== 'REDIRECT' || provider.authorizationUrl === undefined || provider.savedVerifier === undefined) {
        throw new Error('the authorization server gave no authorization URL')
      }
    } catch (err) {
      if (err instanceof HttpError) throw err
      throw new HttpError('GW_UPSTREAM_ERROR', `The authorization of server '${serverId}' could not start: ${describe(err)}`)
    }
    // A dynamic registration is kept (the next authorization reuses it); tokens stay as they were until the callback.
    if (stored?.serverUrl === serverUrl || record.client !== undefined) {
      const keep: ConnectionRecord = stored?.serverUrl === serverUrl ? { ...stored } : { serverUrl, status: 'authorization_required', updatedAt: 0 }
      if (record.client !== undefined) keep.client = record.client
      await this.#records.save(scope, serverId, keep)
    }
    const expiresAt = this.#now() + STATE_TTL_MS
    const pending: PendingAuthorization = {
      scope,
      serverId,
      serverUrl,
      verifier: provider.savedVerifier,
      discovery: record.discovery,
      client: record.client,
      ...(requested !== undefined ? { requestedScope: requested } : {}),
      ...(challenge.resourceMetadataUrl !== undefined ? { resourceMetadataUrl: challenge.resourceMetadataUrl } : {}),
      ...(returnTo !== undefined ? { returnTo } : {}),
      expiresAt
    }
    await this.#o.store.putState(state, this.#o.box.sealValue(JSON.stringify(pending), STATE_AAD), scopeKey(scope))
    return { authorizationUrl: provider.authorizationUrl.href, expiresAt: new Date(expiresAt).toISOString() }
  }

  /**
   * The callback: `state` taken once (a replay finds nothing), the server config read again (it
   * must still be OAuth at the same URL), the code exchanged. Throws HttpError GW_OAUTH_STATE_INVALID.
   */
  async complete (
    query: { code?: string, state?: string, iss?: string, error?: string },
    configOf: (scope: RegistryScope, serverId: string) => Promise<ServerConfig | undefined>
  ): Promise<{ scope: RegistryScope, serverId: string, returnTo?: string }> {
    if (query.state === undefined || query.state === '') throw new HttpError('GW_OAUTH_STATE_INVALID', 'The callback has no state')
    const sealed = await this.#o.store.takeState(query.state)
    const opened = sealed === undefined ? undefined : this.#o.box.openValue(sealed, STATE_AAD)
    const pending = opened?.ok === true ? JSON.parse(opened.value) as PendingAuthorization : undefined
    if (pending === undefined || pending.expiresAt <= this.#now()) {
      throw new HttpError('GW_OAUTH_STATE_INVALID', 'Unknown, used or expired state: start the authorization again')
    }
    const { scope, serverId } = pending
    if (query.error !== undefined) {
      throw new HttpError('GW_OAUTH_STATE_INVALID', `The authorization server refused: ${query.error.slice(0, 100)}; start the authorization again`)
    }
    if (query.code === undefined || query.code === '') throw new HttpError('GW_OAUTH_STATE_INVALID', 'The callback has no code')
    const config = await configOf(scope, serverId)
    if (config?.auth === undefined || config.url !== pending.serverUrl) {
      throw new HttpError('GW_OAUTH_STATE_INVALID', `Server '${serverId}' changed or was removed while it was being authorized: start again`)
    }
    const stored = await this.#records.load(scope, serverId, true)
    const record: ConnectionRecord = {
      ...(stored?.serverUrl === pending.serverUrl ? stored : { serverUrl: pending.serverUrl, status: 'authorization_required', updatedAt: 0 }),
      discovery: pending.discovery,
      ...(pending.client !== undefined ? { client: pending.client } : {})
    }
    const before = record.tokens?.scope
    const provider = new FlowProvider(record, { ...this.#flowBase(config.auth), codeVerifier: pending.verifier })
    try {
      await auth(provider, {
        serverUrl: pending.serverUrl,
        authorizationCode: query.code,
        ...(query.iss !== undefined ? { iss: query.iss } : {}),
        ...(pending.requestedScope !== undefined ? { scope: pending.requestedScope } : {}),
        ...(pending.resourceMetadataUrl !== undefined ? { resourceMetadataUrl: new URL(pending.resourceMetadataUrl) } : {}),
        fetchFn: flowFetch(this.#o.fetchFor(scope))
      })
    } catch (err) {
      throw new HttpError('GW_OAUTH_STATE_INVALID', `The authorization of server '${serverId}' could not be completed: ${describe(err)}`)
    }
    if (record.tokens === undefined) throw new HttpError('GW_OAUTH_STATE_INVALID', 'The authorization server issued no token')
    record.tokens.scope ??= pending.requestedScope
    // A step-up that brought no new scope keeps counting toward MAX_STEP_UPS (tokens.ts); one that did starts over.
    if (record.tokens.scope !== before) delete record.stepUps
    delete record.challenge
    await this.#records.save(scope, serverId, record)
    this.#o.onChanged(scope, serverId)
    return { scope, serverId, ...(pending.returnTo !== undefined ? { returnTo: pending.returnTo } : {}) }
  }

  async status (scope: RegistryScope, serverId: string, config: ServerConfig): Promise<OAuthStatus> {
    this.#oauthOf(config, serverId)
    const record = await this.#records.load(scope, serverId, true)
    if (record === undefined || record.serverUrl !== config.url) return { status: 'authorization_required' }
    const tokens = record.tokens
    const expires = tokens?.expires_in !== undefined ? tokens.obtainedAt + tokens.expires_in * 1000 : undefined
    const granted = tokens?.scope?.split(' ').filter((s) => s !== '')
    const missing = record.challenge?.scope?.split(' ').filter((s) => s !== '' && granted?.includes(s) !== true)
    return {
      status: tokens === undefined && record.status === 'connected' ? 'authorization_required' : record.status,
      ...(record.discovery?.authorizationServerMetadata?.issuer !== undefined ? { issuer: record.discovery.authorizationServerMetadata.issuer } : {}),
      ...(granted !== undefined ? { scopes: granted } : {}),
      ...(expires !== undefined ? { expiresAt: new Date(expires).toISOString() } : {}),
      ...(record.error !== undefined ? { error: record.error } : {}),
      ...(missing !== undefined && missing.length > 0 ? { requiredScopes: missing } : {})
    }
  }

  /** Forgets the tokens (revoked first where the authorization server has a revocation endpoint; best effort). */
  async disconnect (scope: RegistryScope, serverId: string, config: ServerConfig): Promise<void> {
    this.#oauthOf(config, serverId)
    const record = await this.#records.load(scope, serverId, true)
    if (record?.tokens !== undefined) await this.#tokens.revoke(scope, record, config.auth as ServerAuth)
    await this.#records.delete(scope, serverId)
    this.#o.onChanged(scope, serverId)
  }

  #oauthOf (config: ServerConfig, serverId: string): ServerAuth {
    if (config.auth === undefined || config.url === undefined) {
      throw new HttpError('GW_OAUTH_NOT_CONFIGURED', `Server '${serverId}' is not configured for OAuth: register it with "auth": {"type": "oauth"}`)
    }
    return config.auth
  }

  #checkReturnTo (returnTo: string): void {
    let origin: string
    try {
      const url = new URL(returnTo)
      if (url.protocol !== 'https:' && url.protocol !== 'http:') throw new Error('scheme')
      origin = url.origin
    } catch {
      throw new HttpError('GW_RETURN_NOT_ALLOWED', 'returnTo must be an absolute http(s) URL')
    }
    if (!this.#o.returnAllow.includes(origin)) {
      throw new HttpError('GW_RETURN_NOT_ALLOWED', `returnTo's origin ${origin} is not in OAUTH_RETURN_ALLOW`)
    }
  }

  /**
   * The server's challenge to an unauthenticated request (a legacy initialize, which every
   * client sends first): its `resource_metadata` and `scope`, or nothing when it did not refuse.
   */
  async #probe (serverUrl: string, fetchFn: FetchLike): Promise<{ scope?: string, resourceMetadataUrl?: string }> {
    try {
      const res = await fetchFn(serverUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 0,
          method: 'initialize',
          params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'tool-gateway', version: '0' } }
        })
      })
      await res.body?.cancel().catch(() => {})
      if (res.status !== 401 && res.status !== 403) return {}
      const params = extractWWWAuthenticateParams(res)
      return {
        ...(params.scope !== undefined ? { scope: params.scope } : {}),
        ...(params.resourceMetadataUrl !== undefined ? { resourceMetadataUrl: params.resourceMetadataUrl.href } : {})
      }
    } catch (err) {
      this.#o.logger.debug({ err: describe(err) }, 'OAuth probe of an MCP server failed; discovery goes on from its well-known URLs')
      return {}
    }
  }
}
