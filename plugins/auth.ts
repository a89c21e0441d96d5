import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { loadApiKeys } from '../src/auth/api-keys.js'
import { KeyGuessGuard } from '../src/auth/failure-guard.js'
import type { ApiKeys } from '../src/auth/api-keys.js'
import { hasJwtShape } from '../src/auth/oauth-bearer.js'
import type { OAuthResource } from '../src/auth/oauth-bearer.js'
import { HttpError } from '../src/errors.js'
import type { Caller } from '../src/routing/types.js'
import { isClusterRoute, rulesOf } from './route-config.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** `open`: no key and no OAUTH_ISSUER configured, every caller is admin (local development). `keyed`: Bearer keys or tokens required. */
    authMode: 'open' | 'keyed'
    /** How many keys of each kind are configured (counts only; for the start-up announcement). */
    apiKeyCounts: { admin: number, tenant: number, approver: number }
  }
  interface FastifyRequest {
    /** Who is calling: set before any route runs. */
    caller: Caller
    /**
     * The non-reversible id of the key (or `oauth:` + a hash of the token's issuer and subject) that
     * authenticated the request (rate-limit buckets); undefined when open or public.
     */
    apiKeyId: string | undefined
  }
}

/** Longer Authorization headers are refused before any hashing (keys are at most 512 chars). */
const MAX_AUTHORIZATION_LENGTH = 8 * 1024

const REALM = 'Bearer realm="tool-gateway"'

export interface AuthPluginOptions {
  /** API_KEYS / API_KEYS_FILE as in the config; neither set = open mode. */
  apiKeys?: string | undefined
  apiKeysFile?: string | undefined
  /**
   * Wrong keys per client address and key prefix per minute before that prefix is refused from
   * that address (AUTH_FAILURES_PER_MINUTE); the address as a whole gets 10 times that. 0 = off.
   */
  failuresPerMinute?: number
  /** Incoming OAuth (OAUTH_ISSUER): JWT access tokens accepted beside the keys, and never open mode. */
  oauth?: OAuthResource | undefined
}

type Refuse = (
  reply: FastifyReply,
  error: 'invalid_request' | 'invalid_token' | undefined,
  code: 'GW_UNAUTHORIZED' | 'GW_BAD_REQUEST',
  message: string
) => HttpError

/**
 * RFC 6750 section 3: every refusal names the scheme; error= says what was wrong. With OAUTH_ISSUER,
 * RFC 9728 section 5.1: resource_metadata tells an OAuth client where to find the authorization
 * server, and error_description says what was wrong with its token (never the token).
 */
function refuserOf (oauth: OAuthResource | undefined): Refuse {
  const challenge = oauth?.metadataUrl === undefined ? REALM : `${REALM}, resource_metadata="${oauth.metadataUrl}"`
  return (reply, error, code, message) => {
    let value = challenge
    if (error !== undefined) value += `, error="${error}"`
    // The grammar of error_description: printable ASCII without `"` and `\`.
    if (error !== undefined && oauth !== undefined) value += `, error_description="${message.replace(/[^\x20-\x21\x23-\x5b\x5d-\x7e]/g, '')}"`
    reply.header('www-authenticate', value)
    return new HttpError(code, message)
  }
}

function throwIfBlocked (reply: FastifyReply, blockedMs: number): void {
  if (blockedMs <= 0) return
  const seconds = Math.ceil(blockedMs / 1000)
  reply.header('retry-after', String(seconds))
  throw new HttpError('GW_RATE_LIMITED', `Too many failed authentications from this address; retry in ${seconds} seconds`)
}

/** A route's path as openapi.yaml writes it: `/mcp/servers/{serverId}`, not Fastify's `:serverId`. */
function routePath (url: string | undefined): string {
  return (url ?? '').replace(/:([A-Za-z0-9_]+)/g, '{$1}')
}

/**
 * Authenticates every request and sets `request.caller` (docs/ARCHITECTURE.md#tenancy). Without configured keys
 * (and without OAUTH_ISSUER) the gateway runs open: every caller is admin. Otherwise every non-public route needs
 * `Authorization: Bearer <key>`; an admin key acts for any tenant, a tenant key only as its
 * userId (tenancy.ts enforces that where a userId is named). With OAUTH_ISSUER, a Bearer credential
 * that is no key and has a JWT's shape is verified as the issuer's access token (src/auth/oauth-bearer.ts)
 * and acts like the key its scopes name. The key or token is never logged: failure
 * messages say what was wrong, not what was sent.
 */
export default fp(async function authPlugin (app: FastifyInstance, opts: AuthPluginOptions) {
  const keys: ApiKeys = await loadApiKeys({ apiKeys: opts.apiKeys, apiKeysFile: opts.apiKeysFile })
  const oauth = opts.oauth
  // An issuer means tokens are required: never open, even with no API key configured.
  const open = keys.size === 0 && oauth === undefined
  const refuse = refuserOf(oauth)
  const credential = oauth === undefined ? 'API key' : 'API key or access token'
  const guard = new KeyGuessGuard(opts.failuresPerMinute ?? 0)
  app.decorate('authMode', open ? 'open' as const : 'keyed' as const)
  app.decorate('apiKeyCounts', keys.counts())
  app.decorateRequest('caller', null as unknown as Caller)
  app.decorateRequest('apiKeyId', undefined)

  // After validation, like the checks of the handler it guards: a malformed request is a 400 whoever sends it.
  // Callback hooks where nothing is awaited: no promise per hook on every request.
  app.addHook('preHandler', (request, _reply, done) => {
    const rules = rulesOf(request)
    if (rules.admin === true && !request.caller.isAdmin) {
      done(new HttpError('GW_FORBIDDEN', `${request.method} ${routePath(rules.url)} needs an admin key`))
      return
    }
    // An approver key decides held calls; it never runs tools or reaches anything else of its tenant.
    if (request.caller.role === 'approver' && rules.approver !== true) {
      done(new HttpError('GW_FORBIDDEN', 'An approver key only reads and decides approvals and reads the journal of its tenant'))
      return
    }
    done()
  })

  if (open) {
    app.addHook('onRequest', (request, _reply, done) => {
      // Instance-to-instance routes are nobody's, open mode or not: their token is checked by cluster-auth.
      request.caller = isClusterRoute(request) ? { userId: undefined, isAdmin: false } : { userId: undefined, isAdmin: true }
      done()
    })
    return
  }

  app.addHook('onRequest', async (request, reply) => {
    // Public routes act as nobody: not admin, no tenant. The rule is read from the route Fastify
    // matched, not the raw URL, so `/healthz/../tools` or `/docs%2F..` cannot pass as public.
    request.caller = { userId: undefined, isAdmin: false }
    const rules = rulesOf(request)
    if (rules.public === true && rules.requireKey !== true) return
    // Other instances send a CLUSTER_SECRET token, never an API key (the cluster-auth plugin checks it).
    if (rules.cluster === true) return
    // Past the per-address ceiling nothing from the address is looked at.
    throwIfBlocked(reply, guard.addressBlockedFor(request.ip))

    const header: unknown = request.headers.authorization
    if (header === undefined || header === '') {
      throw refuse(reply, undefined, 'GW_UNAUTHORIZED', `Missing Authorization header: send Authorization: Bearer <${credential}>`)
    }
    // Node's HTTP parser refuses CR/LF and keeps one Authorization header; other entry points
    // (inject, proxies, HTTP/2) may not, so both are checked here too.
    if (typeof header !== 'string') throw refuse(reply, 'invalid_request', 'GW_BAD_REQUEST', 'More than one Authorization header')
    if (header.length > MAX_AUTHORIZATION_LENGTH) throw refuse(reply, 'invalid_request', 'GW_BAD_REQUEST', `Authorization header longer than ${MAX_AUTHORIZATION_LENGTH} bytes`)
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(header)) throw refuse(reply, 'invalid_request', 'GW_BAD_REQUEST', 'Control characters in the Authorization header')

    const space = header.indexOf(' ')
    const scheme = space < 0 ? header : header.slice(0, space)
    if (scheme.toLowerCase() !== 'bearer') throw refuse(reply, undefined, 'GW_UNAUTHORIZED', 'Unsupported Authorization scheme: use Bearer')
    const token = space < 0 ? '' : header.slice(space + 1).trim()
    if (token === '') throw refuse(reply, 'invalid_token', 'GW_UNAUTHORIZED', `Empty ${credential}`)
    const jwt = oauth !== undefined && hasJwtShape(token)
    // Every JWT starts alike (`eyJhbGci...`): bucketed by its first characters, one client's expired
    // token would lock every token holder behind the same address out. Its signature is its own
    // bucket; the per-address ceiling still bounds a client that keeps sending new bad tokens.
    const guardKey = jwt ? token.slice(token.lastIndexOf('.') + 1) : token
    // Keys starting like the ones guessed from this address are refused before the lookup, a
    // right one too: otherwise its answer would tell a right guess from the refused wrong ones.
    throwIfBlocked(reply, guard.blockedFor(request.ip, guardKey))

    const entry = keys.lookup(token)
    if (entry === undefined && jwt) {
      const verdict = await oauth.verifier.verify(token)
      if (verdict.ok) {
        request.apiKeyId = verdict.caller.keyId
        request.caller = verdict.caller
        return
      }
      if (verdict.reason === 'unavailable') {
        // Not the client's fault and not a verdict on its token: a 401 would make an OAuth client
        // drop a good token and send its user through authorization again. Not counted as a guess.
        request.log.warn({ issuer: oauth.verifier.issuer, detail: verdict.detail }, 'incoming OAuth: the issuer\'s metadata or keys could not be fetched')
        reply.header('retry-after', '5')
        throw new HttpError('GW_ISSUER_UNAVAILABLE', verdict.message)
      }
      guard.recordFailure(request.ip, guardKey)
      throw refuse(reply, 'invalid_token', 'GW_UNAUTHORIZED', verdict.message)
    }
    if (entry === undefined) {
      guard.recordFailure(request.ip, guardKey)
      throw refuse(reply, 'invalid_token', 'GW_UNAUTHORIZED', `Unknown ${credential}`)
    }
    request.apiKeyId = entry.id
    request.caller = entry.scope.kind === 'admin'
      ? { userId: undefined, isAdmin: true, keyId: entry.id }
      : entry.scope.kind === 'approver'
        ? { userId: entry.scope.userId, isAdmin: false, keyId: entry.id, role: 'approver' }
        : { userId: entry.scope.userId, isAdmin: false, keyId: entry.id }
  })
  // After the overhead plugin: its onRequest hook must run first, so a request auth refuses still
  // gets a right x-gateway-overhead-ms.
}, { name: 'gateway-auth', dependencies: ['gateway-overhead'] })
