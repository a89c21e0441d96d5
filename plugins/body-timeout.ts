import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { errorBody } from './errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** Cleared once the body has been read (or the request ended). */
    bodyTimer: NodeJS.Timeout | undefined
  }
}

/**
 * Cuts off requests whose body does not arrive in time (slowloris: headers sent, then the body
 * trickled or stalled). Node's own requestTimeout did not fire for a body stalled after Fastify
 * started reading it, so the deadline is enforced here: from the request's arrival until its
 * body is parsed (preValidation). The client gets 408 in the gateway's error shape and the
 * socket is closed, so the stalled upload holds nothing.
 */
export default fp(async function bodyTimeoutPlugin (app: FastifyInstance, opts: { timeoutMs: number }) {
  app.decorateRequest('bodyTimer', undefined)
  // Callback hooks and a timer given its arguments: no promise or closure per request.
  app.addHook('onRequest', (request, reply, done) => {
    request.bodyTimer = setTimeout(timedOut, opts.timeoutMs, request, reply, opts.timeoutMs)
    request.bodyTimer.unref()
    done()
  })
  app.addHook('preValidation', clear)
  app.addHook('onResponse', clear)
  app.addHook('onRequestAbort', (request, done) => { clear(request, undefined, done) })
}, { name: 'gateway-body-timeout' })

function timedOut (request: FastifyRequest, reply: FastifyReply, timeoutMs: number): void {
  if (!reply.raw.headersSent) {
    reply.raw.writeHead(408, { 'content-type': 'application/json; charset=utf-8', connection: 'close' })
    reply.raw.end(JSON.stringify(errorBody(408, 'GW_REQUEST_TIMEOUT', `The request body did not arrive within ${timeoutMs} ms`)))
  }
  request.raw.destroy()
}

function clear (request: FastifyRequest, _reply: unknown, done: HookHandlerDoneFunction): void {
  clearTimeout(request.bodyTimer)
  request.bodyTimer = undefined
  done()
}
