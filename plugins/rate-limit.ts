import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { HttpError } from '../src/errors.js'
import { isValidId } from '../src/naming/names.js'
import { limitBucket, memoryLimiterStores } from '../src/cluster/index.js'
import type { LimiterStores, RedisSemaphore, SemaphoreHold, WindowCount } from '../src/cluster/index.js'
import { countToolCalls, isListenRequest } from '../src/mcp-server/budget.js'
import type { CallLimits } from '../src/mcp-server/budget.js'
import { rulesOf } from './route-config.js'

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
    /** The concurrency slots this request holds until it is released (a property, not a WeakMap entry: this runs per request). */
    concurrencyHold: ConcurrencyHold | undefined
  }
}

interface ConcurrencyHold { bucket: string, slots: number, shared: SemaphoreHold | undefined }

export interface RateLimitPluginOptions {
  /** Requests per minute per bucket (RATE_LIMIT_PER_MINUTE). */
  perMinute: number
  /** Concurrent invocations per bucket (MAX_CONCURRENT_PER_TENANT): across instances with Redis, else on this one. */
  maxConcurrent: number
  /** How many calls of one batch run at once (BATCH_CONCURRENCY): a batch holds that many slots at most. */
  batchConcurrency: number
  /**
   * What the limits count in (src/cluster/limiter-stores.ts, built and closed by createCluster):
   * Redis shared by every instance, or this instance's memory. Default: memory.
   */
  stores?: LimiterStores
}

/** The one window of RATE_LIMIT_PER_MINUTE. */
const MINUTE_MS = 60_000

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
function bucketOf (request: FastifyRequest): string {
  return limitBucket(request.caller?.userId ?? requestedUserId(request), request.apiKeyId) ?? `ip:${request.ip}`
}

/**
 * Per-tenant request rate (fixed one-minute windows, in Redis when REDIS_URL is set so every
 * instance shares one limit) and a per-tenant cap on concurrent invocations (across instances with
 * Redis). Both answer 429 GW_RATE_LIMITED with Retry-After; a counted request gets
 * x-ratelimit-limit, x-ratelimit-remaining and x-ratelimit-reset. Public and instance-to-instance
 * routes are not limited. Callback hooks with a synchronous path when nothing is in Redis: this
 * runs on every request (it replaced @fastify/rate-limit, whose hook cost a few promises per request).
 */
export default fp(async function rateLimitPlugin (app: FastifyInstance, opts: RateLimitPluginOptions) {
  app.decorateRequest('tenantBucket', undefined)
  app.decorateRequest('callBudget', undefined)
  app.decorateRequest('concurrencyHold', undefined)

  const stores = opts.stores ?? memoryLimiterStores()
  const windows = stores.windows
  const semaphore = stores.semaphore
  let lastSemaphoreLog = 0
  app.decorate('rateLimitRedisErrors', stores.errors)
  const perMinute = opts.perMinute

  /** The window's headers on the reply; the 429 to answer when the request is over the limit. */
  const overLimit = (reply: FastifyReply, window: WindowCount | undefined): HttpError | undefined => {
    if (window === undefined) return undefined
    const reset = Math.max(0, Math.ceil(window.ttl / 1000))
    const over = window.current > perMinute
    reply.header('x-ratelimit-limit', perMinute)
    reply.header('x-ratelimit-remaining', over ? 0 : perMinute - window.current)
    reply.header('x-ratelimit-reset', reset)
    if (!over) return undefined
    const retry = Math.max(1, reset)
    reply.header('retry-after', retry)
    return new HttpError('GW_RATE_LIMITED', `Rate limit of ${perMinute} requests per minute exceeded; retry in ${retry} second${retry === 1 ? '' : 's'}`)
  }

  // preValidation: the caller is known (onRequest) and the body is parsed, so an admin call for a
  // tenant is counted for that tenant. Unauthenticated requests were refused earlier; unknown
  // routes (404) and public and instance-to-instance routes are not counted.
  app.addHook('preValidation', (request, reply, done) => {
    const rules = rulesOf(request)
    if (rules.url === undefined || rules.public === true || rules.cluster === true) {
      done()
      return
    }
    const bucket = bucketOf(request)
    request.tenantBucket = bucket
    const window = windows.add(bucket, 1, MINUTE_MS)
    if (window instanceof Promise) window.then((w) => { done(overLimit(reply, w)) }, done)
    else done(overLimit(reply, window))
  })

  // Concurrent invocations, per bucket. With Redis, slots of a semaphore every instance shares:
  // leases (a ZSET member per slot, scored by expiry), so an instance that dies mid-call does
  // not leak them: they come back after the lease. This instance's count is kept here too.
  const inFlight = new Map<string, number>()
  app.decorate('invocationsInFlight', inFlight)
  const aborted = new WeakSet<FastifyRequest>()

  const release = (request: FastifyRequest): void => {
    const hold = request.concurrencyHold
    if (hold === undefined) return
    request.concurrencyHold = undefined
    hold.shared?.release().catch(stores.countError)
    const left = (inFlight.get(hold.bucket) ?? 0) - hold.slots
    if (left > 0) inFlight.set(hold.bucket, left)
    else inFlight.delete(hold.bucket)
  }

  const tooMany = (reply: FastifyReply): HttpError => {
    reply.header('retry-after', '1')
    return new HttpError('GW_RATE_LIMITED', `Too many concurrent invocations for this tenant (at most ${opts.maxConcurrent}); retry in 1 second`)
  }

  /**
   * Takes `slots` of this instance's count (after the cluster-wide semaphore answered, or without
   * one); the error to answer instead, if any. `shared` is the cluster-wide hold, released on refusal.
   */
  const hold = (
    request: FastifyRequest,
    reply: FastifyReply,
    bucket: string,
    slots: number,
    shared: SemaphoreHold | undefined,
    sharedAnswered: boolean
  ): HttpError | undefined => {
    // The client may have left (during a round trip, or while the body was read): its 'close' has
    // fired already, so nothing would free the slots.
    if (aborted.has(request) || reply.raw.destroyed) {
      shared?.release().catch(stores.countError)
      return new HttpError('GW_BAD_REQUEST', 'Client disconnected')
    }
    const now = inFlight.get(bucket) ?? 0
    if (!sharedAnswered && now + slots > opts.maxConcurrent) return tooMany(reply)
    inFlight.set(bucket, now + slots)
    request.concurrencyHold = { bucket, slots, shared }
    // onResponse does not run when the client left after sending its body (the response never
    // finishes, and onRequestAbort only covers requests cut off mid-body); the response's
    // 'close' event fires in every case. The tool sees the same disconnect (abortOnClientGone).
    reply.raw.once('close', () => { release(request) })
    return undefined
  }

  /** A batch, a JSON-RPC message, or any call with Redis: what may need a round trip first. */
  const acquire = async (request: FastifyRequest, reply: FastifyReply, bucket: string, isMcp: boolean, calls: number): Promise<void> => {
    const slots = calls > 1 ? Math.max(1, Math.min(calls, opts.batchConcurrency, opts.maxConcurrent)) : 1
    // Per minute, each call of a batch counts (preValidation counted the request as one). /invoke/batch
    // cannot answer part of a batch, so a batch that does not fit is refused whole; /mcp answers
    // the calls over the limit with a JSON-RPC error each.
    let allowed = calls
    if (calls > 1) {
      const after = await windows.add(bucket, calls - 1, MINUTE_MS)
      if (after !== undefined) allowed = Math.max(0, Math.min(calls, perMinute - (after.current - calls)))
      if (after !== undefined && allowed < calls && !isMcp) {
        reply.header('retry-after', String(Math.max(1, Math.ceil(after.ttl / 1000))))
        throw new HttpError('GW_RATE_LIMITED', `Rate limit of ${perMinute} requests per minute exceeded: this batch of ${calls} calls does not fit in what is left of the minute; retry later or send fewer calls`)
      }
    }
    if (isMcp) request.callBudget = { calls: allowed, concurrency: slots }

    // Cluster-wide when Redis answers; this instance's own cap when it does not (fail open to the local limit).
    let shared: SemaphoreHold | undefined
    let sharedAnswered = false
    if (semaphore !== undefined) {
      let got: Awaited<ReturnType<RedisSemaphore['acquire']>> | undefined
      try {
        got = await semaphore.acquire(bucket, slots, opts.maxConcurrent)
      } catch (err) {
        stores.countError()
        if (Date.now() - lastSemaphoreLog > 60_000) {
          lastSemaphoreLog = Date.now()
          app.log.warn(
            { err: { message: (err as Error).message } },
            'the cluster-wide concurrency cap is unavailable; this instance applies MAX_CONCURRENT_PER_TENANT on its own until Redis answers'
          )
        }
      }
      if (got !== undefined) {
        sharedAnswered = true
        if (!got.ok) throw tooMany(reply)
        shared = got.hold
      }
    }
    const refused = hold(request, reply, bucket, slots, shared, sharedAnswered)
    if (refused !== undefined) throw refused
  }

  app.addHook('preHandler', (request, reply, done) => {
    // Routes that run tools say so (config.invoke): POST /invoke, /invoke/batch and /mcp. GET /mcp,
    // a long-lived notification stream, does not.
    const invoke = rulesOf(request).invoke
    if (invoke === undefined || invoke === false) {
      done()
      return
    }
    // A client that left while the body was read gets no slot: no onResponse would free it.
    if (aborted.has(request)) {
      done(new HttpError('GW_BAD_REQUEST', 'Client disconnected'))
      return
    }
    const bucket = request.tenantBucket ?? bucketOf(request)
    // A batch holds as many slots as calls it can run at once (BATCH_CONCURRENCY), capped at
    // the limit itself so that a big batch always fits when the tenant is otherwise idle. A
    // JSON-RPC batch on /mcp is a batch too: each tools/call in it counts (the endpoint runs
    // at most `slots` of them at once, see src/mcp-server/budget.ts).
    const isMcp = invoke === 'json-rpc'
    // A subscriptions/listen stays open: the endpoint's stream limits count it, not the calls in flight.
    if (isMcp && isListenRequest(request.body)) {
      done()
      return
    }
    const calls = (request.body as { calls?: unknown } | undefined)?.calls
    const n = isMcp ? countToolCalls(request.body) : Array.isArray(calls) ? calls.length : 1
    // One call on this instance alone (no Redis): nothing to wait for, no promise.
    if (!isMcp && n <= 1 && semaphore === undefined) done(hold(request, reply, bucket, 1, undefined, false))
    else acquire(request, reply, bucket, isMcp, n).then(() => { done() }, done)
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
