import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'

declare module 'fastify' {
  /**
   * Per-route rules, declared on the route (`config: { ... }`) and enforced by the plugins that
   * read `request.routeOptions.config`. A route that declares nothing needs an API key, is rate
   * limited and is logged at info.
   */
  interface FastifyContextConfig {
    /**
     * An operations route anyone may call without an API key (health, readiness, docs, metrics):
     * the auth plugin lets it through as nobody, the rate limit skips it, and the request log
     * writes it at debug unless it fails. Only GET routes are made public.
     */
    public?: boolean
    /**
     * A public route that needs an API key after all (GET /metrics with METRICS_REQUIRE_KEY):
     * any key is enough; the route stays out of the rate limit and quiet in the log, so a
     * scraper never competes with the tenant whose key it uses.
     */
    requireKey?: boolean
    /** Needs an admin key (global servers, /status): the auth plugin answers 403 GW_FORBIDDEN to any other caller. */
    admin?: boolean
    /** An approver key (`key:approver:{userId}`) may call it (approvals, the journal); every other route refuses one with 403 GW_FORBIDDEN. */
    approver?: boolean
    /**
     * The route runs tools: each request holds MAX_CONCURRENT_PER_TENANT slots while it runs
     * (rate-limit plugin). `true`: its answer is an invoke result or batch, recorded by the
     * metrics plugin. `'json-rpc'`: its body is a JSON-RPC message or batch whose each
     * tools/call counts against the limits, and the route records each call's metrics itself.
     */
    invoke?: boolean | 'json-rpc'
    /**
     * Called by other gateway instances only (forwarded background-process calls): no API key
     * but a CLUSTER_SECRET token (cluster-auth plugin); not rate limited (the call was counted
     * where it came in); hidden from openapi.yaml.
     */
    cluster?: boolean
    /**
     * Answers whatever the request's Host and Origin (host-check plugin): liveness and readiness,
     * which Kubernetes probes address by pod IP. Cluster routes are exempt too (their token is
     * the authentication, and no browser holds one).
     */
    anyHost?: boolean
    /** Its query carries a flow's credentials (the OAuth callback's code and state): the request log keeps the path only. */
    secretQuery?: boolean
  }
  interface FastifyRequest {
    /** The matched route's rules, read once per request (rulesOf). */
    routeRules: RouteRules | undefined
  }
}

/** A route's declared rules plus the url and method Fastify adds to every route's config. */
export type RouteRules = FastifyRequest['routeOptions']['config']

/**
 * The rules of the route the request matched. Every plugin reads them on every request;
 * `request.routeOptions` builds a fresh object of a dozen fields on each read, so the config is
 * read from it once and kept on the request.
 */
export function rulesOf (request: FastifyRequest): RouteRules {
  let rules = request.routeRules
  if (rules === undefined) {
    rules = request.routeOptions.config
    request.routeRules = rules
  }
  return rules
}

/** Whether the request's route is public (see FastifyContextConfig.public); unknown routes (404) are not. */
export function isPublicRoute (request: FastifyRequest): boolean {
  return rulesOf(request).public === true
}

/** Whether the request's route is instance-to-instance (see FastifyContextConfig.cluster). */
export function isClusterRoute (request: FastifyRequest): boolean {
  return rulesOf(request).cluster === true
}

/** Declares `request.routeRules` (registered first: every request object gets the same shape). */
export default fp(async function routeConfigPlugin (app: FastifyInstance) {
  app.decorateRequest('routeRules', undefined)
}, { name: 'gateway-route-config' })
