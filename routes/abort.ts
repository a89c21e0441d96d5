import type { FastifyReply } from 'fastify'
import { fanOutAbortController } from '../src/tools/signals.js'

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
