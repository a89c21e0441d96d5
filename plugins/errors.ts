import FindMyWay from 'find-my-way'
import fp from 'fastify-plugin'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import { HttpError, toHttpErrorBody } from '../src/errors.js'
import type { HttpErrorCode } from '../src/errors.js'

/** Fastify's own error codes mapped to the gateway's stable GW_ codes. */
const FASTIFY_CODES: ReadonlyMap<string, HttpErrorCode> = new Map([
  ['FST_ERR_CTP_INVALID_JSON_BODY', 'GW_MALFORMED_JSON'],
  ['FST_ERR_CTP_EMPTY_JSON_BODY', 'GW_MALFORMED_JSON'],
  ['FST_ERR_CTP_BODY_TOO_LARGE', 'GW_PAYLOAD_TOO_LARGE'],
  ['FST_ERR_CTP_INVALID_MEDIA_TYPE', 'GW_UNSUPPORTED_MEDIA_TYPE'],
  ['FST_ERR_CTP_INVALID_CONTENT_LENGTH', 'GW_BAD_REQUEST'],
  ['FST_ERR_VALIDATION', 'GW_BAD_REQUEST']
])

/**
 * Fastify's own errors as the domain's: an FST_ code of FASTIFY_CODES becomes an HttpError of
 * its GW_ code (a JSON syntax error says so first); anything else passes as it is.
 */
export function fromFastifyError (err: FastifyError | HttpError): unknown {
  if (err instanceof HttpError || typeof err.code !== 'string') return err
  const code = FASTIFY_CODES.get(err.code)
  if (code === undefined) return err
  return new HttpError(code, code === 'GW_MALFORMED_JSON' ? `Malformed JSON body: ${err.message}` : err.message)
}

/**
 * Fastify's `frameworkErrors` (a factory option, src/app.ts): the refusals its router makes before any route, hook or
 * error handler, in the gateway's one shape. Fastify's own answers carried its FST_ code and the whole path, up to the
 * header size, in the message.
 */
export function frameworkErrorReply (err: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  let refusal: HttpError | FastifyError = err
  if (err.code === 'FST_ERR_BAD_URL') {
    refusal = new HttpError('GW_BAD_REQUEST', 'The request path is not valid: a malformed percent-encoding (%XX) or an invalid UTF-8 sequence')
  } else if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    // 414 URI Too Long, as Fastify answers it, with the gateway's code for a bad request.
    refusal = Object.assign(new Error(`A path parameter is longer than the router's limit of ${MAX_PARAM_LENGTH} characters`), { statusCode: 414 }) as FastifyError
  }
  const body = toHttpErrorBody(refusal)
  if (body.statusCode >= 500) request.log.error({ err }, 'request failed')
  reply.code(body.statusCode).type('application/json').send(body)
}

/** The longest path parameter the router takes (src/app.ts's routerOptions say why). */
export const MAX_PARAM_LENGTH = 2048

/**
 * Every error leaves in one JSON shape `{ statusCode, code, error, message }` with a stable
 * GW_ code, mapped by toHttpErrorBody (src/errors.ts); this plugin adds Fastify's codes and the logging.
 */
export default fp(async function errorsPlugin (app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError | HttpError, request, reply) => {
    const body = toHttpErrorBody(fromFastifyError(err))
    if (body.statusCode >= 500) request.log.error({ err }, 'request failed')
    else request.logFields = { ...request.logFields, code: body.code, error: body.message }
    reply.code(body.statusCode).type('application/json').send(body)
  })

  const allowed = allowedMethods(app)
  app.setNotFoundHandler((request, reply) => {
    const path = request.url.split('?')[0] ?? ''
    // A path the gateway serves, with a method it does not take there: 405 with the methods it takes (RFC 9110 15.5.6).
    // A route that takes the method and found nothing (a static file that is not there) is a 404.
    const served = allowed(path)
    const methods = served?.includes(request.method) === true ? undefined : served
    const refusal = methods === undefined
      ? new HttpError('GW_NOT_FOUND', `Route ${request.method} ${path} not found`)
      : new HttpError('GW_METHOD_NOT_ALLOWED', `${request.method} is not allowed on ${path}: it takes ${methods.join(', ')}`)
    if (methods !== undefined) reply.header('allow', methods.join(', '))
    const body = toHttpErrorBody(refusal)
    request.logFields = { ...request.logFields, code: body.code }
    reply.code(body.statusCode).send(body)
  })
}, { name: 'gateway-errors' })

/**
 * The methods of the routes registered on `app` from now on, by request path (the route a path matches, with Fastify's
 * own router, find-my-way, on the same patterns and limit), sorted; undefined for a path no route matches. A GET route
 * answers HEAD too (Fastify's exposeHeadRoutes).
 */
function allowedMethods (app: FastifyInstance): (path: string) => string[] | undefined {
  const paths = FindMyWay({ maxParamLength: MAX_PARAM_LENGTH })
  app.addHook('onRoute', (route: RouteOptions) => {
    // Each pattern once, under one method: the lookup is by path; the store is the pattern's methods.
    let methods = paths.findRoute('GET', route.url)?.store as Set<string> | undefined
    if (methods === undefined) {
      methods = new Set()
      paths.on('GET', route.url, () => {}, methods)
    }
    for (const m of [route.method].flat()) {
      methods.add(m)
      if (m === 'GET') methods.add('HEAD')
    }
  })
  return (path) => {
    const found = paths.find('GET', path)
    return found === null ? undefined : [...(found.store as Set<string>)].sort()
  }
}
