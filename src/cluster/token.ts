import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/** The header that carries an instance-to-instance call's token. */
export const CLUSTER_TOKEN_HEADER = 'x-gateway-cluster-token'
/** How long a token is accepted after (and before, for clock skew) its timestamp. */
export const CLUSTER_TOKEN_MAX_AGE_MS = 30_000

/** What a token is bound to: the request it was made for, so it authorises nothing else. */
export interface SignedRequest {
  method: string
  /** The URL path, with its query string if any. */
  path: string
  /** The exact body sent ('' for none). */
  body: string
}

export type TokenCheck =
  | { ok: true }
  | { ok: false, reason: 'missing' | 'malformed' | 'expired' | 'bad-signature' | 'replayed' }

/**
 * Instance-to-instance calls are signed with a key derived from CLUSTER_SECRET (never the
 * secret itself): `v1.{timestamp ms}.{nonce}.{HMAC-SHA256 hex}` over the version, timestamp,
 * nonce, method, path and the body's SHA-256. A captured token expires after
 * CLUSTER_TOKEN_MAX_AGE_MS and is good for that one request only: another body or path fails the
 * signature, and a replay within its lifetime fails the nonce check (ClusterTokenVerifier).
 */
export class ClusterTokens {
  readonly #key: Buffer

  constructor (secret: string) {
    if (secret.length < 16) throw new Error('CLUSTER_SECRET must be at least 16 characters')
    this.#key = createHmac('sha256', secret).update('tool-gateway cluster token v1').digest()
  }

  sign (req: SignedRequest, now = Date.now()): string {
    const nonce = randomBytes(12).toString('hex')
    return `v1.${now}.${nonce}.${this.#mac(String(now), nonce, req)}`
  }

  /** Checks the signature and the age only (the verifier adds the replay check). */
  check (token: string | undefined, req: SignedRequest, now = Date.now()): TokenCheck & { nonce?: string, ts?: number } {
    if (token === undefined || token === '') return { ok: false, reason: 'missing' }
    const m = /^v1\.([0-9]{1,15})\.([0-9a-f]{24})\.([0-9a-f]{64})$/.exec(token)
    if (m === null) return { ok: false, reason: 'malformed' }
    const [, ts, nonce, mac] = m as unknown as [string, string, string, string]
    const expected = Buffer.from(this.#mac(ts, nonce, req), 'hex')
    if (!timingSafeEqual(expected, Buffer.from(mac, 'hex'))) return { ok: false, reason: 'bad-signature' }
    if (Math.abs(now - Number(ts)) > CLUSTER_TOKEN_MAX_AGE_MS) return { ok: false, reason: 'expired' }
    return { ok: true, nonce, ts: Number(ts) }
  }

  #mac (ts: string, nonce: string, req: SignedRequest): string {
    const bodyHash = createHash('sha256').update(req.body).digest('hex')
    return createHmac('sha256', this.#key).update(`v1\n${ts}\n${nonce}\n${req.method.toUpperCase()}\n${req.path}\n${bodyHash}`).digest('hex')
  }
}

/** Most nonces remembered; past it the oldest go (they expire within CLUSTER_TOKEN_MAX_AGE_MS anyway). */
const MAX_NONCES = 200_000

/** The receiving side: signature, age, and each token accepted once. Memory bounded by MAX_NONCES. */
export class ClusterTokenVerifier {
  readonly #tokens: ClusterTokens
  /** nonce -> when it may be forgotten; insertion order is expiry order (the age bound is fixed). */
  readonly #seen = new Map<string, number>()

  constructor (tokens: ClusterTokens) {
    this.#tokens = tokens
  }

  verify (token: string | undefined, req: SignedRequest, now = Date.now()): TokenCheck {
    const checked = this.#tokens.check(token, req, now)
    if (!checked.ok) return checked
    for (const [nonce, until] of this.#seen) {
      if (until > now && this.#seen.size < MAX_NONCES) break
      this.#seen.delete(nonce)
    }
    const nonce = checked.nonce as string
    if (this.#seen.has(nonce)) return { ok: false, reason: 'replayed' }
    this.#seen.set(nonce, now + 2 * CLUSTER_TOKEN_MAX_AGE_MS)
    return { ok: true }
  }
}
