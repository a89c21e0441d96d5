/**
 * A real OAuth 2.1 authorization server for tests: oidc-provider (v9) on `http://127.0.0.1:{port}`,
 * in-process, with an in-memory store. What it does, as SPEC 16's client needs it:
 *
 * - authorization code with PKCE (S256 only, required for every client, public or not);
 * - RFC 8707 resource indicators: a request for `resource=R` gets a JWT access token (RS256, this
 *   server's JWKS) whose `aud` is R and whose `scope` holds the requested scopes R accepts;
 * - refresh tokens for every client that may use the refresh_token grant (no `offline_access`
 *   needed), rotated on each use; replaying a used one revokes the grant, as oidc-provider does;
 * - dynamic client registration (RFC 7591, open: no initial access token), revocation (RFC 7009),
 *   `iss` in the authorization response (RFC 9207; advertised in the metadata);
 * - pre-registered clients (`clients`), e.g. a confidential one with client_secret_basic or
 *   client_secret_post, and the client_credentials grant (JWT for the requested `resource`).
 *
 * No UI: `/interaction/{uid}` answers a tiny form; POSTing `account=<id>` to it logs that account in
 * and grants every scope and resource the request asked for (browser.ts does that).
 *
 * Options (AuthorizationServerOptions):
 * - `port`: 0 or absent picks a free one;
 * - `scopes`: the scopes it knows (default openid, offline_access, mcp:read, mcp:admin); a resource
 *   server accepts all of them but `openid` and `offline_access`;
 * - `accessTokenTtl`: seconds (default 300); change it later with `setAccessTokenTtl`;
 * - `clients`: oidc-provider client metadata registered at start;
 * - `restrictClientScope`: oidc-provider refuses an authorization request for a scope outside the
 *   `scope` a client registered with, and the SDK (like most clients) registers with the scope of
 *   the first challenge, so a scope step-up would need a new registration. By default the fixture
 *   forgets registered scopes (the registration answer still echoes them); true keeps them, as a
 *   strict server would.
 *
 * oidc-provider 9 also implements client ID metadata documents (`features.clientIdMetadataDocument`,
 * experimental, draft-02, enabled with an `ack`), but only for `https://` client IDs: the gateway's
 * document on plain loopback http cannot be one, so this fixture leaves it off.
 */
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, generateKeyPair } from 'jose'
import Provider from 'oidc-provider'
import type { Client, ClientMetadata, KoaContextWithOIDC } from 'oidc-provider'
import { memoryAdapter } from './memory-adapter.js'

/** Options of startAuthorizationServer (see the header comment). */
export interface AuthorizationServerOptions {
  port?: number
  scopes?: string[]
  /** Access token lifetime in seconds. */
  accessTokenTtl?: number
  clients?: ClientMetadata[]
  /** Hold dynamically registered clients to the `scope` they registered (default false: see the header). */
  restrictClientScope?: boolean
}

/** What the server did since start; counters only grow. */
export interface AuthorizationServerStats {
  /** Successful token endpoint grants, by grant_type. */
  grants: { authorization_code: number, refresh_token: number, client_credentials: number }
  /** Successful dynamic registrations. */
  registrations: number
  /** Successful revocation requests (RFC 7009 answers 200 for unknown tokens too). */
  revocations: number
  /** Logins completed through the interaction endpoint, by account. */
  logins: Record<string, number>
  /** Unexpected errors inside oidc-provider (500 answers): a fixture or client bug. */
  serverErrors: number
}

/** A running authorization server. */
export interface AuthorizationServer {
  /** The issuer, `http://127.0.0.1:{port}` (no trailing slash). */
  issuer: string
  /** Same as issuer: the base URL to reach it. */
  url: string
  port: number
  /** The JWKS URL the access tokens verify against. */
  jwksUrl: string
  /** A snapshot of the counters. */
  stats: () => AuthorizationServerStats
  /** Lifetime (seconds) of the access tokens issued from now on. */
  setAccessTokenTtl: (seconds: number) => void
  /**
   * Forgets every grant and the codes and tokens issued under them, as a server that lost its
   * state or whose user revoked the app: the next refresh is refused with invalid_grant. Access
   * tokens already issued are JWTs and still verify at the resource server until they expire.
   */
  forgetGrants: () => void
  /** The oidc-provider instance, for what a test needs beyond this (e.g. provider.Grant). */
  provider: Provider
  close: () => Promise<void>
}

const DEFAULT_SCOPES = ['openid', 'offline_access', 'mcp:read', 'mcp:admin']
const OIDC_ONLY = new Set(['openid', 'offline_access'])

function newStats (): AuthorizationServerStats {
  return { grants: { authorization_code: 0, refresh_token: 0, client_credentials: 0 }, registrations: 0, revocations: 0, logins: {}, serverErrors: 0 }
}

async function readForm (req: IncomingMessage): Promise<URLSearchParams> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'))
}

/** Starts the server; see the header comment for what it implements. */
export async function startAuthorizationServer (opts: AuthorizationServerOptions = {}): Promise<AuthorizationServer> {
  const scopes = opts.scopes ?? DEFAULT_SCOPES
  const resourceScope = scopes.filter((s) => !OIDC_ONLY.has(s)).join(' ')
  let accessTokenTtl = opts.accessTokenTtl ?? 300
  const stats = newStats()

  // The issuer must be known before the provider is built, so the port is taken first.
  const http = createServer()
  await new Promise<void>((resolve, reject) => {
    http.once('error', reject)
    http.listen(opts.port ?? 0, '127.0.0.1', () => { http.off('error', reject); resolve() })
  })
  const port = (http.address() as AddressInfo).port
  const issuer = `http://127.0.0.1:${port}`

  const { privateKey } = await generateKeyPair('RS256', { extractable: true })
  const jwk = { ...(await exportJWK(privateKey)), kid: 'fixture-rs256', alg: 'RS256', use: 'sig' }

  const adapter = memoryAdapter({ keepClientScope: opts.restrictClientScope === true })
  const provider = new Provider(issuer, {
    clients: opts.clients ?? [],
    adapter,
    jwks: { keys: [jwk] },
    cookies: { keys: [randomBytes(32).toString('hex')] },
    scopes,
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub }) }),
    interactions: { url: async (_ctx, interaction) => `/interaction/${interaction.uid}` },
    // PKCE for confidential clients too (OAuth 2.1); oidc-provider accepts S256 only.
    pkce: { required: () => true },
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      // A client revokes only its own tokens (a public client asking for another's gets 200, nothing revoked).
      revocation: { enabled: true, allowedPolicy: async (_ctx: unknown, client: Client, token: { clientId: string }) => token.clientId === client.clientId },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: async (_ctx: unknown, _client: unknown, oneOf?: string) => oneOf,
        // A refresh or code exchange without `resource` still gets the JWT of the granted resource.
        useGrantedResource: async () => true,
        getResourceServerInfo: async (_ctx: unknown, resource: string) => ({
          audience: resource,
          scope: resourceScope,
          accessTokenTTL: accessTokenTtl,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } }
        })
      }
    },
    // Every client allowed the grant gets a refresh token, with or without offline_access: MCP
    // clients (the SDK's, the gateway) do not ask for offline_access.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed('refresh_token'),
    expiresWithSession: async () => false,
    rotateRefreshToken: true,
    // Every lifetime set, so oidc-provider prints no notice about its defaults.
    ttl: {
      AccessToken: () => accessTokenTtl,
      ClientCredentials: () => accessTokenTtl,
      AuthorizationCode: 60,
      IdToken: 3600,
      RefreshToken: 86400,
      Interaction: 600,
      Session: 86400,
      Grant: 86400
    }
  })

  provider.on('grant.success', (ctx: KoaContextWithOIDC) => {
    const type = String(ctx.oidc?.params?.grant_type)
    if (type === 'authorization_code' || type === 'refresh_token' || type === 'client_credentials') stats.grants[type]++
  })
  provider.on('registration_create.success', () => { stats.registrations++ })
  // oidc-provider has no revocation success event; its revocation route answers 200 on success.
  provider.use(async (ctx, next) => {
    await next()
    if (ctx.oidc?.route === 'revocation' && ctx.status === 200) stats.revocations++
  })
  // Counted, not logged: an error's context may carry tokens. A test asserts serverErrors is 0.
  provider.on('server_error', () => { stats.serverErrors++ })

  const callback = provider.callback()
  const interaction = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (req.method === 'GET') {
      const details = await provider.interactionDetails(req, res)
      res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' })
      res.end(`<form method="post"><input name="account"><button>Sign in (${details.prompt.name})</button></form>`)
      return
    }
    const form = await readForm(req)
    const accountId = form.get('account') ?? ''
    const details = await provider.interactionDetails(req, res)
    if (accountId === '') throw new Error('account is required')
    const { params } = details
    const clientId = String(params.client_id)
    // Consent with the login: everything requested is granted, the OIDC scopes and each resource's.
    const grant = details.grantId !== undefined
      ? await provider.Grant.find(details.grantId)
      : new provider.Grant({ accountId, clientId })
    if (grant === undefined) throw new Error('grant not found')
    const requested = String(params.scope ?? '').split(' ').filter((s) => s !== '')
    // The resource scopes are in `scopes` too (so the metadata lists them and registration accepts
    // them): oidc-provider then asks consent for them as OIDC scopes as well.
    grant.addOIDCScope(requested.join(' '))
    const resources = params.resource === undefined ? [] : [params.resource].flat().map(String)
    for (const r of resources) grant.addResourceScope(r, requested.filter((s) => !OIDC_ONLY.has(s)).join(' '))
    const grantId = await grant.save()
    stats.logins[accountId] = (stats.logins[accountId] ?? 0) + 1
    await provider.interactionFinished(req, res, { login: { accountId }, consent: { grantId } }, { mergeWithLastSubmission: false })
  }

  http.on('request', (req: IncomingMessage, res: ServerResponse) => {
    if ((req.url ?? '').startsWith('/interaction/')) {
      interaction(req, res).catch((err: unknown) => {
        if (res.headersSent) { res.destroy(); return }
        res.writeHead(400, { 'content-type': 'text/plain' })
        res.end(err instanceof Error ? err.message : 'interaction failed')
      })
      return
    }
    callback(req, res)
  })

  let closing: Promise<void> | undefined
  return {
    issuer,
    url: issuer,
    port,
    jwksUrl: `${issuer}/jwks`,
    stats: () => structuredClone(stats),
    setAccessTokenTtl: (seconds) => { accessTokenTtl = seconds },
    forgetGrants: () => { adapter.forget(['Grant', 'AuthorizationCode', 'AccessToken', 'RefreshToken', 'ClientCredentials']) },
    provider,
    close: async () => {
      closing ??= new Promise<void>((resolve) => {
        http.close(() => resolve())
        http.closeAllConnections()
      })
      return await closing
    }
  }
}
