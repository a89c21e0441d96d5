import { createHash, randomBytes } from 'node:crypto'
import type { RedisClient } from '../redis/index.js'
import { taggedKey } from '../redis/index.js'

// One ZSET per bucket: a member per held slot, scored by its expiry in Redis' own clock (TIME,
// so instances' clocks never matter). Expired members (a crashed instance's) are dropped before
// counting. `n` slots are taken together or none. The key itself expires when nobody renews.
const ACQUIRE_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local count = redis.call('ZCARD', KEYS[1])
local n = tonumber(ARGV[2])
if count + n > tonumber(ARGV[1]) then
  return {0, count}
end
for i = 1, n do
  redis.call('ZADD', KEYS[1], now + lease, ARGV[4] .. ':' .. i)
end
redis.call('PEXPIRE', KEYS[1], lease * 2)
return {1, count + n}
`
// Pushes the expiry of the members still there (XX: a member already dropped as expired stays
// gone); returns how many were renewed.
const RENEW_LUA = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call('ZADD', KEYS[1], 'XX', 'CH', now + lease, ARGV[i])
end
if renewed > 0 then redis.call('PEXPIRE', KEYS[1], lease * 2) end
return renewed
`

export interface SemaphoreOptions {
  redis: RedisClient
  /** REDIS_KEY_PREFIX. */
  keyPrefix: string
  /** This instance (members are named after it, so GET of the ZSET shows who holds what). */
  instanceId: string
  /** How long a slot outlives its holder's last renewal (renewed every third of it). Default 15000. */
  leaseMs?: number
}

/** A hold on `slots` of a bucket; release it exactly once when the work ends. */
export interface SemaphoreHold {
  slots: number
  release: () => Promise<void>
}

export type AcquireResult = { ok: true, hold: SemaphoreHold } | { ok: false, held: number }

/**
 * A counting semaphore per bucket shared by every instance on one Redis (or Redis Cluster):
 * MAX_CONCURRENT_PER_TENANT cluster-wide. Slots are leases: one timer renews every slot this
 * instance holds, so slots of an instance that crashed come back after `leaseMs`. A slot whose
 * renewal failed for longer than the lease is dropped by the next acquire, so during a long
 * Redis stall a bucket may briefly run more than its limit (never fewer).
 */
export class RedisSemaphore {
  readonly #redis: RedisClient
  readonly #prefix: string
  readonly #instanceId: string
  readonly #leaseMs: number
  /** Held members by bucket key. */
  readonly #held = new Map<string, Set<string>>()
  #timer: NodeJS.Timeout | undefined
  #renewing = false

  constructor (opts: SemaphoreOptions) {
    this.#redis = opts.redis
    this.#prefix = opts.keyPrefix
    this.#instanceId = opts.instanceId
    this.#leaseMs = Math.floor(opts.leaseMs ?? 15_000)
    if (!(this.#leaseMs >= 30)) throw new Error(`A semaphore lease of ${this.#leaseMs} ms is too short`)
  }

  /** The ZSET of `bucket` (for tests and docs). */
  keyOf (bucket: string): string {
    // A bucket holds a tenant id, a key id or an IP: hashed only when it could break the tag.
    const scope = /^[A-Za-z0-9_.:-]{1,128}$/.test(bucket) ? `sem:${bucket}` : `sem:#${createHash('sha256').update(bucket).digest('hex').slice(0, 32)}`
    return taggedKey(this.#prefix, scope, 'slots')
  }

  /**
   * Takes `n` slots of `bucket` if, with them, at most `limit` are held cluster-wide; otherwise
   * none ({ ok: false, held }). Rejects when Redis fails (the caller decides: fail open or closed).
   */
  async acquire (bucket: string, n: number, limit: number): Promise<AcquireResult> {
    const key = this.keyOf(bucket)
    const id = `${this.#instanceId}:${randomBytes(6).toString('hex')}`
    const [ok, held] = await this.#redis.eval(ACQUIRE_LUA, 1, key, limit, n, this.#leaseMs, id) as [number, number]
    if (ok !== 1) return { ok: false, held }
    const members = Array.from({ length: n }, (_, i) => `${id}:${i + 1}`)
    let set = this.#held.get(key)
    if (set === undefined) this.#held.set(key, set = new Set())
    for (const m of members) set.add(m)
    this.#startTimer()
    let released = false
    return {
      ok: true,
      hold: {
        slots: n,
        release: async () => {
          if (released) return
          released = true
          const s = this.#held.get(key)
          if (s !== undefined) {
            for (const m of members) s.delete(m)
            if (s.size === 0) this.#held.delete(key)
          }
          if (this.#held.size === 0) this.#stopTimer()
          // A failed ZREM is not retried: the members expire after the lease.
          await this.#redis.zrem(key, ...members)
        }
      }
    }
  }

  /** Slots held in `bucket` right now by every instance (expired ones not counted). */
  async held (bucket: string): Promise<number> {
    const key = this.keyOf(bucket)
    const t = await this.#redis.time()
    const now = Number(t[0]) * 1000 + Math.floor(Number(t[1]) / 1000)
    return await this.#redis.zcount(key, `(${now}`, '+inf')
  }

  /** How many slots this instance holds (all buckets). */
  get heldHere (): number {
    let n = 0
    for (const s of this.#held.values()) n += s.size
    return n
  }

  /** Renews every held slot now (the timer calls it every leaseMs/3). Errors are left to the next round. */
  async renew (): Promise<void> {
    if (this.#renewing) return
    this.#renewing = true
    try {
      await Promise.all([...this.#held].map(async ([key, set]) => {
        if (set.size === 0) return
        await this.#redis.eval(RENEW_LUA, 1, key, this.#leaseMs, ...set).catch(() => {})
      }))
    } finally {
      this.#renewing = false
    }
  }

  /** Stops renewing (held slots then expire after the lease). */
  close (): void {
    this.#stopTimer()
    this.#held.clear()
  }

  #startTimer (): void {
    if (this.#timer !== undefined) return
    this.#timer = setInterval(() => { this.renew().catch(() => {}) }, Math.max(10, Math.floor(this.#leaseMs / 3)))
    this.#timer.unref()
  }

  #stopTimer (): void {
    if (this.#timer === undefined) return
    clearInterval(this.#timer)
    this.#timer = undefined
  }
}
