/**
 * The `requestState` the gateway gives a 2026-07-28 /mcp client when an upstream server answers
 * a tools/call with `input_required` (multi round-trip, docs/ARCHITECTURE.md#mcp-eras): a
 * self-contained, HMAC-SHA256-protected, expiring handle binding the round to the tenant, the
 * caller's key, the tool's exposed name and the server that asked, and carrying that server's own
 * requestState byte for byte. Nothing is stored: any instance with the same key continues the
 * call. The handle is signed, not encrypted: it holds nothing the client did not see (the
 * server's state went to the client before the gateway existed in between, and the tenant is the
 * client's own). It is never logged or journaled.
 */
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto'

/** What a handle binds; `state` is the upstream server's own requestState (absent when it sent none). */
export interface RoundClaims {
  /** The acting tenant (`_` for none). */
  tenant: string
  /** The caller's API key id (`''` in open mode). */
  keyId: string
  /** The tool's name as the client called it. */
  name: string
  /** The server that asked (its pool key). */
  server: string
  state?: string | undefined
}

export type OpenedRound =
  | { ok: true, server: string, state: string | undefined }
  | { ok: false, why: 'malformed' | 'signature' | 'expired' | 'tenant' | 'key' | 'tool' }

export interface RequestStateSealerOptions {
  /** HMAC key material (any length; a key is derived from it). Absent: a random key of this process. */
  secret?: string | Buffer | undefined
  /** How long a handle is good for; default 10 minutes. */
  ttlMs?: number
  /** The clock (tests). */
  now?: () => number
}

const VERSION = 'g1'
const DEFAULT_TTL_MS = 10 * 60_000
const INFO = 'tool-gateway /mcp requestState v1'

interface Payload { t: string, k: string, n: string, s: string, u?: string, e: number }

export class RequestStateSealer {
  /** True when the key is this process's own (no SECRETS_KEY): another instance cannot continue a call. */
  readonly ephemeral: boolean
  readonly ttlMs: number
  readonly #key: Buffer
  readonly #now: () => number

  constructor (opts: RequestStateSealerOptions = {}) {
    this.ephemeral = opts.secret === undefined
    const material = opts.secret === undefined ? randomBytes(32) : Buffer.from(opts.secret)
    // A key of its own, derived from the secret: SECRETS_KEY also seals secrets at rest.
    this.#key = Buffer.from(hkdfSync('sha256', material, Buffer.alloc(0), INFO, 32))
    this.ttlMs = opts.ttlMs ?? DEFAULT_TTL_MS
    this.#now = opts.now ?? Date.now
  }

  /** The handle for one round. */
  seal (claims: RoundClaims): string {
    const payload: Payload = { t: claims.tenant, k: claims.keyId, n: claims.name, s: claims.server, e: this.#now() + this.ttlMs }
    if (claims.state !== undefined) payload.u = claims.state
    const body = `${VERSION}.${Buffer.from(JSON.stringify(payload)).toString('base64url')}`
    return `${body}.${this.#mac(body)}`
  }

  /** Checks a handle against the retry's tenant, key and tool; why not, when it fails. */
  open (handle: string, expect: Omit<RoundClaims, 'server' | 'state'>): OpenedRound {
    const parts = handle.split('.')
    if (parts.length !== 3 || parts[0] !== VERSION) return { ok: false, why: 'malformed' }
    const body = `${parts[0]}.${parts[1] as string}`
    const mac = Buffer.from(parts[2] as string, 'base64url')
    const want = Buffer.from(this.#mac(body), 'base64url')
    if (mac.length !== want.length || !timingSafeEqual(mac, want)) return { ok: false, why: 'signature' }
    let payload: Payload
    try {
      payload = JSON.parse(Buffer.from(parts[1] as string, 'base64url').toString('utf8')) as Payload
    } catch {
      return { ok: false, why: 'malformed' }
    }
    if (typeof payload.e !== 'number' || payload.e <= this.#now()) return { ok: false, why: 'expired' }
    if (payload.t !== expect.tenant) return { ok: false, why: 'tenant' }
    if (payload.k !== expect.keyId) return { ok: false, why: 'key' }
    if (payload.n !== expect.name) return { ok: false, why: 'tool' }
    return { ok: true, server: payload.s, state: payload.u }
  }

  #mac (body: string): string {
    return createHmac('sha256', this.#key).update(body).digest('base64url')
  }
}
