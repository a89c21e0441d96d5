import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { checkHostHeaders, hostPolicyOf, hostRefusalMessage } from '../src/auth/host-check.js'
import type { HostVerdict } from '../src/auth/host-check.js'
import { HttpError } from '../src/errors.js'
import { rulesOf } from './route-config.js'

export interface HostCheckPluginOptions {
  /** ALLOWED_HOSTS as in the config. */
  allowedHosts: readonly string[]
  /** TRUST_PROXY is set: X-Forwarded-Host is believed, so it is judged too. */
  trustProxy: boolean
}

/** Distinct Host values whose verdict is remembered (a few in practice; bounded against a client sending many). */
const CACHED_HOSTS = 256

/**
 * DNS rebinding and cross-site protection (docs/ARCHITECTURE.md#host-check; the decision is
 * src/auth/host-check.ts). Open mode answers only requests addressed to a loopback name (or an
 * ALLOWED_HOSTS one) and without a foreign Origin; keyed mode checks only when ALLOWED_HOSTS is
 * set. Every route, /mcp included, the 404 handler too; /healthz, /readyz (`anyHost`) and the
 * instance-to-instance routes (authenticated by their token) are exempt. Refused in onRequest,
 * before any body is read or any tool is resolved.
 */
export default fp(async function hostCheckPlugin (app: FastifyInstance, opts: HostCheckPluginOptions) {
  const mode = app.authMode
  const policy = hostPolicyOf(mode, opts.allowedHosts, { trustProxy: opts.trustProxy })
  // Keyed mode without ALLOWED_HOSTS: no hook at all, nothing is paid per request.
  if (policy === undefined) return
  const hostVerdicts = new Map<string, HostVerdict>()

  app.addHook('onRequest', (request, _reply, done) => {
    const rules = rulesOf(request)
    if (rules.anyHost === true || rules.cluster === true) {
      done()
      return
    }
    const headers = request.headers
    const host = headers.host
    const origin = headers.origin
    const forwardedHost = policy.forwardedHost ? headers['x-forwarded-host'] : undefined
    let verdict: HostVerdict | undefined
    // The common request: a Host seen before, no Origin, nothing forwarded.
    if (host !== undefined && origin === undefined && forwardedHost === undefined) {
      verdict = hostVerdicts.get(host)
      if (verdict === undefined) {
        verdict = checkHostHeaders(policy, { host, origin, forwardedHost })
        if (hostVerdicts.size >= CACHED_HOSTS) hostVerdicts.clear()
        hostVerdicts.set(host, verdict)
      }
    } else {
      verdict = checkHostHeaders(policy, { host, origin, forwardedHost })
    }
    if (verdict.ok) done()
    else done(new HttpError('GW_HOST_NOT_ALLOWED', hostRefusalMessage(verdict, mode)))
  })
  // After auth, which decides the mode (a key file with no key is an error, never open mode).
  // Before the cluster token check and the rate limit: a refused page spends nobody's budget.
}, { name: 'gateway-host-check', dependencies: ['gateway-auth', 'gateway-route-config'] })
