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

const PROTOTYPE_KEY = 'The body holds a "__proto__" member, or a "constructor" member whose object has a "prototype" one: ' +
  'refused, such keys can change object prototypes; rename the key'

/**
 * Whether `text` is a JSON text. Asked only of a text Fastify's parser refused: one that parses is
 * refused for a prototype key (Fastify's parser words both refusals alike). JSON.parse makes a
 * `__proto__` member an own property of the object it returns, which is dropped at once.
 */
function isJson (text: string): boolean {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/**
 * The gateway's application/json parser, in the context it is registered in (the app, or the
 * /mcp routes): Fastify's own parser, with an empty body read as no body, so `curl -X DELETE -H
 * 'content-type: application/json'` is not malformed JSON (a route that needs a body still refuses
 * it by schema), and a malformed body a 400 GW_MALFORMED_JSON whose message starts as the context
 * wants it (/mcp: `Parse error`, answered as JSON-RPC -32700). A body holding an object wider than
 * MAX_OBJECT_MEMBERS is 413 GW_PAYLOAD_TOO_LARGE, before it is parsed
 * (src/routing/wide-json.ts). A body holding a prototype key (`__proto__`, or `constructor` holding
 * `prototype`, at any depth) is valid JSON, refused whole as 400 GW_PROTOTYPE_KEY (on /mcp JSON-RPC
 * -32600), not as malformed: kept as an own property, the key would reach every consumer of the
 * arguments (tools, user functions, upstream servers) that may merge objects; dropped, the call would
 * run with arguments other than the caller's.
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
      if (err === null) done(null, value)
      else done(isJson(text) ? new HttpError('GW_PROTOTYPE_KEY', PROTOTYPE_KEY) : new HttpError('GW_MALFORMED_JSON', `${malformed}: ${err.message}`), undefined)
    })
  })
}, { name: 'gateway-json-body' })
