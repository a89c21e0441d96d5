import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { HttpError } from '../src/errors.js'
import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from '../src/routing/wide-json.js'

export interface JsonBodyOptions {
  /** The start of a malformed body's message (400 GW_MALFORMED_JSON). Default `Malformed JSON body`. */
  malformed?: string
  /** Whether an empty body is malformed for this request. Default: never (an empty body is no body). */
  emptyIsMalformed?: (request: FastifyRequest) => boolean
}

/**
 * The gateway's application/json parser, in the context it is registered in (the app, or the
 * /mcp routes): Fastify's own parser (prototype poisoning refused), with an empty body read as
 * no body, so `curl -X DELETE -H 'content-type: application/json'` is not malformed JSON (a route
 * that needs a body still refuses it by schema), and a malformed body a 400 GW_MALFORMED_JSON
 * whose message starts as the context wants it (/mcp: `Parse error`, answered as JSON-RPC -32700). A body
 * holding an object wider than MAX_OBJECT_MEMBERS is 413 GW_PAYLOAD_TOO_LARGE, before it is parsed
 * (src/routing/wide-json.ts).
 */
export default fp(async function jsonBodyPlugin (app: FastifyInstance, opts: JsonBodyOptions) {
  const malformed = opts.malformed ?? 'Malformed JSON body'
  const emptyIsMalformed = opts.emptyIsMalformed ?? (() => false)
  const jsonParser = app.getDefaultJsonParser('error', 'error')
  app.removeContentTypeParser('application/json')
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // Bodies are not decompressed: compressed bytes read as text were a misleading parse error, and a plain body
    // labelled gzip was taken as it is. RFC 9110 8.4.1: a coding the server does not accept is a 415.
    const coding = request.headers['content-encoding']
    if (coding !== undefined && coding.trim().toLowerCase() !== 'identity') {
      done(new HttpError('GW_UNSUPPORTED_MEDIA_TYPE', `Content-Encoding ${coding.slice(0, 40)} is not supported: send the JSON body uncompressed`), undefined)
      return
    }
    const text = body.toString()
    if (text.trim() === '') {
      done(emptyIsMalformed(request) ? new HttpError('GW_MALFORMED_JSON', `${malformed}: empty body`) : null, undefined)
      return
    }
    // Before the parse: an object of many distinct members costs more to parse and walk than any other JSON of its size.
    if (hasObjectWiderThan(text, MAX_OBJECT_MEMBERS)) {
      done(new HttpError('GW_PAYLOAD_TOO_LARGE', `The body holds an object of more than ${MAX_OBJECT_MEMBERS} members: not read`), undefined)
      return
    }
    jsonParser(request, text, (err, value) => {
      done(err ? new HttpError('GW_MALFORMED_JSON', `${malformed}: ${err.message}`) : null, value)
    })
  })
}, { name: 'gateway-json-body' })
