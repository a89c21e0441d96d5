import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { isPublicRoute } from './route-config.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Fields a route or the error handler adds to the request's one log line. */
    logFields: Record<string, unknown> | undefined
  }
}

/**
 * Query parameter names whose values are credentials. Clients put keys in the URL by mistake
 * (`?api_key=...`; the gateway refuses them, keys go in Authorization) and URLs are logged:
 * such values are written as `[redacted]`. Matched on the decoded, lower-cased name with `-`
 * read as `_`, anywhere in the name (`x_api_key`, `client_secret`, `refresh_token`).
 */
const CREDENTIAL_NAME = /key|token|secret|passw|pwd|auth|credential|signature|sig$|session|cookie|jwt|bearer/

/** `url` with the values of credential-like query parameters replaced by `[redacted]`. */
export function redactUrl (url: string): string {
  const q = url.indexOf('?')
  if (q < 0) return url
  const pairs = url.slice(q + 1).split('&').map((pair) => {
    const eq = pair.indexOf('=')
    const rawName = eq < 0 ? pair : pair.slice(0, eq)
    let name: string
    try {
      name = decodeURIComponent(rawName.replace(/\+/g, ' '))
    } catch {
      name = rawName
    }
    if (!CREDENTIAL_NAME.test(name.toLowerCase().replace(/-/g, '_'))) return pair
    return eq < 0 ? pair : `${rawName}=[redacted]`
  })
  return `${url.slice(0, q)}?${pairs.join('&')}`
}

/**
 * One log line per request, written when the response is sent: method, url (credential-like
 * query values redacted), status, time, and
 * whatever the route added to `request.logFields` (the tool, tier, tenant and outcome of an
 * invoke; the GW_ code of a refusal). Replaces Fastify's two lines per request (incoming,
 * completed) plus the route's own: at this request rate logging was a visible part of the CPU.
 * Health, readiness, metrics and docs answered OK are logged at debug (probes would flood info).
 */
export default fp(async function requestLogPlugin (app: FastifyInstance) {
  app.decorateRequest('logFields', undefined)
  app.addHook('onResponse', (request, reply, done) => {
    const quiet = reply.statusCode < 400 && isPublicRoute(request)
    const line = {
      // Through Fastify's `req` serializer, which writes `remoteAddress` from an `ip` field (a
      // `remoteAddress` field of its own would be dropped).
      req: { method: request.method, url: redactUrl(request.url), ip: request.ip },
      res: { statusCode: reply.statusCode },
      responseTime: reply.elapsedTime,
      ...request.logFields
    }
    if (quiet) request.log.debug(line, 'request completed')
    else request.log.info(line, 'request completed')
    done()
  })
}, { name: 'gateway-request-log' })
