import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import { quoted } from '../src/errors.js'
import { LOG_CENSOR } from '../src/logger.js'
import { maskText } from '../src/secrets/detector.js'
import { isPublicRoute, rulesOf } from './route-config.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Fields a route or the error handler adds to the request's one log line. */
    logFields: Record<string, unknown> | undefined
  }
}

/**
 * `url` as it is logged: credential-like query values (clients put keys in the URL by mistake,
 * `?api_key=...`; the gateway refuses them, keys go in Authorization), URL userinfo and known token
 * formats replaced by `[redacted]`, by the one secret detector (src/secrets/detector.ts).
 */
export function redactUrl (url: string): string {
  return maskText(url, { mask: LOG_CENSOR })
}

/**
 * A piece of the client's input a log line carries (the name of a tool that does not exist): clipped as a message
 * quotes it, and what the secret detector finds in it redacted, as in a refusal's message.
 */
export function loggedInput (text: string): string {
  return maskText(quoted(text), { mask: LOG_CENSOR })
}

/** URLs the detector found nothing in (a few route paths in practice; bounded against a client sending many). */
const CLEAN_URLS_MAX = 256

/**
 * redactUrl, with the URLs it left as they were remembered: the same few paths come on every
 * request, and the scan was most of the log line's own cost. Only clean URLs are kept, so no
 * credential stays in memory.
 */
function urlRedactor (): (url: string) => string {
  const clean = new Set<string>()
  return (url) => {
    if (clean.has(url)) return url
    const redacted = redactUrl(url)
    if (redacted === url) {
      if (clean.size >= CLEAN_URLS_MAX) clean.clear()
      clean.add(url)
    }
    return redacted
  }
}

/**
 * One log line per request, written when the response is sent: method, url (credentials
 * redacted), status, time, and
 * whatever the route added to `request.logFields` (the tool, tier, tenant and outcome of an
 * invoke; the GW_ code of a refusal, with the credentials its message may quote redacted). Replaces Fastify's two lines per request (incoming,
 * completed) plus the route's own: at this request rate logging was a visible part of the CPU.
 * Health, readiness, metrics and docs answered OK are logged at debug (probes would flood info).
 */
export default fp(async function requestLogPlugin (app: FastifyInstance) {
  app.decorateRequest('logFields', undefined)
  const loggedUrl = urlRedactor()
  app.addHook('onResponse', (request, reply, done) => {
    const quiet = reply.statusCode < 400 && isPublicRoute(request)
    const line: Record<string, unknown> = {
      // Through Fastify's `req` serializer, which writes `remoteAddress` from an `ip` field (a
      // `remoteAddress` field of its own would be dropped).
      req: { method: request.method, url: rulesOf(request).secretQuery === true ? request.url.split('?')[0] : loggedUrl(request.url), ip: request.ip },
      res: { statusCode: reply.statusCode },
      responseTime: reply.elapsedTime,
      ...request.logFields
    }
    // An error message can quote what the client sent (a header, a URL, a body field).
    if (typeof line.error === 'string') line.error = maskText(line.error, { mask: LOG_CENSOR })
    if (quiet) request.log.debug(line, 'request completed')
    else request.log.info(line, 'request completed')
    done()
  })
}, { name: 'gateway-request-log' })
