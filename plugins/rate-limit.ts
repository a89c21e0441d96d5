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

const INVOKE_ROUTES = new Set(['/invoke', '/invoke/batch'])

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
      // Reconnect loops emit an error per attempt; one line a minute is enough.
      if (Date.now() - lastLogged > 60_000) {
        lastLogged = Date.now()
        app.log.warn({ err: { message: err.message } }, 'rate-limit Redis unavailable; requests are not rate limited until it is back')
      }
    })
    const client = redis
    app.addHook('onClose', async () => { await quitWithTimeout(client, 2000) })
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
    ...(redis !== undefined ? { redis, nameSpace: `${opts.redisKeyPrefix}rl:` } : {}),
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
  })
  // Released once, whichever comes first: the response finished, or the client went away.
  app.addHook('onResponse', async (request) => { release(request) })
  app.addHook('onRequestAbort', async (request) => {
    aborted.add(request)
    release(request)
  })
}, { name: 'gateway-rate-limit', dependencies: ['gateway-auth'] })
