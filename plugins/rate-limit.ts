import { once } from 'node:events'
import { setTimeout as delay } from 'node:timers/promises'
import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError } from '../src/errors.js'
import { isValidId } from '../src/naming/names.js'
import { RedisSemaphore, newInstanceId } from '../src/cluster/index.js'
import type { SemaphoreHold } from '../src/cluster/index.js'
import { createRedisClient, quitWithTimeout } from '../src/redis/index.js'
import type { RedisClient, RedisTarget } from '../src/redis/index.js'
import type { CallLimits } from '../src/mcp-server/budget.js'
import { isClusterRoute, isPublicRoute, rulesOf } from './route-config.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** In-flight invocations per tenant bucket on this instance (for tests and metrics; with Redis the cap counts every instance's). */
    invocationsInFlight: ReadonlyMap<string, number>
    /** Errors of the limiter's Redis connection so far, refused commands included (metrics); 0 without Redis. */
    rateLimitRedisErrors: () => number
  }
  interface FastifyRequest {
    /** The rate-limit bucket of this request (a tenant, an admin key, or an IP). */
    tenantBucket: string | undefined
    /**
     * For POST /mcp: how many of its tools/call may run this minute and how many at once (the
     * slots it holds). A JSON-RPC batch counts each call; the endpoint enforces both.
     */
    callBudget: CallLimits | undefined
  }
}

export interface RateLimitPluginOptions {
  /** Requests per minute per bucket (RATE_LIMIT_PER_MINUTE). */
  perMinute: number
  /** Concurrent invocations per bucket (MAX_CONCURRENT_PER_TENANT): across instances with Redis, else on this one. */
  maxConcurrent: number
  /** How many calls of one batch run at once (BATCH_CONCURRENCY): a batch holds that many slots at most. */
  batchConcurrency: number
  /** Shared counters and concurrency slots in Redis or a Redis Cluster (several instances, one limit); unset = per-instance memory. */
  redis?: RedisTarget | undefined
  redisKeyPrefix: string
  /** Names this instance's concurrency slots in Redis. Default: a new instance id. */
  instanceId?: string
  /** How long a concurrency slot outlives a crashed instance (renewed every third of it). Default 15000. */
  concurrencyLeaseMs?: number
}

/** Most buckets kept in memory; beyond it expired windows, then the oldest, are dropped. */
const MEMORY_BUCKETS = 50_000

/**
 * Fixed one-minute windows in memory (no REDIS_URL). Replaces the plugin's LocalStore, which
 * hands every request the same mutable counter object: requests of one burst that interleave
 * all read the final count and are all refused, even the first `max` of them.
 */
class MemoryWindowStore {
  readonly #windows = new Map<string, { count: number, resetAt: number }>()

  incr (key: string, callback: (error: Error | null, result?: { current: number, ttl: number }) => void, timeWindow: number): void {
    callback(null, this.incrBy(key, 1, timeWindow))
  }

  /** Counts `n` at once (the calls of a batch beyond the request itself); returns a copy of the window. */
  incrBy (key: string, n: number, timeWindow: number): { current: number, ttl: number } {
    const now = Date.now()
    let window = this.#windows.get(key)
    if (window === undefined || window.resetAt <= now) {
      this.#windows.delete(key)
      if (this.#windows.size >= MEMORY_BUCKETS) this.#evict(now)
      window = { count: 0, resetAt: now + timeWindow }
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
      if (this.#windows.size < MEMORY_BUCKETS) break
      this.#windows.delete(key)
    }
  }

  child (): MemoryWindowStore {
    // Routes share the one global limit (no per-route config), so children share the windows.
    return this
  }
}

function requestedUserId (request: FastifyRequest): string | undefined {
  for (const source of [request.params, request.query, request.body]) {
    if (source !== null && typeof source === 'object') {
      const value = (source as Record<string, unknown>).userId
      if (typeof value === 'string' && isValidId(value)) return value
    }
  }
  return undefined
}

/**
 * The bucket a request counts against: a tenant key's own userId; else (admin or open mode)
 * the tenant the request names, so an orchestrator acting for many tenants is limited per
 * tenant; else the admin key (by its non-reversible id) or, in open mode, the client IP.
 */
export function bucketOf (request: FastifyRequest): string {
  if (request.caller?.userId !== undefined) return `t:${request.caller.userId}`
  const named = requestedUserId(request)
  if (named !== undefined) return `t:${named}`
  if (request.apiKeyId !== undefined) return `k:${request.apiKeyId}`
  return `ip:${request.ip}`
}

/** How many tools/call a POST /mcp body carries (one message or a JSON-RPC batch). */
export function mcpToolCalls (body: unknown): number {
  const messages = Array.isArray(body) ? body : [body]
  let n = 0
  for (const m of messages) {
    if (m !== null && typeof m === 'object' && (m as { method?: unknown }).method === 'tools/call') n++
  }
  return n
}

/** Adds `n` to a Redis window the way the plugin's own script counts (the key expires with its window). */
const INCR_BY_LUA = `
local current = redis.call('INCRBY', KEYS[1], ARGV[1])
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  ttl = tonumber(ARGV[2])
end
return {current, ttl}
`

/**
 * Per-tenant request rate (@fastify/rate-limit, in Redis when REDIS_URL is set so every
 * instance shares one limit) and a per-tenant cap on concurrent invocations (this instance).
 * Both answer 429 GW_RATE_LIMITED with Retry-After. Public routes are not limited.
 */
export default fp(async function rateLimitPlugin (app: FastifyInstance, opts: RateLimitPluginOptions) {
  app.decorateRequest('tenantBucket', undefined)
  app.decorateRequest('callBudget', undefined)

  let redis: RedisClient | undefined
  let semaphore: RedisSemaphore | undefined
  let redisErrors = 0
  let lastSemaphoreLog = 0
  app.decorate('rateLimitRedisErrors', () => redisErrors)
  if (opts.redis !== undefined) {
    // A down or stalled Redis must not hold requests: commands fail fast and the limiter lets
    // the request through (skipOnError) rather than turning an outage into 500s. The plugin's
    // RedisStore works on a Redis Cluster too: one key per script (defineCommand), no MULTI.
    redis = createRedisClient(opts.redis, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeoutMs: 1000,
      connectTimeoutMs: 2000
    })
    let lastLogged = 0
    redis.on('error', (err: Error) => {
      redisErrors++
      // Reconnect loops emit an error per attempt; one line a minute is enough.
      if (Date.now() - lastLogged > 60_000) {
        lastLogged = Date.now()
        app.log.warn({ err: { message: err.message } }, 'rate-limit Redis unavailable; requests are not rate limited until it is back')
      }
    })
    const client = redis
    semaphore = new RedisSemaphore({ redis: client, keyPrefix: opts.redisKeyPrefix, instanceId: opts.instanceId ?? newInstanceId(), leaseMs: opts.concurrencyLeaseMs ?? 15_000 })
    const sem = semaphore
    app.addHook('onClose', async () => {
      sem.close()
      await quitWithTimeout(client, 2000)
    })
    // Give Redis a bounded moment to connect, so the first requests are counted; a Redis that
    // is down at start-up is not fatal (requests go unlimited until it is back).
    const ready = await Promise.race([
      once(client, 'ready').then(() => true, () => false),
      delay(2000, false, { ref: false })
    ])
    if (!ready) app.log.warn('rate-limit Redis not reachable at start-up; requests are not rate limited until it is')
  }

  // One store instance the batch counting below can reach too (the plugin constructs its store
  // with `new`; a function returning an object makes `new` return that object).
  const memoryStore = new MemoryWindowStore()
  function sharedMemoryStore (): MemoryWindowStore { return memoryStore }
  const nameSpace = `${opts.redisKeyPrefix}rl:`

  /**
   * Counts `n` more requests in `bucket`'s current window (the plugin counted the request itself
   * as one). Returns the window after them (count, ms left), or undefined when Redis fails (like the plugin's
   * skipOnError: an outage does not turn into refusals).
   */
  const countMore = async (bucket: string, n: number): Promise<{ current: number, ttl: number } | undefined> => {
    if (n <= 0) return undefined
    if (redis === undefined) return memoryStore.incrBy(bucket, n, 60_000)
    try {
      const [current, ttl] = await redis.eval(INCR_BY_LUA, 1, `${nameSpace}${bucket}`, n, 60_000) as [number, number]
      return { current, ttl }
    } catch {
      return undefined
    }
  }

  await app.register(rateLimit, {
    global: true,
    max: opts.perMinute,
    timeWindow: 60_000,
    // preValidation: the caller is known (onRequest) and the body is parsed, so an admin call
    // for a tenant is counted for that tenant. Unauthenticated requests were refused earlier.
    hook: 'preValidation',
    keyGenerator: (request) => {
      request.tenantBucket = bucketOf(request)
      return request.tenantBucket
    },
    allowList: (request) => isPublicRoute(request) || isClusterRoute(request),
    skipOnError: true,
    ...(redis !== undefined ? { redis, nameSpace } : { store: sharedMemoryStore as never }),
    errorResponseBuilder: (_request, context) => new HttpError('GW_RATE_LIMITED', `Rate limit of ${context.max} requests per minute exceeded; retry in ${context.after}`)
  })

  // Concurrent invocations, per bucket. With Redis, slots of a semaphore every instance shares:
  // leases (a ZSET member per slot, scored by expiry), so an instance that dies mid-call does
  // not leak them: they come back after the lease. This instance's count is kept here too.
  const inFlight = new Map<string, number>()
  app.decorate('invocationsInFlight', inFlight)
  const held = new WeakMap<FastifyRequest, { bucket: string, slots: number, shared?: SemaphoreHold }>()
  const aborted = new WeakSet<FastifyRequest>()

  const release = (request: FastifyRequest): void => {
    const hold = held.get(request)
    if (hold === undefined) return
    held.delete(request)
    hold.shared?.release().catch(() => { redisErrors++ })
    const left = (inFlight.get(hold.bucket) ?? 0) - hold.slots
    if (left > 0) inFlight.set(hold.bucket, left)
    else inFlight.delete(hold.bucket)
  }

  app.addHook('preHandler', async (request, reply) => {
    // Routes that run tools say so (config.invoke): POST /invoke, /invoke/batch and /mcp. GET /mcp,
    // a long-lived notification stream, does not.
    const invoke = rulesOf(request).invoke
    if (invoke === undefined || invoke === false) return
    // A client that left while the body was read gets no slot: no onResponse would free it.
    if (aborted.has(request)) throw new HttpError('GW_BAD_REQUEST', 'Client disconnected')
    const bucket = request.tenantBucket ?? bucketOf(request)
    // A batch holds as many slots as calls it can run at once (BATCH_CONCURRENCY), capped at
    // the limit itself so that a big batch always fits when the tenant is otherwise idle. A
    // JSON-RPC batch on /mcp is a batch too: each tools/call in it counts (the endpoint runs
    // at most `slots` of them at once, see src/mcp-server/budget.ts).
    const isMcp = invoke === 'json-rpc'
    const calls = (request.body as { calls?: unknown } | undefined)?.calls
    const count = isMcp ? mcpToolCalls(request.body) : Array.isArray(calls) ? calls.length : 1
    const slots = count > 1 ? Math.max(1, Math.min(count, opts.batchConcurrency, opts.maxConcurrent)) : 1

    // Per minute, each call of a batch counts (the plugin counted the request as one). /invoke/batch
    // cannot answer part of a batch, so a batch that does not fit is refused whole; /mcp answers
    // the calls over the limit with a JSON-RPC error each.
    let allowed = count
    if (count > 1) {
      const after = await countMore(bucket, count - 1)
      if (after !== undefined) allowed = Math.max(0, Math.min(count, opts.perMinute - (after.current - count)))
      if (after !== undefined && allowed < count && !isMcp) {
        reply.header('retry-after', String(Math.max(1, Math.ceil(after.ttl / 1000))))
        throw new HttpError('GW_RATE_LIMITED', `Rate limit of ${opts.perMinute} requests per minute exceeded: this batch of ${count} calls does not fit in what is left of the minute; retry later or send fewer calls`)
      }
    }
    if (isMcp) request.callBudget = { calls: allowed, concurrency: slots }

    const refuse = (): never => {
      reply.header('retry-after', '1')
      throw new HttpError('GW_RATE_LIMITED', `Too many concurrent invocations for this tenant (at most ${opts.maxConcurrent}); retry in 1 second`)
    }
    // Cluster-wide when Redis answers; this instance's own cap when it does not (fail open to the local limit).
    let shared: SemaphoreHold | undefined
    let sharedAnswered = false
    if (semaphore !== undefined) {
      try {
        const got = await semaphore.acquire(bucket, slots, opts.maxConcurrent)
        sharedAnswered = true
        if (!got.ok) refuse()
        else shared = got.hold
      } catch (err) {
        if (err instanceof HttpError) throw err
        redisErrors++
        if (Date.now() - lastSemaphoreLog > 60_000) {
          lastSemaphoreLog = Date.now()
          app.log.warn({ err: { message: (err as Error).message } }, 'the cluster-wide concurrency cap is unavailable; this instance applies MAX_CONCURRENT_PER_TENANT on its own until Redis answers')
        }
      }
    }
    // The client may have left during the round trip: its 'close' has fired already, so nothing would free the slots.
    if (aborted.has(request) || reply.raw.destroyed) {
      shared?.release().catch(() => { redisErrors++ })
      throw new HttpError('GW_BAD_REQUEST', 'Client disconnected')
    }
    if (!sharedAnswered && (inFlight.get(bucket) ?? 0) + slots > opts.maxConcurrent) refuse()
    inFlight.set(bucket, (inFlight.get(bucket) ?? 0) + slots)
    held.set(request, { bucket, slots, ...(shared !== undefined ? { shared } : {}) })
    // onResponse does not run when the client left after sending its body (the response never
    // finishes, and onRequestAbort only covers requests cut off mid-body); the response's
    // 'close' event fires in every case. The tool sees the same disconnect (abortOnClientGone).
    reply.raw.once('close', () => { release(request) })
  })
  // Released once, whichever comes first: the response finished, or the client went away.
  app.addHook('onResponse', (request, _reply, done) => {
    release(request)
    done()
  })
  app.addHook('onRequestAbort', (request, done) => {
    aborted.add(request)
    release(request)
    done()
  })
}, { name: 'gateway-rate-limit', dependencies: ['gateway-auth'] })
