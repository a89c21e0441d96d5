/**
 * Circuit breakers for remote MCP servers, one per client id of a pool (caller key and config
 * hash, so a new config starts with a closed breaker). A server that keeps failing in transport
 * is not dialled again for every call: its calls fail fast while it is open, then one probe (a
 * real call or listing) decides whether it closes or stays open.
 *
 * What counts is decided by the pool: failed connects and transport or protocol failures of
 * operations are failures; an answer of the server (a result, isError or not, a JSON-RPC error)
 * is a success; cancellations and tool timeouts count neither way.
 */

export type BreakerState = 'closed' | 'open' | 'half-open'

export interface BreakerOptions {
  /** Consecutive failures that open the breaker. */
  failures: number
  /** The failures must fall within this many ms, counted from the first of the run. */
  windowMs: number
  /** How long it stays open before a half-open probe is let through. */
  openMs: number
  /** At most this many breakers are remembered (least recently touched forgotten first: they are closed ones in practice). */
  maxEntries: number
}

/** One breaker as GET /status shows it. */
export interface BreakerSnapshot {
  /** The pool's client key (`{serverId}` or `user_{userId}_service_{serverId}`). */
  key: string
  state: BreakerState
  consecutiveFailures: number
  /** Epoch ms it (last) opened; null while it never opened in this run of failures. */
  openedAt: number | null
  /** Epoch ms from which a probe is let through; null unless open. */
  retryAt: number | null
  /** Why the last failure happened (secrets already redacted by the pool). */
  lastError: string | null
}

/** What admit() decides. */
export type Admission =
  | { ok: true, probe: boolean }
  | { ok: false, retryAt: number, message: string }

interface Breaker {
  key: string
  state: BreakerState
  failures: number
  firstFailureAt: number
  openedAt: number | null
  retryAt: number | null
  /** A half-open probe is in flight: everyone else still fails fast. */
  probing: boolean
  lastError: string | null
}

export class CircuitBreakers {
  readonly #opts: BreakerOptions
  /** Client id -> breaker; Map order is the LRU order. */
  readonly #breakers = new Map<string, Breaker>()
  #opened = 0

  constructor (options: BreakerOptions) {
    this.#opts = options
  }

  /** Times any breaker opened (or reopened after a failed probe). */
  get openedTotal (): number {
    return this.#opened
  }

  /**
   * Whether an operation on this client may go ahead. An open breaker whose time is up lets
   * exactly one operation through as the probe; the caller must call release() when it ends.
   */
  admit (id: string, now = Date.now()): Admission {
    const b = this.#breakers.get(id)
    if (b === undefined || b.state === 'closed') return { ok: true, probe: false }
    if (b.state === 'open' && b.retryAt !== null && now >= b.retryAt) {
      b.state = 'half-open'
      b.probing = true
      return { ok: true, probe: true }
    }
    if (b.state === 'half-open' && !b.probing) {
      b.probing = true
      return { ok: true, probe: true }
    }
    const retryAt = b.state === 'open' && b.retryAt !== null ? b.retryAt : now
    const last = b.lastError !== null ? ` (last failure: ${b.lastError})` : ''
    const when = b.state === 'half-open'
      ? 'a probe is under way; calls go through again once it succeeds'
      : `it will be tried again after ${new Date(retryAt).toISOString()}`
    return { ok: false, retryAt, message: `The MCP server is unavailable: its circuit breaker opened after ${b.failures} consecutive failures${last}; ${when}` }
  }

  /** The probe admitted for `id` ended without a verdict (cancelled, a tool timeout, served from cache): the next operation probes. */
  release (id: string): void {
    const b = this.#breakers.get(id)
    if (b !== undefined && b.state === 'half-open') b.probing = false
  }

  /** The server answered: the breaker closes and the run of failures ends. */
  success (id: string): void {
    const b = this.#breakers.get(id)
    if (b === undefined) return
    // A closed breaker without failures carries nothing worth remembering.
    this.#breakers.delete(id)
  }

  /** A transport, connect or protocol failure. */
  failure (id: string, key: string, message: string, now = Date.now()): void {
    let b = this.#breakers.get(id)
    if (b === undefined) {
      b = { key, state: 'closed', failures: 0, firstFailureAt: now, openedAt: null, retryAt: null, probing: false, lastError: null }
    }
    this.#breakers.delete(id)
    this.#breakers.set(id, b)
    this.#evict()
    b.lastError = message.slice(0, 300)
    if (b.state === 'open') return // an operation admitted before it opened: nothing new
    if (b.state === 'half-open') {
      b.failures++
      this.#open(b, now)
      return
    }
    if (b.failures === 0 || now - b.firstFailureAt > this.#opts.windowMs) {
      b.failures = 1
      b.firstFailureAt = now
    } else {
      b.failures++
    }
    if (b.failures >= this.#opts.failures) this.#open(b, now)
  }

  /** Forgets the breakers whose client key (and id) match: the server changed in the registry. */
  reset (match: (key: string, id: string) => boolean): void {
    for (const [id, b] of this.#breakers) if (match(b.key, id)) this.#breakers.delete(id)
  }

  /** Whether calls fail fast now (open, not yet due for a probe). */
  isOpen (id: string, now = Date.now()): boolean {
    const b = this.#breakers.get(id)
    return b !== undefined && b.state === 'open' && (b.retryAt === null || now < b.retryAt)
  }

  /** Every breaker that is open, half-open or counting failures. */
  snapshot (): BreakerSnapshot[] {
    return [...this.#breakers.values()].map((b) => ({
      key: b.key,
      state: b.state,
      consecutiveFailures: b.failures,
      openedAt: b.openedAt,
      retryAt: b.state === 'open' ? b.retryAt : null,
      lastError: b.lastError
    }))
  }

  /** How many breakers are in each non-closed state. */
  counts (): { open: number, halfOpen: number } {
    let open = 0
    let halfOpen = 0
    for (const b of this.#breakers.values()) {
      if (b.state === 'open') open++
      else if (b.state === 'half-open') halfOpen++
    }
    return { open, halfOpen }
  }

  #open (b: Breaker, now: number): void {
    b.state = 'open'
    b.probing = false
    b.openedAt = now
    b.retryAt = now + this.#opts.openMs
    this.#opened++
  }

  #evict (): void {
    while (this.#breakers.size > this.#opts.maxEntries) {
      // Forget closed ones first: an open breaker protects a server that is down.
      let victim: string | undefined
      for (const [id, b] of this.#breakers) {
        if (b.state === 'closed') { victim = id; break }
      }
      this.#breakers.delete(victim ?? (this.#breakers.keys().next().value as string))
    }
  }
}
