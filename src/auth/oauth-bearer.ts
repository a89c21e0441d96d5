import { createHash } from 'node:crypto'
import { createRemoteJWKSet, customFetch, errors as joseErrors, jwtVerify } from 'jose'
import type { JWTPayload, JWTVerifyGetKey } from 'jose'
import type { Config } from '../config.js'
import { StartupError } from '../errors.js'
import { isValidId } from '../naming/names.js'

/**
 * Incoming OAuth (README "Incoming OAuth", SPEC 16): JWT access tokens of one external
 * authorization server, accepted beside the API keys. The verifier finds the issuer's JWKS
 * through its metadata on first use (never at start-up: the issuer may be down while the gateway
 * starts) and checks each token's signature, `iss`, `aud`, `exp` and `nbf`.
 */

/**
 * Asymmetric algorithms only. An HMAC algorithm would let anyone holding the issuer's public
 * key (everyone: it is published) sign tokens with it as the secret; `none` is no signature.
 */
const ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA']

/** Longer tokens are refused before any parsing (the work a request can cause stays bounded). */
const MAX_TOKEN_LENGTH = 8 * 1024
/** Clock skew tolerated on `exp` and `nbf` between the issuer and this host. */
const CLOCK_TOLERANCE_S = 30
/** A metadata document larger than this is not read further (real ones are a few KiB). */
const MAX_METADATA_BYTES = 256 * 1024
const FETCH_TIMEOUT_MS = 5000

/** Three base64url segments (the third empty for `alg: none`, which is then refused as such). */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/

/** Whether a presented credential looks like a compact JWS (a JWT access token) rather than an API key. */
export function hasJwtShape (token: string): boolean {
  return token.length <= MAX_TOKEN_LENGTH && JWT_SHAPE.test(token)
}

/** Who a verified token is, in the shape of the API keys' callers. */
export interface TokenCaller {
  userId: string | undefined
  isAdmin: boolean
  /** `oauth:` + 16 hex chars of SHA-256(iss|sub): per-subject rate-limit buckets and journal entries, never the token. */
  keyId: string
  role?: 'approver'
}

/**
 * A token's verdict. `invalid`: the token is wrong (401 invalid_token; the message says what, never
 * echoing the token). `unavailable`: the issuer's metadata or keys could not be fetched, so nothing
 * could be decided (the token may well be valid); `detail` says why, for the log.
 */
export type TokenVerdict =
  | { ok: true, caller: TokenCaller }
  | { ok: false, reason: 'invalid', message: string }
  | { ok: false, reason: 'unavailable', message: string, detail: string }

export interface OAuthBearerOptions {
  issuer: string
  /** Accepted `aud` values: a token naming any of them is for this gateway. */
  audiences: readonly string[]
  /** The claim that names the tenant (OAUTH_TENANT_CLAIM). */
  tenantClaim: string
  adminScope?: string | undefined
  approverScope?: string | undefined
  /**
   * Minimum time between two JWKS fetches caused by an unknown `kid` (jose's cooldown): a key
   * rotation is picked up at most this long after the previous fetch, and tokens with made-up
   * kids cannot make the gateway hammer the issuer. Default 30 s.
   */
  jwksCooldownMs?: number
  /** After a failed discovery, further requests within this time fail at once instead of trying again. Default 2 s. */
  discoveryRetryMs?: number
}

/** The metadata documents to try, in order (RFC 8414 section 3.1 path insertion, then OpenID Connect Discovery's forms). */
export function metadataUrls (issuer: string): string[] {
  const url = new URL(issuer)
  const path = url.pathname.replace(/\/+$/, '')
  if (path === '') return [`${url.origin}/.well-known/oauth-authorization-server`, `${url.origin}/.well-known/openid-configuration`]
  return [
    `${url.origin}/.well-known/oauth-authorization-server${path}`,
    `${url.origin}/.well-known/openid-configuration${path}`,
    `${url.origin}${path}/.well-known/openid-configuration`
  ]
}

class Unavailable extends Error {}

async function readBounded (res: Response, limit: number): Promise<string> {
  const reader = res.body?.getReader()
  if (reader === undefined) return ''
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > limit) {
      await reader.cancel()
      throw new Error(`larger than ${limit} bytes`)
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks).toString('utf8')
}

/** A JWKS document larger than this is not read further (a real one is a few KiB, even with a rotation's keys). */
const MAX_JWKS_BYTES = 256 * 1024

/** The JWKS fetch, its body read only up to MAX_JWKS_BYTES: a hostile or broken issuer cannot make the gateway hold megabytes. */
async function boundedFetch (url: string, options: RequestInit): Promise<Response> {
  const res = await fetch(url, options)
  const body = await readBounded(res, MAX_JWKS_BYTES)
  return new Response(body, { status: res.status, headers: res.headers })
}

/** The issuer's `jwks_uri`, from the first metadata document that answers and names this issuer. */
async function discoverJwksUri (issuer: string): Promise<URL> {
  const problems: string[] = []
  for (const url of metadataUrls(issuer)) {
    let metadata: unknown
    try {
      const res = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) })
      if (res.status !== 200) {
        await res.body?.cancel()
        problems.push(`${url}: HTTP ${res.status}`)
        continue
      }
      metadata = JSON.parse(await readBounded(res, MAX_METADATA_BYTES))
    } catch (err) {
      problems.push(`${url}: ${(err as Error).message}`)
      continue
    }
    const doc = metadata as { issuer?: unknown, jwks_uri?: unknown }
    // RFC 8414 section 3.3: a document naming another issuer must not be used (it could hand out another server's keys).
    if (doc.issuer !== issuer) {
      problems.push(`${url}: its issuer ${JSON.stringify(doc.issuer)} is not ${issuer}`)
      continue
    }
    if (typeof doc.jwks_uri !== 'string') {
      problems.push(`${url}: no jwks_uri`)
      continue
    }
    const jwks = new URL(doc.jwks_uri)
    // Keys over plain HTTP only from an issuer that is itself plain HTTP (a loopback test issuer).
    if (jwks.protocol !== 'https:' && !(jwks.protocol === 'http:' && issuer.startsWith('http:'))) {
      problems.push(`${url}: jwks_uri is not https`)
      continue
    }
    return jwks
  }
  throw new Unavailable(problems.join('; '))
}

/** The token's scopes: `scope` (RFC 9068, space-separated) or `scp` (an array, as some issuers write it). */
function scopesOf (payload: JWTPayload): Set<string> {
  const scopes = new Set<string>()
  const lists: unknown[] = [payload.scope, payload.scp]
  for (const list of lists) {
    const items: unknown[] = typeof list === 'string' ? list.split(' ') : Array.isArray(list) ? list : []
    for (const s of items) if (typeof s === 'string' && s !== '') scopes.add(s)
  }
  return scopes
}

/** What a jose error says about the token, in words a client can act on (never the token). */
function invalidMessage (err: unknown, audiences: readonly string[]): string | undefined {
  if (err instanceof joseErrors.JWTExpired) return 'The access token has expired'
  if (err instanceof joseErrors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return `The access token is not for this gateway: its audience (aud) must be ${audiences.join(' or ')}`
    if (err.claim === 'iss') return 'The access token was not issued by this gateway\'s authorization server (iss)'
    if (err.claim === 'nbf') return 'The access token is not valid yet (nbf)'
    if (err.reason === 'missing') return `The access token has no ${err.claim} claim`
    return `The access token's ${err.claim} claim is invalid`
  }
  if (err instanceof joseErrors.JOSEAlgNotAllowed) return `The access token's algorithm is not accepted (asymmetric only: ${ALGORITHMS.join(', ')})`
  if (err instanceof joseErrors.JWKSNoMatchingKey) return 'The access token\'s signing key (kid) is not one of the issuer\'s keys'
  if (err instanceof joseErrors.JWKSMultipleMatchingKeys || err instanceof joseErrors.JWSSignatureVerificationFailed) {
    return 'The access token\'s signature does not verify with the issuer\'s keys'
  }
  if (err instanceof joseErrors.JWSInvalid || err instanceof joseErrors.JWTInvalid || err instanceof joseErrors.JOSENotSupported) {
    return 'The access token is not a valid signed JWT'
  }
  return undefined
}

/**
 * Verifies the access tokens of one issuer. Discovery and the JWKS are fetched lazily and shared
 * by concurrent requests; a failed discovery is tried again by a later request.
 */
export class OAuthBearerVerifier {
  readonly #opts: OAuthBearerOptions
  #keys: Promise<JWTVerifyGetKey> | undefined
  #failed: { at: number, detail: string } | undefined

  constructor (opts: OAuthBearerOptions) {
    this.#opts = opts
  }

  get issuer (): string {
    return this.#opts.issuer
  }

  /** The scopes worth advertising in the protected resource metadata (the ones that grant a role). */
  get scopes (): string[] {
    return [this.#opts.adminScope, this.#opts.approverScope].filter((s): s is string => s !== undefined)
  }

  async #keySet (): Promise<JWTVerifyGetKey> {
    if (this.#keys !== undefined) return await this.#keys
    const failed = this.#failed
    if (failed !== undefined && Date.now() - failed.at < (this.#opts.discoveryRetryMs ?? 2000)) throw new Unavailable(failed.detail)
    const keys = discoverJwksUri(this.#opts.issuer).then((uri) => createRemoteJWKSet(uri, {
      timeoutDuration: FETCH_TIMEOUT_MS,
      cooldownDuration: this.#opts.jwksCooldownMs ?? 30_000,
      [customFetch]: boundedFetch
    }))
    this.#keys = keys
    try {
      return await keys
    } catch (err) {
      // Forget the failure: the next request (after discoveryRetryMs) discovers again.
      if (this.#keys === keys) this.#keys = undefined
      this.#failed = { at: Date.now(), detail: (err as Error).message }
      throw err
    }
  }

  /** Verifies one token. Only bugs throw. */
  async verify (token: string): Promise<TokenVerdict> {
    if (token.length > MAX_TOKEN_LENGTH) return { ok: false, reason: 'invalid', message: `The access token is longer than ${MAX_TOKEN_LENGTH} characters` }
    const opts = this.#opts
    let payload: JWTPayload
    try {
      const keys = await this.#keySet()
      ;({ payload } = await jwtVerify(token, keys, {
        issuer: opts.issuer,
        audience: [...opts.audiences],
        algorithms: ALGORITHMS,
        requiredClaims: ['exp'],
        clockTolerance: CLOCK_TOLERANCE_S
      }))
    } catch (err) {
      const message = invalidMessage(err, opts.audiences)
      if (message !== undefined) return { ok: false, reason: 'invalid', message }
      // Anything else is the issuer's side: its metadata or JWKS could not be fetched or read.
      return {
        ok: false,
        reason: 'unavailable',
        message: 'The authorization server\'s keys could not be fetched to check the access token; retry later',
        detail: err instanceof Error ? `${err.name}: ${err.message}` : String(err)
      }
    }
    return this.#callerOf(payload)
  }

  #callerOf (payload: JWTPayload): TokenVerdict {
    const opts = this.#opts
    const subject = typeof payload.sub === 'string' ? payload.sub : ''
    // Per subject, not per token: a client's refreshed tokens share its rate-limit bucket.
    const keyId = `oauth:${createHash('sha256').update(`${opts.issuer}|${subject}`).digest('hex').slice(0, 16)}`
    const scopes = scopesOf(payload)
    if (opts.adminScope !== undefined && scopes.has(opts.adminScope)) return { ok: true, caller: { userId: undefined, isAdmin: true, keyId } }
    const tenant = payload[opts.tenantClaim]
    if (typeof tenant !== 'string' || !isValidId(tenant)) {
      return {
        ok: false,
        reason: 'invalid',
        message: `The access token's ${opts.tenantClaim} claim (the tenant) is missing or not a userId matching ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`
      }
    }
    if (opts.approverScope !== undefined && scopes.has(opts.approverScope)) {
      return { ok: true, caller: { userId: tenant, isAdmin: false, keyId, role: 'approver' } }
    }
    return { ok: true, caller: { userId: tenant, isAdmin: false, keyId } }
  }
}

/** The incoming OAuth settings of the config: undefined without OAUTH_ISSUER. */
export interface OAuthResource {
  verifier: OAuthBearerVerifier
  /** `${PUBLIC_URL}/mcp` and PUBLIC_URL: the protected resources the metadata documents describe; undefined without PUBLIC_URL. */
  resource: { mcp: string, root: string } | undefined
  /** `${PUBLIC_URL}/.well-known/oauth-protected-resource/mcp`, named in every 401's WWW-Authenticate. */
  metadataUrl: string | undefined
}

/**
 * The verifier and the resource's URLs from the config. OAUTH_ISSUER without PUBLIC_URL and
 * OAUTH_AUDIENCE is a StartupError: no token could name an audience this gateway accepts.
 */
export function oauthResourceOf (
  config: Pick<Config, 'oauthIssuer' | 'oauthAudience' | 'publicUrl' | 'oauthTenantClaim' | 'oauthAdminScope' | 'oauthApproverScope'>,
  tuning: Pick<OAuthBearerOptions, 'jwksCooldownMs' | 'discoveryRetryMs'> = {}
): OAuthResource | undefined {
  if (config.oauthIssuer === undefined) return undefined
  const base = config.publicUrl?.replace(/\/+$/, '')
  if (base === undefined && config.oauthAudience === undefined) {
    throw new StartupError('OAUTH_ISSUER is set without PUBLIC_URL or OAUTH_AUDIENCE: set PUBLIC_URL (the audience is then {PUBLIC_URL}/mcp) or OAUTH_AUDIENCE')
  }
  const resource = base === undefined ? undefined : { mcp: `${base}/mcp`, root: base }
  const audiences = config.oauthAudience !== undefined ? [config.oauthAudience] : [`${base}/mcp`, `${base}`]
  return {
    verifier: new OAuthBearerVerifier({
      issuer: config.oauthIssuer,
      audiences,
      tenantClaim: config.oauthTenantClaim,
      adminScope: config.oauthAdminScope,
      approverScope: config.oauthApproverScope,
      ...tuning
    }),
    resource,
    metadataUrl: base === undefined ? undefined : `${base}/.well-known/oauth-protected-resource/mcp`
  }
}
