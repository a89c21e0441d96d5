import { Readable } from 'node:stream'
import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest, RouteOptions } from 'fastify'
import { CLUSTER_TOKEN_HEADER, ClusterTokenVerifier, MemoryNonceStore, RedisNonceStore } from '../src/cluster/index.js'
import { HttpError } from '../src/errors.js'

const REASONS = {
  missing: `missing ${CLUSTER_TOKEN_HEADER} header`,
  malformed: 'malformed token',
  expired: 'expired token',
  'bad-signature': 'token not signed for this request with this cluster\'s CLUSTER_SECRET',
  replayed: 'token already used'
} as const

const NO_SECRET = 'Instance-to-instance call refused: this instance has no CLUSTER_SECRET'

/**
 * Routes with `config.cluster` are called by other instances, never by clients: no API key, a
 * token derived from CLUSTER_SECRET instead (src/cluster/token.ts), bound to the method, path
 * and exact body bytes. Both checks are route hooks added to those routes only: a missing token
 * is refused in onRequest; the full check reads the raw body in preParsing, before any content
 * type parser or schema sees it, so whatever an unauthenticated caller sends (text/plain, a
 * form, no body) gets 401 and never a parser's or validator's message. The nonces of accepted
 * tokens are kept in the shared Redis when there is one (a token is accepted once by the whole
 * cluster), in memory otherwise (docs/CLUSTER.md).
 */
export default fp(async function clusterAuthPlugin (app: FastifyInstance) {
  const tokens = app.services.clusterTokens
  const coordination = app.services.coordination
  const verifier = tokens !== undefined
    ? new ClusterTokenVerifier(tokens, coordination !== undefined ? new RedisNonceStore(coordination) : new MemoryNonceStore())
    : undefined

  const onRequest = (request: FastifyRequest, _reply: unknown, done: (err?: Error) => void): void => {
    if (verifier === undefined) done(new HttpError('GW_UNAUTHORIZED', NO_SECRET))
    else if (typeof request.headers[CLUSTER_TOKEN_HEADER] !== 'string') done(new HttpError('GW_UNAUTHORIZED', `Instance-to-instance call refused: ${REASONS.missing}`))
    else done()
  }

  const preParsing = async (request: FastifyRequest, _reply: unknown, payload: Readable): Promise<Readable> => {
    if (verifier === undefined) throw new HttpError('GW_UNAUTHORIZED', NO_SECRET)
    const body = await readBody(payload, request.routeOptions.bodyLimit)
    const header = request.headers[CLUSTER_TOKEN_HEADER]
    const check = await verifier.verify(
      typeof header === 'string' ? header : undefined,
      { method: request.method, path: request.url, body: body.toString('utf8') }
    )
    if (!check.ok) {
      if (check.reason === 'unavailable') {
        throw new HttpError('GW_REGISTRY_UNAVAILABLE', 'Instance-to-instance call refused: the token\'s nonce could not be recorded in Redis')
      }
      throw new HttpError('GW_UNAUTHORIZED', `Instance-to-instance call refused: ${REASONS[check.reason]}`)
    }
    // Only a peer holding CLUSTER_SECRET gets here: the parsers get exactly the bytes the token signed.
    return Readable.from(body.length > 0 ? [body] : [])
  }

  app.addHook('onRoute', (route: RouteOptions) => {
    if (route.config?.cluster !== true) return
    route.onRequest = [onRequest, ...hooksOf(route.onRequest)] as RouteOptions['onRequest']
    route.preParsing = [preParsing, ...hooksOf(route.preParsing)] as RouteOptions['preParsing']
  })
}, { name: 'gateway-cluster-auth', dependencies: ['gateway-services', 'gateway-auth'] })

function hooksOf<T> (hooks: T | T[] | undefined): T[] {
  return hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks]
}

/** The whole body, at most `limit` bytes (413 past it, as the parsers would answer). */
async function readBody (payload: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of payload) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk as Buffer
    size += buf.length
    if (size > limit) {
      payload.destroy()
      throw new HttpError('GW_PAYLOAD_TOO_LARGE', `Request body larger than ${limit} bytes`)
    }
    chunks.push(buf)
  }
  return Buffer.concat(chunks, size)
}
