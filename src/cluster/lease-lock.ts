import { createHash, randomBytes } from 'node:crypto'
import { setTimeout as sleep } from 'node:timers/promises'
import type { RedisClient } from '../redis/index.js'
import { taggedKey } from '../redis/index.js'
import { KeyedMutex } from './keyed-mutex.js'
import type { LeaseContext, WriteLock } from './write-lock.js'
import type { RedisScope } from './scope.js'

/** The lock could not be taken because its store (Redis) did not answer: nothing ran. */
export class LockUnavailableError extends Error {
  constructor (message: string, options?: { cause?: unknown }) {
    super(message, options)
    this.name = 'LockUnavailableError'
  }
}

/** The wait for the lock ended because the caller's signal aborted: nothing ran. */
export class LockWaitAbortedError extends Error {
  constructor () {
    super('The call was cancelled while it waited for the workspace write lock')
    this.name = 'LockWaitAbortedError'
  }
}

/** Why a lease's signal aborted. */
export class LeaseLostError extends Error {
  constructor (message: string) {
    super(message)
    this.name = 'LeaseLostError'
  }
}

// SET NX PX and INCR of the fencing counter in one step: a holder and its fence are never apart.
// Refused: the lease's remaining ms (a hint for the wait).
const ACQUIRE_LUA = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1])}
`
const RENEW_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`
const RELEASE_LUA = `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`

/**
 * `p`, or a rejection after `ms`: a Redis Cluster queues commands while it has no connection
 * (no command timeout applies there), and neither a lock nor a release may wait forever.
 */
async function bounded<T> (p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  try {
    return await Promise.race([p, timeout])
  } finally {
    clearTimeout(timer)
  }
}

export interface LeaseLockOptions {
  /** WORKSPACE_LOCK_LEASE_MS: how long a lease lives without renewal (renewed every third of it). */
  leaseMs: number
  /** First poll interval while another instance holds the lease (doubles, jittered). Default 25. */
  minPollMs?: number
  /** Longest poll interval. Default min(500, leaseMs / 3). */
  maxPollMs?: number
  /** Bound on one Redis command of the lock (acquire, renew, release). Default min(2000, leaseMs / 3). */
  commandTimeoutMs?: number
}

/**
 * A write lock shared by every gateway instance on one Redis (or Redis Cluster).
 *
 * Same instance: tasks of one key queue in process first (no Redis round trips between them,
 * fair order). Then a Redis lease: `SET lease token NX PX leaseMs` together with `INCR fence`
 * (both keys under one hash tag derived from a hash of the key, so one Cluster slot), renewed
 * every leaseMs/3 by compare-token, released by compare-and-delete. An instance that crashes
 * stops renewing: its lease expires and the next writer proceeds after at most leaseMs.
 * Redis unreachable while acquiring: the lock fails closed (LockUnavailableError), nothing runs.
 *
 * Fencing, honestly: the fence is strictly increasing per key (the counter key never expires
 * and is only ever INCRed), and each task gets it with a signal that aborts when the lease is
 * lost: a renewal finds another token, or no renewal succeeded before the lease's local
 * deadline (measured from before the last successful renewal was sent, so it is never later
 * than Redis' own expiry, barring clock jumps on the Redis host). What it prevents: a writer
 * that knows it lost the lease (paused past its lease, partitioned from Redis) starting or
 * committing a write after the next holder started. The file tools check the signal right before
 * they commit. What it does not prevent: the workspace's filesystem cannot check a fence, so a
 * holder stalled (GC pause, overloaded event loop) between its last check of the signal and the
 * write system call, or whose lease expired less than the detection latency ago, can still land
 * one write after the next holder began. The fence is handed to the task so that a store able to
 * compare it could refuse a stale writer; nothing in the gateway compares it today. The window is
 * bounded by the stall; leases of seconds make it rare.
 */
export class LeaseLock implements WriteLock {
  readonly #redis: RedisClient
  readonly #prefix: string
  readonly #instanceId: string
  readonly #leaseMs: number
  readonly #minPollMs: number
  readonly #maxPollMs: number
  readonly #commandMs: number
  readonly #local = new KeyedMutex()

  constructor (coordination: RedisScope, opts: LeaseLockOptions) {
    if (!(opts.leaseMs >= 30)) throw new Error(`A lease of ${opts.leaseMs} ms is too short`)
    this.#redis = coordination.redis
    this.#prefix = coordination.keyPrefix
    this.#instanceId = coordination.instanceId
    this.#leaseMs = Math.floor(opts.leaseMs)
    this.#minPollMs = opts.minPollMs ?? 25
    this.#maxPollMs = opts.maxPollMs ?? Math.max(this.#minPollMs, Math.min(500, Math.floor(this.#leaseMs / 3)))
    this.#commandMs = opts.commandTimeoutMs ?? Math.max(10, Math.min(2000, Math.floor(this.#leaseMs / 3)))
  }

  /** The Redis keys of `key`'s lease and fencing counter (for tests and docs). */
  keysOf (key: string): { lease: string, fence: string } {
    // A hash: a workspace key holds a tenant and a host path (any characters, braces included).
    const scope = `wl:${createHash('sha256').update(key).digest('hex').slice(0, 32)}`
    return { lease: taggedKey(this.#prefix, scope, 'lease'), fence: taggedKey(this.#prefix, scope, 'fence') }
  }

  async run<T> (key: string, task: (lease?: LeaseContext) => Promise<T>, opts: { signal?: AbortSignal | undefined } = {}): Promise<T> {
    // Same-key tasks of this instance queue here first: one of them at a time asks Redis.
    return await this.#local.run(key, async () => await this.#runLeased(key, task, opts.signal))
  }

  async #runLeased<T> (key: string, task: (lease?: LeaseContext) => Promise<T>, signal: AbortSignal | undefined): Promise<T> {
    const lease = await this.#acquire(key, signal)
    try {
      return await task({ fence: lease.fence, signal: lease.signal })
    } finally {
      await lease.release()
    }
  }

  async #acquire (key: string, signal: AbortSignal | undefined): Promise<Lease> {
    const keys = this.keysOf(key)
    const token = `${this.#instanceId}:${randomBytes(8).toString('hex')}`
    let wait = this.#minPollMs
    for (;;) {
      if (signal?.aborted === true) throw new LockWaitAbortedError()
      // Taken before the command is sent: the lease cannot end before sentAt + leaseMs on Redis' side.
      const sentAt = performance.now()
      let reply: [number, number]
      try {
        reply = await bounded(this.#redis.eval(ACQUIRE_LUA, 2, keys.lease, keys.fence, token, this.#leaseMs) as Promise<[number, number]>, this.#commandMs)
      } catch (err) {
        throw new LockUnavailableError(`The workspace lock is unavailable (Redis: ${(err as Error)?.message ?? String(err)}); nothing was changed, retry later`, { cause: err })
      }
      if (reply[0] === 1) return new Lease(this.#redis, keys.lease, token, reply[1], this.#leaseMs, sentAt, this.#commandMs)
      // Full jitter over the back-off, never past the holder's remaining time by much.
      const remaining = reply[1] > 0 ? reply[1] : wait
      const pause = Math.max(1, Math.min(remaining + 1, Math.floor(wait / 2 + Math.random() * wait / 2)))
      try {
        await sleep(pause, undefined, signal !== undefined ? { signal } : {})
      } catch {
        throw new LockWaitAbortedError()
      }
      wait = Math.min(this.#maxPollMs, wait * 2)
    }
  }
}

/** One held lease: renews itself until released, aborts its signal when lost. */
class Lease {
  readonly fence: number
  readonly #redis: RedisClient
  readonly #key: string
  readonly #token: string
  readonly #leaseMs: number
  readonly #commandMs: number
  readonly #controller = new AbortController()
  #renewTimer: NodeJS.Timeout | undefined
  #deadlineTimer: NodeJS.Timeout | undefined
  #released = false

  constructor (redis: RedisClient, key: string, token: string, fence: number, leaseMs: number, sentAt: number, commandMs: number) {
    this.#redis = redis
    this.#key = key
    this.#token = token
    this.fence = fence
    this.#leaseMs = leaseMs
    this.#commandMs = commandMs
    this.#confirmed(sentAt)
    this.#scheduleRenew(Math.floor(leaseMs / 3))
  }

  get signal (): AbortSignal {
    return this.#controller.signal
  }

  /** The lease holds until sentAt + leaseMs at least: lost when nothing renews it before then. */
  #confirmed (sentAt: number): void {
    clearTimeout(this.#deadlineTimer)
    const left = Math.max(0, sentAt + this.#leaseMs - performance.now())
    this.#deadlineTimer = setTimeout(() => { this.#lose('The workspace write lease expired before it could be renewed (Redis did not answer)') }, left)
    this.#deadlineTimer.unref()
  }

  #scheduleRenew (ms: number): void {
    if (this.#released || this.#controller.signal.aborted) return
    this.#renewTimer = setTimeout(() => { this.#renew().catch(() => {}) }, ms)
    this.#renewTimer.unref()
  }

  async #renew (): Promise<void> {
    const sentAt = performance.now()
    try {
      const ok = await bounded(this.#redis.eval(RENEW_LUA, 1, this.#key, this.#token, this.#leaseMs) as Promise<number>, this.#commandMs)
      if (this.#released) return
      if (ok !== 1) {
        this.#lose('The workspace write lease was lost: it expired and another writer holds it')
        return
      }
      this.#confirmed(sentAt)
      this.#scheduleRenew(Math.floor(this.#leaseMs / 3))
    } catch {
      // Retried sooner; the deadline timer ends the lease if no retry succeeds in time.
      this.#scheduleRenew(Math.max(10, Math.floor(this.#leaseMs / 10)))
    }
  }

  #lose (why: string): void {
    clearTimeout(this.#renewTimer)
    clearTimeout(this.#deadlineTimer)
    if (!this.#controller.signal.aborted) this.#controller.abort(new LeaseLostError(why))
  }

  /** Stops renewing and deletes the lease if it is still ours. Never rejects: an unreleased lease expires. */
  async release (): Promise<void> {
    if (this.#released) return
    this.#released = true
    clearTimeout(this.#renewTimer)
    clearTimeout(this.#deadlineTimer)
    // Tried after a lost lease too: compare-and-delete cannot remove another holder's lease.
    await bounded(this.#redis.eval(RELEASE_LUA, 1, this.#key, this.#token), this.#commandMs).catch(() => {})
  }
}
