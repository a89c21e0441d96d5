import type { RedisClient } from '../redis/index.js'

/** A fixed window after a count: what was counted in it so far, and ms until it resets. */
export interface WindowCount {
  current: number
  ttl: number
}

/**
 * Fixed-window counters per key: RATE_LIMIT_PER_MINUTE's windows (docs/ARCHITECTURE.md#limits),
 * one in this instance's memory, or one in Redis that every instance counts in. One interface,
 * two stores, as fastify-rate-limit keeps its LocalStore and RedisStore apart from its hooks.
 *
 * The memory store answers at once, not with a promise: the rate-limit hook runs on every
 * request and stays synchronous when nothing is in Redis (bench row 1.4).
 */
export interface WindowCounter {
  /**
   * Adds `n` to `key`'s current window (a new one of `windowMs` starts when the last has ended)
   * and returns the window after the count. The Redis store resolves to undefined when Redis
   * fails: the caller decides what an outage means (the rate limit lets requests through).
   */
  add: (key: string, n: number, windowMs: number) => WindowCount | Promise<WindowCount | undefined>
}

/** Most keys the memory store keeps; beyond it expired windows, then the oldest, are dropped. */
const MEMORY_KEYS = 50_000

/**
 * Windows in memory (no Redis: one instance). Each count returns a copy of its window: requests
 * of one burst that interleave each see their own count, so exactly the first `max` of them pass.
 */
export class MemoryWindowCounter implements WindowCounter {
  readonly #windows = new Map<string, { count: number, resetAt: number }>()
  readonly #maxKeys: number

  constructor (opts: { maxKeys?: number } = {}) {
    this.#maxKeys = opts.maxKeys ?? MEMORY_KEYS
  }

  /** Keys held now (expired windows included until they are dropped). */
  get size (): number {
    return this.#windows.size
  }

  add (key: string, n: number, windowMs: number): WindowCount {
    const now = Date.now()
    let window = this.#windows.get(key)
    if (window === undefined || window.resetAt <= now) {
      this.#windows.delete(key)
      if (this.#windows.size >= this.#maxKeys) this.#evict(now)
      window = { count: 0, resetAt: now + windowMs }
      this.#windows.set(key, window)
    }
    window.count += n
    // A copy: the caller reads it after an await, when later requests have counted too.
    return { current: window.count, ttl: window.resetAt - now }
  }

  #evict (now: number): void {
    for (const [key, w] of this.#windows) if (w.resetAt <= now) this.#windows.delete(key)
    // Insertion order is window-start order: the first entries are the oldest windows.
    for (const key of this.#windows.keys()) {
      if (this.#windows.size < this.#maxKeys) break
      this.#windows.delete(key)
    }
  }
}

/** Adds `n` to a Redis window (the key expires with its window, set when the window starts). */
const INCR_BY_LUA = `
local current = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {current, ttl}
`

export interface RedisWindowCounterOptions {
  redis: RedisClient
  /** REDIS_KEY_PREFIX: a window is the key `{prefix}rl:{key}` (one key per script: Redis Cluster too). */
  keyPrefix: string
  /** Called with each failed count (the limiter's error metric). */
  onError?: (err: unknown) => void
}

/** Windows in Redis, shared by every instance on it: one script per count, no MULTI. */
export class RedisWindowCounter implements WindowCounter {
  readonly #redis: RedisClient
  readonly #prefix: string
  readonly #onError: (err: unknown) => void

  constructor (opts: RedisWindowCounterOptions) {
    this.#redis = opts.redis
    this.#prefix = `${opts.keyPrefix}rl:`
    this.#onError = opts.onError ?? (() => {})
  }

  async add (key: string, n: number, windowMs: number): Promise<WindowCount | undefined> {
    try {
      const [current, ttl] = await this.#redis.eval(INCR_BY_LUA, 1, `${this.#prefix}${key}`, n, windowMs) as [number, number]
      return { current, ttl }
    } catch (err) {
      this.#onError(err)
      return undefined
    }
  }
}
