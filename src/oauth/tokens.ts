/**
 * The data path of the gateway's OAuth client (SPEC 16): the `UpstreamAuthorization` each
 * connection's transport asks before a request and after a refusal.
 *
 * - A token goes only to the origin of the server it was obtained for.
 * - Refresh before expiry and after a 401, single-flight: under a lock per tenant and server
 *   (a Redis lease across instances), the record is read again first, so of 8 concurrent calls on
 *   two instances one refreshes and the others take its (rotated) tokens.
 * - 403 `insufficient_scope`: the challenged scope (with what was granted, SEP-2350) is kept for
 *   the next authorization and the call asks the user for it; a server that keeps refusing a scope
 *   the token carries is asked about at most MAX_STEP_UPS times.
 * - client_credentials (global servers): tokens fetched and renewed without anyone.
 */
import { ClientCredentialsProvider, auth, extractWWWAuthenticateParams } from '@modelcontextprotocol/client'
import type { FetchLike } from '@modelcontextprotocol/client'
import type { WriteLock } from '../cluster/index.js'
import type { Logger } from '../logger.js'
import type { ServerAuth } from '../registry/server-config.js'
import type { RegistryScope } from '../registry/types.js'
import { OAuthRequiredError, UpstreamError, limitResponses } from '../remote-mcp/index.js'
import type { UpstreamAuthorization } from '../remote-mcp/index.js'
import { maskText } from '../secrets/detector.js'
import type { ConnectionRecord, FlowOptions, FlowProvider } from './provider.js'
import type { ConnectionRecords } from './records.js'
import { scopeKey } from './store.js'

/** New authorizations asked for a scope the token already carries before the gateway stops asking (the server will not be satisfied). */
const MAX_STEP_UPS = 2
/** Deadline of each request of the flow (metadata, registration, token, revocation). */
const FLOW_REQUEST_MS = 10_000
/** The largest answer of an authorization server the gateway reads. */
const FLOW_MAX_BYTES = 1024 * 1024

/** The route that starts an authorization of the server, for listings and tool errors. */
function authorizeRoute (scope: RegistryScope, serverId: string): string {
  return scope.kind === 'global'
    ? `/mcp/servers/${serverId}/oauth/authorize`
    : `/users/${encodeURIComponent(scope.userId)}/mcp/servers/${serverId}/oauth/authorize`
}

/** An error's message, bounded, with anything that looks like a credential masked. */
export function describe (err: unknown): string {
  const message = err instanceof Error ? err.message : String(err)
  return maskText(message.slice(0, 300), { mask: '[redacted]' })
}

/** The flow's fetch: each request bounded in time and in the bytes read. */
export function flowFetch (base: FetchLike): FetchLike {
  const bounded = limitResponses(base, { maxMessageBytes: FLOW_MAX_BYTES })
  return async (url, init) => {
    const deadline = AbortSignal.timeout(FLOW_REQUEST_MS)
    const signal = init?.signal !== undefined && init.signal !== null ? AbortSignal.any([init.signal, deadline]) : deadline
    return await bounded(url, { ...init, signal })
  }
}

/** The scopes of both, once each (SEP-2350: a new authorization keeps what was granted); undefined when none. */
export function unionScopes (...lists: Array<string | undefined>): string | undefined {
  const all = new Set(lists.flatMap((l) => (l ?? '').split(' ')).filter((s) => s !== ''))
  return all.size === 0 ? undefined : [...all].join(' ')
}

function expiring (tokens: NonNullable<ConnectionRecord['tokens']>, now: number): boolean {
  if (tokens.expires_in === undefined) return false
  const lifetime = tokens.expires_in * 1000
  // Refreshed a little before the end: a tenth of its life, at most a minute.
  return now >= tokens.obtainedAt + lifetime - Math.min(60_000, lifetime / 10)
}

export interface TokenKeeperOptions {
  records: ConnectionRecords
  lock: WriteLock
  fetchFor: (scope: RegistryScope) => FetchLike
  /** A provider over `record` for a refresh (the service's client metadata and pre-registered client). */
  flow: (record: ConnectionRecord, auth: ServerAuth, extra: Partial<FlowOptions>) => FlowProvider
  logger: Logger
  now: () => number
}

export class TokenKeeper {
  readonly #o: TokenKeeperOptions

  constructor (options: TokenKeeperOptions) {
    this.#o = options
  }

  authorization (scope: RegistryScope, serverId: string, serverUrl: string, serverAuth: ServerAuth): UpstreamAuthorization {
    const origin = new URL(serverUrl).origin
    const route = authorizeRoute(scope, serverId)
    const required = (why: string): OAuthRequiredError =>
      new OAuthRequiredError(`MCP server '${serverId}' needs the user's OAuth authorization (${why}): ask the user to connect it (POST ${route})`, route)
    const current = async (): Promise<ConnectionRecord | undefined> => {
      const record = await this.#o.records.load(scope, serverId)
      return record?.serverUrl === serverUrl ? record : undefined
    }
    return {
      header: async (url) => {
        if (url.origin !== origin) return undefined
        let record = await current()
        const tokens = record?.tokens
        // Client credentials: fetched whenever missing or expiring. A user's: refreshed when expiring (none yet: the server's 401 decides).
        const renew = tokens === undefined ? serverAuth.grant === 'client_credentials' : expiring(tokens, this.#o.now())
        if (renew) {
          record = await this.#renew(scope, serverId, serverUrl, serverAuth, tokens?.access_token, required)
        }
        // No token yet: the request goes without one; the server's 401 says what it needs (refused below).
        return record?.tokens !== undefined ? `Bearer ${record.tokens.access_token}` : undefined
      },
      refused: async (status, wwwAuthenticate, sent, again) => {
        const challenge = new Response(null, wwwAuthenticate !== undefined ? { headers: { 'www-authenticate': wwwAuthenticate } } : {})
        const params = extractWWWAuthenticateParams(challenge)
        if (status === 403) {
          if (params.error !== 'insufficient_scope') return 'pass'
          return await this.#insufficientScope(scope, serverId, serverUrl, params, required)
        }
        if (status !== 401) return 'pass'
        if (!again && sent !== undefined) {
          // Our token was refused: another instance's newer one, or a refresh.
          const renewed = await this.#renew(scope, serverId, serverUrl, serverAuth, sent.replace(/^Bearer /, ''), required)
          if (renewed.tokens !== undefined) return 'retry'
        }
        if (serverAuth.grant === 'client_credentials') {
          throw new UpstreamError('GW_UPSTREAM_ERROR', `MCP server '${serverId}' refused the gateway's client credentials token (HTTP 401)`)
        }
        await this.#note(scope, serverId, serverUrl, (record) => {
          record.challenge = { ...optional('scope', params.scope), ...optional('resourceMetadataUrl', params.resourceMetadataUrl?.href) }
          if (sent !== undefined) delete record.tokens
          // A failed refresh stays reported as such until the user authorizes again.
          if (sent !== undefined) record.status = 'refresh_failed'
          else if (record.status !== 'refresh_failed') record.status = 'authorization_required'
        })
        throw required(sent === undefined ? 'not connected' : 'the server no longer accepts its token')
      }
    }
  }

  /** Under the lock: read the record again; unless someone renewed it meanwhile, refresh (or get client credentials). */
  async #renew (
    scope: RegistryScope, serverId: string, serverUrl: string, serverAuth: ServerAuth, stale: string | undefined, required: (why: string) => OAuthRequiredError
  ): Promise<ConnectionRecord> {
    return await this.#o.lock.run(`oauth:${scopeKey(scope)}/${serverId}`, async () => {
      const stored = await this.#o.records.load(scope, serverId, true)
      const record = stored?.serverUrl === serverUrl ? stored : undefined
      const tokens = record?.tokens
      if (tokens !== undefined && tokens.access_token !== stale && !expiring(tokens, this.#o.now())) return record as ConnectionRecord
      const fetchFn = flowFetch(this.#o.fetchFor(scope))
      if (serverAuth.grant === 'client_credentials') return await this.#clientCredentials(scope, serverId, serverUrl, serverAuth, fetchFn)
      if (record === undefined || tokens?.refresh_token === undefined) {
        if (record !== undefined) {
          await this.#note(scope, serverId, serverUrl, (r) => {
            delete r.tokens
            r.status = 'refresh_failed'
            r.error = 'the token expired and no refresh token was issued'
          })
        }
        throw required('its token expired and there is no refresh token')
      }
      const provider = this.#o.flow(record, serverAuth, {})
      let error: string | undefined
      try {
        const result = await auth(provider, {
          serverUrl,
          ...(record.discovery?.resourceMetadataUrl !== undefined ? { resourceMetadataUrl: new URL(record.discovery.resourceMetadataUrl) } : {}),
          fetchFn
        })
        if (result !== 'AUTHORIZED') error = 'the authorization server wants a new authorization'
      } catch (err) {
        error = describe(err)
      }
      if (error === undefined && provider.record.tokens !== undefined && provider.record.tokens.access_token !== tokens.access_token) {
        await this.#o.records.save(scope, serverId, provider.record)
        return provider.record
      }
      this.#o.logger.warn({ serverId, scope: scopeKey(scope), err: error }, 'OAuth token refresh failed; the user must authorize again')
      delete record.tokens
      record.status = 'refresh_failed'
      record.error = `refresh failed: ${error ?? 'no new token'}`
      await this.#o.records.save(scope, serverId, record)
      throw required('its token could not be refreshed')
    })
  }

  async #clientCredentials (scope: RegistryScope, serverId: string, serverUrl: string, serverAuth: ServerAuth, fetchFn: FetchLike): Promise<ConnectionRecord> {
    const provider = new ClientCredentialsProvider({
      clientId: serverAuth.clientId as string,
      clientSecret: serverAuth.clientSecret as string,
      clientName: 'tool-gateway',
      ...(serverAuth.authorizationServer !== undefined ? { expectedIssuer: serverAuth.authorizationServer } : {}),
      ...(serverAuth.scopes !== undefined ? { scope: serverAuth.scopes.join(' ') } : {})
    })
    try {
      await auth(provider, { serverUrl, fetchFn })
    } catch (err) {
      throw new UpstreamError('GW_UPSTREAM_ERROR', `MCP server '${serverId}': the client credentials grant failed: ${describe(err)}`)
    }
    const tokens = await provider.tokens()
    if (tokens === undefined) throw new UpstreamError('GW_UPSTREAM_ERROR', `MCP server '${serverId}': the client credentials grant gave no token`)
    const record: ConnectionRecord = { serverUrl, status: 'connected', tokens: { ...tokens, obtainedAt: this.#o.now() }, updatedAt: 0 }
    await this.#o.records.save(scope, serverId, record)
    return record
  }

  async #insufficientScope (
    scope: RegistryScope,
    serverId: string,
    serverUrl: string,
    params: { scope?: string, resourceMetadataUrl?: URL },
    required: (why: string) => OAuthRequiredError
  ): Promise<never> {
    let stepUps = 0
    let wanted = params.scope
    await this.#note(scope, serverId, serverUrl, (record) => {
      const granted = new Set((record.tokens?.scope ?? '').split(' '))
      const more = (params.scope ?? '').split(' ').some((s) => s !== '' && !granted.has(s))
      if (!more) record.stepUps = (record.stepUps ?? 0) + 1
      stepUps = record.stepUps ?? 0
      wanted = unionScopes(record.tokens?.scope, params.scope)
      const metadataUrl = params.resourceMetadataUrl?.href ?? record.challenge?.resourceMetadataUrl
      record.challenge = { ...optional('scope', wanted), ...optional('resourceMetadataUrl', metadataUrl) }
    })
    if (stepUps > MAX_STEP_UPS) {
      throw new UpstreamError('GW_UPSTREAM_ERROR',
        `MCP server '${serverId}' keeps refusing with insufficient_scope (${params.scope ?? 'no scope named'}) although its authorization carries it; not asking the user again`)
    }
    throw required(`it asks for more scope: ${wanted ?? 'unnamed'}`)
  }

  /** Changes the stored record (when there is one for this server URL, or a new one) and saves it. */
  async #note (scope: RegistryScope, serverId: string, serverUrl: string, change: (record: ConnectionRecord) => void): Promise<void> {
    const stored = await this.#o.records.load(scope, serverId, true)
    const record: ConnectionRecord = stored?.serverUrl === serverUrl ? stored : { serverUrl, status: 'authorization_required', updatedAt: 0 }
    const before = JSON.stringify(record)
    change(record)
    if (JSON.stringify(record) !== before) await this.#o.records.save(scope, serverId, record)
  }

  /** Revokes the stored tokens where the authorization server has a revocation endpoint (RFC 7009); best effort, bounded. */
  async revoke (scope: RegistryScope, record: ConnectionRecord, serverAuth: ServerAuth): Promise<void> {
    // Both metadata kinds may carry it (RFC 8414 and OpenID Discovery); the SDK's OpenID type does not name it.
    const endpoint = (record.discovery?.authorizationServerMetadata as { revocation_endpoint?: string } | undefined)?.revocation_endpoint
    const tokens = record.tokens
    if (endpoint === undefined || tokens === undefined) return
    const clientId = serverAuth.clientId ?? record.client?.client_id
    const secret = serverAuth.clientId !== undefined ? serverAuth.clientSecret : record.client?.client_secret
    const fetchFn = flowFetch(this.#o.fetchFor(scope))
    for (const [token, hint] of [[tokens.refresh_token, 'refresh_token'], [tokens.access_token, 'access_token']] as const) {
      if (token === undefined) continue
      const body = new URLSearchParams({ token, token_type_hint: hint })
      const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' }
      if (secret !== undefined && clientId !== undefined) {
        headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(secret)}`).toString('base64')}`
      } else if (clientId !== undefined) body.set('client_id', clientId)
      try {
        const res = await fetchFn(endpoint, { method: 'POST', headers, body: body.toString() })
        await res.body?.cancel().catch(() => {})
      } catch (err) {
        this.#o.logger.debug({ err: describe(err) }, 'OAuth token revocation failed')
      }
    }
  }
}

function optional<K extends string> (key: K, value: string | undefined): Partial<Record<K, string>> {
  return value === undefined ? {} : { [key]: value } as Record<K, string>
}
