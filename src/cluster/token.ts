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

/**
 * Where the receiving side remembers the nonces it accepted, so each token is accepted once.
 * With Redis one store serves every instance (a token captured on its way to one instance is
 * refused by all the others too); without Redis the gateway is one instance and memory is enough.
 */
export interface NonceStore {
  /**
   * Records the nonce until `untilMs` (epoch ms): true the first time, false when it was
   * already recorded (a replay). Throws when the store cannot answer (the call is then refused).
   */
  claim: (nonce: string, untilMs: number, now: number) => Promise<boolean>
}

/** Most nonces remembered; past it the oldest go (they expire within 2 x CLUSTER_TOKEN_MAX_AGE_MS anyway). */
const MAX_NONCES = 200_000

/** One instance's nonces in memory, bounded by MAX_NONCES. */
export class MemoryNonceStore implements NonceStore {
  /** nonce -> when it may be forgotten; insertion order is nearly expiry order (the age bound is fixed). */
  readonly #seen = new Map<string, number>()

  async claim (nonce: string, untilMs: number, now: number): Promise<boolean> {
    for (const [old, until] of this.#seen) {
      if (until > now && this.#seen.size < MAX_NONCES) break
      this.#seen.delete(old)
    }
    if (this.#seen.has(nonce)) return false
    this.#seen.set(nonce, untilMs)
    return true
  }
}

/** The token checks a receiving instance makes: signature, age, and each token accepted once (a NonceStore). */
export class ClusterTokenVerifier {
  readonly #tokens: ClusterTokens
  readonly #nonces: NonceStore

  constructor (tokens: ClusterTokens, nonces: NonceStore = new MemoryNonceStore()) {
    this.#tokens = tokens
    this.#nonces = nonces
  }

  async verify (token: string | undefined, req: SignedRequest, now = Date.now()): Promise<TokenCheck | { ok: false, reason: 'unavailable' }> {
    const checked = this.#tokens.check(token, req, now)
    if (!checked.ok) return checked
    // Remembered for as long as any instance may still accept the token: its age bound after its
    // timestamp, plus the same again for the clocks of the instances to disagree.
    const until = (checked.ts as number) + 2 * CLUSTER_TOKEN_MAX_AGE_MS
    let first: boolean
    try {
      first = await this.#nonces.claim(checked.nonce as string, until, now)
    } catch {
      return { ok: false, reason: 'unavailable' }
    }
    return first ? { ok: true } : { ok: false, reason: 'replayed' }
  }
}
