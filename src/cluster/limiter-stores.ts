import { once } from 'node:events'
import { setTimeout as delay } from 'node:timers/promises'
import type { Logger } from '../logger.js'
import { createRedisClient, quitWithTimeout } from '../redis/index.js'
import type { RedisTarget } from '../redis/index.js'
import { RedisSemaphore } from './semaphore.js'
import { MemoryWindowCounter, RedisWindowCounter } from './window-counter.js'
import type { WindowCounter } from './window-counter.js'

/**
 * What the per-tenant limits count in (plugins/rate-limit.ts holds the rules): the per-minute
 * windows, and the cluster-wide concurrency slots when there is Redis.
 */
export interface LimiterStores {
  /** RATE_LIMIT_PER_MINUTE's windows: in Redis when it is configured (one limit for every instance), else in memory. */
  windows: WindowCounter
  /** MAX_CONCURRENT_PER_TENANT across instances; undefined without Redis (each instance counts its own). */
  semaphore: RedisSemaphore | undefined
  /** Errors of the limiter's Redis connection so far, failed commands included (metrics); 0 without Redis. */
  errors: () => number
  /** Counts a failed command the caller saw (a semaphore call). */
  countError: () => void
  close: () => Promise<void>
}

/** One instance's limits, in memory. */
export function memoryLimiterStores (): LimiterStores {
  return { windows: new MemoryWindowCounter(), semaphore: undefined, errors: () => 0, countError: () => {}, close: async () => {} }
}

export interface LimiterStoresOptions {
  /** REDIS_CLUSTER_NODES or REDIS_URL; undefined: memory. */
  target: RedisTarget | undefined
  keyPrefix: string
  /** Names this instance's concurrency slots in Redis. */
  instanceId: string
  /** How long a concurrency slot outlives a crashed instance (renewed every third of it). Default 15000. */
  leaseMs?: number
  logger: Logger
}

/**
 * The limiter's stores, on a Redis connection of their own. Not the coordination connection
 * (createCluster, index.ts): that one queues commands while Redis is away, and a rate limit must not
 * hold requests during an outage. Here commands fail fast (no offline queue, one retry, 1 s),
 * the windows answer undefined and the plugin lets the request through rather than turning an
 * outage into 500s. Both stores work on a Redis Cluster: one key per script, no MULTI.
 */
export async function createLimiterStores (opts: LimiterStoresOptions): Promise<LimiterStores> {
  if (opts.target === undefined) return memoryLimiterStores()
  const redis = createRedisClient(opts.target, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    commandTimeoutMs: 1000,
    connectTimeoutMs: 2000
  })
  let errors = 0
  let lastLogged = 0
  redis.on('error', (err: Error) => {
    errors++
    // Reconnect loops emit an error per attempt; one line a minute is enough.
    if (Date.now() - lastLogged > 60_000) {
      lastLogged = Date.now()
      opts.logger.warn({ err: { message: err.message } }, 'rate-limit Redis unavailable; requests are not rate limited until it is back')
    }
  })
  const semaphore = new RedisSemaphore({ redis, keyPrefix: opts.keyPrefix, instanceId: opts.instanceId, leaseMs: opts.leaseMs ?? 15_000 })
  const stores: LimiterStores = {
    windows: new RedisWindowCounter({ redis, keyPrefix: opts.keyPrefix, onError: () => { errors++ } }),
    semaphore,
    errors: () => errors,
    countError: () => { errors++ },
    close: async () => {
      semaphore.close()
      await quitWithTimeout(redis, 2000)
    }
  }
  // Give Redis a bounded moment to connect, so the first requests are counted; a Redis that is
  // down at start-up is not fatal (requests go unlimited until it is back).
  const ready = await Promise.race([
    once(redis, 'ready').then(() => true, () => false),
    delay(2000, false, { ref: false })
  ])
  if (!ready) opts.logger.warn({}, 'rate-limit Redis not reachable at start-up; requests are not rate limited until it is')
  return stores
}

/**
 * The bucket a call counts against (RATE_LIMIT_PER_MINUTE, MAX_CONCURRENT_PER_TENANT): the tenant
 * it acts for, else the admin key that makes it; undefined for neither (open mode, counted by IP).
 */
export function limitBucket (userId: string | undefined, keyId: string | undefined): string | undefined {
  if (userId !== undefined) return `t:${userId}`
  if (keyId !== undefined) return `k:${keyId}`
  return undefined
}

/**
 * Counts a code-mode script's inner call against its tenant's minute (each counts as a request
 * would); the refusal's message when the minute is spent. A store that does not answer lets it
 * through, as the HTTP limiter does.
 */
export async function admitInnerCall (
  windows: WindowCounter,
  perMinute: number,
  userId: string | undefined,
  keyId: string | undefined
): Promise<string | undefined> {
  const bucket = limitBucket(userId, keyId)
  if (bucket === undefined) return undefined
  const window = await windows.add(bucket, 1, 60_000)
  if (window === undefined || window.current <= perMinute) return undefined
  return `Rate limit of ${perMinute} requests per minute exceeded (each tool call of a script counts); retry in ${Math.max(1, Math.ceil(window.ttl / 1000))} s`
}
