import fp from 'fastify-plugin'
import type { FastifyInstance } from 'fastify'
import type { Caller } from '../src/tools/types.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Who is calling: set before any route runs. */
    caller: Caller
  }
}

/**
 * Identifies the caller. Without configured API keys the gateway runs open (local development:
 * every caller is admin); API keys and tenant binding come with the auth plugin.
 */
export default fp(async function callerPlugin (app: FastifyInstance) {
  app.decorateRequest('caller', null as unknown as Caller)
  app.addHook('onRequest', async (request) => {
    request.caller = { userId: undefined, isAdmin: true }
  })
}, { name: 'gateway-caller' })
