import { createHash } from 'node:crypto'

/** Most addresses tracked at once; beyond it expired windows, then the oldest, are dropped. */
const MAX_ADDRESSES = 50_000

/**
 * Counts wrong API keys per client address in fixed one-minute windows. Once an address reaches
 * the limit it is refused until its window ends, whatever key it sends: if a right guess were
 * still served, the refusals of wrong guesses would tell it apart and the guard would slow
 * nothing. Per instance, in memory: N instances allow N times the limit, still bounded.
 */
export class AuthFailureGuard {
  readonly #limit: number
  readonly #windowMs: number
  readonly #windows = new Map<string, { failures: number, resetAt: number }>()

  /** `limit` failures per `windowMs` per address; 0 turns the guard off. */
  constructor (limit: number, windowMs = 60_000) {
    this.#limit = limit
    this.#windowMs = windowMs
  }

  /** Milliseconds until `address` may try again, or 0 when it is not blocked. */
  blockedFor (address: string, now = Date.now()): number {
    if (this.#limit === 0) return 0
    const w = this.#windows.get(address)
    if (w === undefined || w.resetAt <= now || w.failures < this.#limit) return 0
    return w.resetAt - now
  }

  /** Records one wrong key from `address`. */
  recordFailure (address: string, now = Date.now()): void {
    if (this.#limit === 0) return
    let w = this.#windows.get(address)
    if (w === undefined || w.resetAt <= now) {
      this.#windows.delete(address)
      if (this.#windows.size >= MAX_ADDRESSES) this.#evict(now)
      w = { failures: 0, resetAt: now + this.#windowMs }
      this.#windows.set(address, w)
    }
    w.failures++
  }

  /** Addresses currently tracked (for tests). */
  get size (): number {
    return this.#windows.size
  }

  #evict (now: number): void {
    for (const [address, w] of this.#windows) if (w.resetAt <= now) this.#windows.delete(address)
    // Insertion order is window-start order: the first entries are the oldest windows.
    for (const address of this.#windows.keys()) {
      if (this.#windows.size < MAX_ADDRESSES) break
      this.#windows.delete(address)
    }
  }
}

/** Characters of a presented key that name its throttling bucket (see KeyGuessGuard). */
const KEY_PREFIX_CHARS = 8
/** The per-address ceiling is this many times the per-(address, key prefix) limit. */
const ADDRESS_CEILING_FACTOR = 10

/**
 * Key-guess throttling that does not let one address lock out everyone behind it (a NAT, a
 * proxy). Two windows:
 * - per (address, first KEY_PREFIX_CHARS characters of the presented key): `limit` wrong keys
 *   a minute, then every key with that prefix from that address is refused until the window
 *   ends, a right one too (a right guess must not be told apart from the refused wrong ones).
 *   Other keys from the same address, whose prefix was not guessed, keep working.
 * - per address, a ceiling `ADDRESS_CEILING_FACTOR` times higher across all prefixes: a guesser
 *   that varies the prefix is still bounded, and then the whole address is refused.
 * Prefixes are kept as a hash, never in clear.
 */
export class KeyGuessGuard {
  readonly #perPrefix: AuthFailureGuard
  readonly #perAddress: AuthFailureGuard

  /** `limit` failures per minute per (address, key prefix), `ceiling` per address; limit 0 turns both off. */
  constructor (limit: number, ceiling = limit * ADDRESS_CEILING_FACTOR, windowMs = 60_000) {
    this.#perPrefix = new AuthFailureGuard(limit, windowMs)
    this.#perAddress = new AuthFailureGuard(limit === 0 ? 0 : Math.max(limit, ceiling), windowMs)
  }

  /** Milliseconds until the address may send anything again (the ceiling), or 0. */
  addressBlockedFor (address: string, now = Date.now()): number {
    return this.#perAddress.blockedFor(address, now)
  }

  /** Milliseconds until `address` may try keys starting like `key` again, or 0. */
  blockedFor (address: string, key: string, now = Date.now()): number {
    if (this.#perPrefix.size === 0) return this.addressBlockedFor(address, now)
    return Math.max(this.addressBlockedFor(address, now), this.#perPrefix.blockedFor(bucket(address, key), now))
  }

  /** Records one wrong key from `address`. */
  recordFailure (address: string, key: string, now = Date.now()): void {
    this.#perPrefix.recordFailure(bucket(address, key), now)
    this.#perAddress.recordFailure(address, now)
  }
}

function bucket (address: string, key: string): string {
  const prefix = createHash('sha256').update(key.slice(0, KEY_PREFIX_CHARS)).digest('base64url').slice(0, 16)
  return `${address} ${prefix}`
}
