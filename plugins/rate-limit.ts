import { once } from 'node:events'
import { setTimeout as delay } from 'node:timers/promises'
import fp from 'fastify-plugin'
import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import { HttpError } from '../src/errors.js'
import { isValidId } from '../src/naming/names.js'
import { quitWithTimeout } from '../src/registry/redis-quit-with-timeout.js'
import { isPublicRoute } from './auth.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** In-flight invocations per tenant bucket on this instance (for tests and metrics). */
    invocationsInFlight: ReadonlyMap<string, number>
    /** Errors of the limiter's Redis connection so far (metrics); 0 without REDIS_URL. */
    rateLimitRedisErrors: () => number
  }
  interface FastifyRequest {
    /** The rate-limit bucket of this request (a tenant, an admin key, or an IP). */
    tenantBucket: string | undefined
  }
}

export interface RateLimitPluginOptions {
  /** Requests per minute per bucket (RATE_LIMIT_PER_MINUTE). */
  perMinute: number
  /** Concurrent invocations per bucket on this instance (MAX_CONCURRENT_PER_TENANT). */
  maxConcurrent: number
  /** How many calls of one batch run at once (BATCH_CONCURRENCY): a batch holds that many slots at most. */
  batchConcurrency: number
  /** Shared counters in Redis (several instances, one limit); unset = per-instance memory. */
  redisUrl?: string | undefined
  redisKeyPrefix: string
}

// POST /mcp carries tools/call: it counts like /invoke (GET /mcp is a long-lived notification stream and does not).
const INVOKE_ROUTES = new Set(['/invoke', '/invoke/batch', '/mcp'])

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
    const now = Date.now()
    let window = this.#windows.get(key)
    if (window === undefined || window.resetAt <= now) {
      this.#windows.delete(key)
      if (this.#windows.size >= MEMORY_BUCKETS) this.#evict(now)
      window = { count: 0, resetAt: now + timeWindow }
      this.#windows.set(key, window)
    }
    window.count++
    // A copy: the caller reads it after an await, when later requests have counted too.
    callback(null, { current: window.count, ttl: window.resetAt - now })
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

/**
 * Per-tenant request rate (@fastify/rate-limit, in Redis when REDIS_URL is set so every
 * instance shares one limit) and a per-tenant cap on concurrent invocations (this instance).
 * Both answer 429 GW_RATE_LIMITED with Retry-After. Public routes are not limited.
 */
export default fp(async function rateLimitPlugin (app: FastifyInstance, opts: RateLimitPluginOptions) {
  app.decorateRequest('tenantBucket', undefined)

  let redis: Redis | undefined
  let redisErrors = 0
  app.decorate('rateLimitRedisErrors', () => redisErrors)
  if (opts.redisUrl !== undefined) {
    redis = new Redis(opts.redisUrl, {
      // A down or stalled Redis must not hold requests: commands fail fast and the limiter
      // lets the request through (skipOnError) rather than turning an outage into 500s.
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      commandTimeout: 1000,
      connectTimeout: 2000
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
    app.addHook('onClose', async () => { await quitWithTimeout(client, 2000) })
    // Give Redis a bounded moment to connect, so the first requests are counted; a Redis that
    // is down at start-up is not fatal (requests go unlimited until it is back).
    const ready = await Promise.race([
      once(client, 'ready').then(() => true, () => false),
      delay(2000, false, { ref: false })
    ])
    if (!ready) app.log.warn('rate-limit Redis not reachable at start-up; requests are not rate limited until it is')
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
    allowList: (request) => isPublicRoute(request),
    skipOnError: true,
    ...(redis !== undefined ? { redis, nameSpace: `${opts.redisKeyPrefix}rl:` } : { store: MemoryWindowStore as never }),
    errorResponseBuilder: (_request, context) => new HttpError('GW_RATE_LIMITED', `Rate limit of ${context.max} requests per minute exceeded; retry in ${context.after}`)
  })

  // Concurrent invocations, per bucket. In memory on purpose: an in-flight count kept in Redis
  // would leak slots forever when an instance dies mid-call.
  const inFlight = new Map<string, number>()
  app.decorate('invocationsInFlight', inFlight)
  const held = new WeakMap<FastifyRequest, { bucket: string, slots: number }>()
  const aborted = new WeakSet<FastifyRequest>()

  const release = (request: FastifyRequest): void => {
    const hold = held.get(request)
    if (hold === undefined) return
    held.delete(request)
    const left = (inFlight.get(hold.bucket) ?? 0) - hold.slots
    if (left > 0) inFlight.set(hold.bucket, left)
    else inFlight.delete(hold.bucket)
  }

  app.addHook('preHandler', async (request, reply) => {
    if (request.method !== 'POST' || !INVOKE_ROUTES.has(request.routeOptions.url ?? '')) return
    // A client that left while the body was read gets no slot: no onResponse would free it.
    if (aborted.has(request)) throw new HttpError('GW_BAD_REQUEST', 'Client disconnected')
    const bucket = request.tenantBucket ?? bucketOf(request)
    // A batch holds as many slots as calls it can run at once (BATCH_CONCURRENCY), capped at
    // the limit itself so that a big batch always fits when the tenant is otherwise idle.
    const calls = (request.body as { calls?: unknown } | undefined)?.calls
    const slots = Array.isArray(calls) ? Math.max(1, Math.min(calls.length, opts.batchConcurrency, opts.maxConcurrent)) : 1
    const current = inFlight.get(bucket) ?? 0
    if (current + slots > opts.maxConcurrent) {
      reply.header('retry-after', '1')
      throw new HttpError('GW_RATE_LIMITED', `Too many concurrent invocations for this tenant (at most ${opts.maxConcurrent}); retry in 1 second`)
    }
    inFlight.set(bucket, current + slots)
    held.set(request, { bucket, slots })
    // onResponse does not run when the client left after sending its body (the response never
    // finishes, and onRequestAbort only covers requests cut off mid-body); the response's
    // 'close' event fires in every case. The tool sees the same disconnect (abortOnClientGone).
    reply.raw.once('close', () => { release(request) })
  })
  // Released once, whichever comes first: the response finished, or the client went away.
  app.addHook('onResponse', async (request) => { release(request) })
  app.addHook('onRequestAbort', async (request) => {
    aborted.add(request)
    release(request)
  })
}, { name: 'gateway-rate-limit', dependencies: ['gateway-auth'] })
