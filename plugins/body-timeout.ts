import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import { HttpError, toHttpErrorBody } from '../src/errors.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** When the body must have been read (ms since epoch); 0 once it has been. */
    bodyDeadline: number
  }
}

/**
 * Cuts off requests whose body does not arrive in time (slowloris: headers sent, then the body
 * trickled or stalled). Node's own requestTimeout did not fire for a body stalled after Fastify
 * started reading it, so the deadline is enforced here: from the request's arrival until its
 * body is parsed (preValidation). The client gets 408 in the gateway's error shape and the
 * socket is closed, so the stalled upload holds nothing.
 *
 * One sweeping timer for all requests instead of a timer per request (a setTimeout and a
 * clearTimeout on every call were ~1.5% of the gateway's CPU on the invoke benchmark): every
 * request has the same timeout, so arrival order is deadline order, and a sweep stops at the
 * first request still in time. The deadline is kept to within a tick (a tenth of the timeout,
 * 10 ms to 1 s); the timer runs only while a body is being waited for.
 */
export default fp(async function bodyTimeoutPlugin (app: FastifyInstance, opts: { timeoutMs: number }) {
  const deadlines = new BodyDeadlines(opts.timeoutMs)
  app.decorateRequest('bodyDeadline', 0)
  app.addHook('onRequest', (request, reply, done) => {
    deadlines.add(request, reply)
    done()
  })
  const clear = (request: FastifyRequest, _reply: unknown, done: HookHandlerDoneFunction): void => {
    deadlines.remove(request)
    done()
  }
  app.addHook('preValidation', clear)
  app.addHook('onResponse', clear)
  app.addHook('onRequestAbort', (request, done) => { clear(request, undefined, done) })
  app.addHook('onClose', (_app, done) => {
    deadlines.stop()
    done()
  })
}, { name: 'gateway-body-timeout' })

class BodyDeadlines {
  readonly #timeoutMs: number
  readonly #tickMs: number
  /** Requests still reading their body, in arrival (= deadline) order. */
  readonly #waiting = new Map<FastifyRequest, FastifyReply>()
  #timer: NodeJS.Timeout | undefined

  constructor (timeoutMs: number) {
    this.#timeoutMs = timeoutMs
    this.#tickMs = Math.min(1000, Math.max(10, Math.floor(timeoutMs / 10)))
  }

  add (request: FastifyRequest, reply: FastifyReply): void {
    request.bodyDeadline = Date.now() + this.#timeoutMs
    this.#waiting.set(request, reply)
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => { this.#sweep() }, this.#tickMs)
      this.#timer.unref()
    }
  }

  remove (request: FastifyRequest): void {
    if (request.bodyDeadline === 0) return
    request.bodyDeadline = 0
    this.#waiting.delete(request)
  }

  stop (): void {
    clearInterval(this.#timer)
    this.#timer = undefined
    this.#waiting.clear()
  }

  #sweep (): void {
    const now = Date.now()
    for (const [request, reply] of this.#waiting) {
      if (request.bodyDeadline > now) break
      this.remove(request)
      timedOut(request, reply, this.#timeoutMs)
    }
    if (this.#waiting.size === 0) this.stop()
  }
}

function timedOut (request: FastifyRequest, reply: FastifyReply, timeoutMs: number): void {
  if (!reply.raw.headersSent) {
    // Written on the raw response, then the socket is destroyed: the stalled body is never finished.
    const body = toHttpErrorBody(new HttpError('GW_REQUEST_TIMEOUT', `The request body did not arrive within ${timeoutMs} ms`))
    reply.raw.writeHead(body.statusCode, { 'content-type': 'application/json; charset=utf-8', connection: 'close' })
    reply.raw.end(JSON.stringify(body))
  }
  request.raw.destroy()
}
