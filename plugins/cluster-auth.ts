import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { CLUSTER_TOKEN_HEADER, ClusterTokenVerifier } from '../src/cluster/index.js'
import { HttpError } from '../src/errors.js'
import { isClusterRoute } from './route-config.js'

declare module 'fastify' {
  interface FastifyInstance {
    /**
     * Checks an instance-to-instance call's token against the exact body received; throws 401
     * GW_UNAUTHORIZED when it is missing, malformed, expired, replayed or not signed with this
     * cluster's CLUSTER_SECRET (or when this instance has none).
     */
    verifyClusterCall: (request: FastifyRequest, rawBody: string) => void
  }
}

const REASONS = {
  missing: `missing ${CLUSTER_TOKEN_HEADER} header`,
  malformed: 'malformed token',
  expired: 'expired token',
  'bad-signature': 'token not signed for this request with this cluster\'s CLUSTER_SECRET',
  replayed: 'token already used'
} as const

/**
 * Routes with `config.cluster` are called by other instances, never by clients: no API key, a
 * token derived from CLUSTER_SECRET instead (src/cluster/token.ts). A missing token is refused in
 * onRequest; the full check needs the raw body and runs in the route's body parser, before the
 * body is parsed (routes/cluster.ts).
 */
export default fp(async function clusterAuthPlugin (app: FastifyInstance) {
  const tokens = app.services.clusterTokens
  const verifier = tokens !== undefined ? new ClusterTokenVerifier(tokens) : undefined

  app.decorate('verifyClusterCall', (request: FastifyRequest, rawBody: string) => {
    if (verifier === undefined) throw new HttpError('GW_UNAUTHORIZED', 'Instance-to-instance call refused: this instance has no CLUSTER_SECRET')
    const header = request.headers[CLUSTER_TOKEN_HEADER]
    const check = verifier.verify(typeof header === 'string' ? header : undefined, { method: request.method, path: request.url, body: rawBody })
    if (!check.ok) throw new HttpError('GW_UNAUTHORIZED', `Instance-to-instance call refused: ${REASONS[check.reason]}`)
  })

  // A callback hook: every request passes here, and only cluster routes have anything to check.
  app.addHook('onRequest', (request, _reply, done) => {
    if (!isClusterRoute(request)) done()
    else if (verifier === undefined) done(new HttpError('GW_UNAUTHORIZED', 'Instance-to-instance call refused: this instance has no CLUSTER_SECRET'))
    else if (typeof request.headers[CLUSTER_TOKEN_HEADER] !== 'string') done(new HttpError('GW_UNAUTHORIZED', `Instance-to-instance call refused: ${REASONS.missing}`))
    else done()
  })
}, { name: 'gateway-cluster-auth', dependencies: ['gateway-services', 'gateway-auth'] })
