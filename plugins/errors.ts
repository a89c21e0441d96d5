import fp from 'fastify-plugin'
import type { FastifyError, FastifyInstance } from 'fastify'
import { STATUS_CODES } from 'node:http'
import { HTTP_ERROR_CODES, HttpError } from '../src/errors.js'
import type { HttpErrorCode } from '../src/errors.js'

/** Fastify's own error codes mapped to the gateway's stable GW_ codes. */
const FASTIFY_CODES: Record<string, HttpErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'GW_MALFORMED_JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'GW_MALFORMED_JSON',
  FST_ERR_CTP_BODY_TOO_LARGE: 'GW_PAYLOAD_TOO_LARGE',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'GW_UNSUPPORTED_MEDIA_TYPE',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'GW_BAD_REQUEST',
  FST_ERR_VALIDATION: 'GW_BAD_REQUEST'
}

export function errorBody (statusCode: number, code: string, message: string): { statusCode: number, code: string, error: string, message: string } {
  return { statusCode, code, error: STATUS_CODES[statusCode] ?? 'Error', message }
}

/**
 * Every error leaves in one JSON shape `{ statusCode, code, error, message }` with a stable
 * GW_ code (SPEC 3). 5xx messages are replaced: no stack traces, host paths or secrets.
 */
export default fp(async function errorsPlugin (app: FastifyInstance) {
  app.setErrorHandler((err: FastifyError | HttpError, request, reply) => {
    let statusCode: number
    let code: string
    let message = err.message
    if (err instanceof HttpError) {
      statusCode = err.statusCode
      code = err.code
    } else if ((err as FastifyError).validation) {
      statusCode = 400
      code = 'GW_BAD_REQUEST'
    } else if (typeof err.code === 'string' && err.code in HTTP_ERROR_CODES) {
      // Typed domain errors (e.g. RegistryUnavailableError) carry a GW_ code of their own.
      code = err.code
      statusCode = HTTP_ERROR_CODES[err.code as HttpErrorCode]
    } else if (typeof err.code === 'string' && FASTIFY_CODES[err.code]) {
      code = FASTIFY_CODES[err.code] as HttpErrorCode
      statusCode = HTTP_ERROR_CODES[code as HttpErrorCode]
      if (code === 'GW_MALFORMED_JSON') message = `Malformed JSON body: ${err.message}`
    } else if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
      statusCode = err.statusCode
      code = statusCode === 429 ? 'GW_RATE_LIMITED' : statusCode === 413 ? 'GW_PAYLOAD_TOO_LARGE' : statusCode === 404 ? 'GW_NOT_FOUND' : 'GW_BAD_REQUEST'
    } else {
      statusCode = 500
      code = 'GW_INTERNAL'
    }
    if (statusCode >= 500) {
      request.log.error({ err }, 'request failed')
      if (code === 'GW_INTERNAL') message = 'Internal error; the request id is in the logs'
    } else {
      request.logFields = { ...request.logFields, code, error: message }
    }
    reply.code(statusCode).type('application/json').send(errorBody(statusCode, code, message))
  })

  app.setNotFoundHandler((request, reply) => {
    reply.code(404).send(errorBody(404, 'GW_NOT_FOUND', `Route ${request.method} ${request.url.split('?')[0] ?? ''} not found`))
  })
}, { name: 'gateway-errors' })
