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
