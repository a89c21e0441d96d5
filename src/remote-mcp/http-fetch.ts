/**
 * fetch wrappers for the SDK's fetch-based HTTP transports (transport-http.ts; the bench's
 * client uses isolateAbortSignals too): redirects refused, abort listeners that do not pile
 * up, answers bounded (response-limits.ts).
 */
import { getEventListeners, setMaxListeners } from 'node:events'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import type { GwCode } from '../errors.js'
import { MessageTooLargeError } from './response-limits.js'
import type { ResponseLimits } from './response-limits.js'

/** Thrown by refuseRedirects; the SDK surfaces it as a transport error. */
export class RedirectRefusedError extends Error {
  readonly code = 'GW_UPSTREAM_REDIRECT' satisfies GwCode
  constructor (status: number) {
    super(`The MCP server answered with a redirect (HTTP ${status}); redirects are not followed`)
    this.name = 'RedirectRefusedError'
  }
}

/**
 * Wraps fetch so that each request carries the active span's W3C trace context (`traceparent`,
 * `tracestate`: src/tracing/), written by `inject`; used only while tracing is on.
 */
export function traceHeaders (base: FetchLike, inject: (headers: Record<string, string>) => void): FetchLike {
  return async (url, init) => {
    const trace: Record<string, string> = {}
    inject(trace)
    if (Object.keys(trace).length === 0) return await base(url, init)
    const headers = new Headers(init?.headers)
    for (const [k, v] of Object.entries(trace)) headers.set(k, v)
    return await base(url, { ...init, headers })
  }
}

/** Wraps fetch so that no redirect is ever followed, whatever the SDK asks for. */
export function refuseRedirects (base: FetchLike): FetchLike {
  return async (url, init) => {
    const response = await base(url, { ...init, redirect: 'manual' })
    if ((response.status >= 300 && response.status < 400) || response.type === 'opaqueredirect') {
      await response.body?.cancel().catch(() => {})
      throw new RedirectRefusedError(response.status)
    }
    return response
  }
}

/**
 * Why: @modelcontextprotocol/sdk 1.32.2's StreamableHTTPClientTransport (and SSEClientTransport)
 * pass one transport-wide AbortSignal to every fetch. undici adds an abort listener to that
 * signal per request and removes it only when the Request is garbage-collected, so a long-lived
 * pooled client accumulates listeners and Node prints MaxListenersExceededWarning after ~1,500
 * calls. Here each request gets its own AbortController, linked to the shared signal by one
 * listener that we remove as soon as the response body is finished (read to the end, cancelled
 * or errored) or the fetch fails. Aborting the shared signal (transport close) still aborts
 * every in-flight request. The body must stay abortable until it is consumed (fetch semantics),
 * which is why the link lives until then and not only until the headers arrive.
 */
export function isolateAbortSignals (base: FetchLike): { fetch: FetchLike, sharedListenerCount: () => number } {
  let lastShared: WeakRef<AbortSignal> | undefined
  const quieted = new WeakSet<AbortSignal>()
  const isolatedFetch: FetchLike = async (url, init) => {
    const shared = init?.signal ?? undefined
    if (shared === undefined || shared === null) return base(url, init)
    lastShared = new WeakRef(shared)
    shared.throwIfAborted()
    // One link per request in flight, each removed when its body is done: bounded by the
    // client's concurrency, so Node's leak warning (at 11) is noise here.
    if (!quieted.has(shared)) {
      quieted.add(shared)
      setMaxListeners(0, shared)
    }
    const own = new AbortController()
    const onAbort = (): void => { own.abort(shared.reason) }
    shared.addEventListener('abort', onAbort, { once: true })
    let released = false
    const release = (): void => {
      if (released) return
      released = true
      shared.removeEventListener('abort', onAbort)
    }
    let response: Response
    try {
      response = await base(url, { ...init, signal: own.signal })
    } catch (err) {
      release()
      throw err
    }
    if (response.body === null) {
      release()
      return response
    }
    return new Response(releaseWhenDone(response.body, release), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers
    })
  }
  return {
    fetch: isolatedFetch,
    sharedListenerCount: () => {
      const shared = lastShared?.deref()
      return shared === undefined ? 0 : getEventListeners(shared, 'abort').length
    }
  }
}

function releaseWhenDone (body: ReadableStream<Uint8Array>, release: () => void): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  return new ReadableStream<Uint8Array>({
    async pull (controller) {
      try {
        const { value, done } = await reader.read()
        if (done) {
          release()
          controller.close()
          return
        }
        controller.enqueue(value)
      } catch (err) {
        release()
        controller.error(err)
      }
    },
    async cancel (reason) {
      release()
      await reader.cancel(reason).catch(() => {})
    }
  })
}

/**
 * Bounds what the SDK's fetch-based transports (legacy SSE, and streamable HTTP with
 * MCP_HTTP_TRANSPORT=sdk) hold of an answer, without touching their parsers: the body stream is
 * cut with MessageTooLargeError once one SSE event (bytes since the last blank line) or a whole
 * non-SSE body passes `maxMessageBytes`, or with ResponseBudgetError once the bytes it holds do
 * not fit the budget. The SDK then sees a broken body: a JSON answer's request fails with the
 * error; a broken SSE stream is a transport error (legacy SSE: the connection is dropped and its
 * calls fail; streamable HTTP: the call waits for its timeout, as for any broken stream).
 */
export function limitResponses (base: FetchLike, limits: ResponseLimits): FetchLike {
  return async (url, init) => {
    const response = await base(url, init)
    if (response.body === null) return response
    const sse = (response.headers.get('content-type') ?? '').toLowerCase().includes('text/event-stream')
    return new Response(boundedBody(response.body, sse ? new SseEventSizer() : undefined, limits), {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers
    })
  }
}

function boundedBody (body: ReadableStream<Uint8Array>, sizer: SseEventSizer | undefined, limits: ResponseLimits): ReadableStream<Uint8Array> {
  const reader = body.getReader()
  const charge = limits.budget?.charge(limits.owner ?? 'default')
  let total = 0
  return new ReadableStream<Uint8Array>({
    async pull (controller) {
      try {
        const { value, done } = await reader.read()
        if (done) {
          charge?.release()
          controller.close()
          return
        }
        total += value.length
        // What the SDK's parser holds once it has this chunk: the unfinished event, or the whole body.
        const held = sizer !== undefined ? sizer.push(value) : total
        if (held > limits.maxMessageBytes) throw new MessageTooLargeError(limits.maxMessageBytes)
        charge?.hold(held)
        controller.enqueue(value)
      } catch (err) {
        charge?.release()
        await reader.cancel(err).catch(() => {})
        controller.error(err)
      }
    },
    async cancel (reason) {
      charge?.release()
      await reader.cancel(reason).catch(() => {})
    }
  })
}

/**
 * Counts the bytes of the SSE event under way (since the last blank line) over raw chunks: lines
 * end in LF, CRLF or CR, also split across chunks. Only sizes, never copies.
 */
export class SseEventSizer {
  #event = 0
  #line = 0
  #lastCr = false

  /** Takes the next chunk; returns the bytes of the event still unfinished after it. */
  push (chunk: Uint8Array): number {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    const n = buf.length
    let i = 0
    if (this.#lastCr && n > 0) {
      if (buf[0] === 0x0a) i = 1
      this.#lastCr = false
    }
    // Next LF and CR at or after i (-1: none left), each searched again only once passed.
    let lf = buf.indexOf(0x0a, i)
    let cr = buf.indexOf(0x0d, i)
    while (i < n) {
      if (lf !== -1 && lf < i) lf = buf.indexOf(0x0a, i)
      if (cr !== -1 && cr < i) cr = buf.indexOf(0x0d, i)
      const end = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr)
      if (end === -1) {
        this.#line += n - i
        break
      }
      this.#line += end - i
      if (this.#line === 0) this.#event = 0 // a blank line ends the event
      else { this.#event += this.#line + 1; this.#line = 0 }
      i = end + 1
      if (buf[end] === 0x0d) {
        if (i < n) { if (buf[i] === 0x0a) i++ } else this.#lastCr = true
      }
    }
    return this.#event + this.#line
  }
}
