import type { FastifyReply } from 'fastify'
import { CallerAbort, fanOutAbortController } from '../src/routing/signals.js'

// Not a registered plugin: the routes call these per request to stop tool work when the client leaves.

/**
 * A signal aborted when the client goes away before the response is written, so tools can
 * stop work nobody will read.
 */
export function abortOnClientGone (reply: FastifyReply): AbortSignal {
  const controller = fanOutAbortController()
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort(new Error('client disconnected'))
  })
  return controller.signal
}

/**
 * The same for one call (POST /invoke), without an AbortSignal until the call needs one: a trivial
 * function call never does, and making one per request was a measurable share of its cost.
 */
export function callerAbortOnClientGone (reply: FastifyReply): CallerAbort {
  const gone = new CallerAbort()
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) gone.abort(new Error('client disconnected'))
  })
  return gone
}
