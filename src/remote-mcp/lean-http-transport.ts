/**
 * A streamable-HTTP MCP client transport on undici's `request()` (docs/ARCHITECTURE.md#remote-mcp).
 * The SDK's (v2) `Client` runs over it unchanged; only the HTTP side is ours: no fetch, no web
 * streams, no TextDecoderStream, JSON answers parsed in one go and SSE answers parsed
 * incrementally on raw buffers. It speaks both protocol eras, told apart per message as the
 * SDK's StreamableHTTPClientTransport does: a request whose `_meta` carries the
 * 2026-07-28 envelope (`io.modelcontextprotocol/protocolVersion`) is modern.
 * - Legacy (2025-11-25 and earlier): `Mcp-Session-Id`, `Mcp-Protocol-Version`, the optional GET
 *   stream (405 means none), opened beside `notifications/initialized` when `standaloneStream`
 *   says it is wanted, with the SDK's reconnect schedule, DELETE on terminateSession. A POST's
 *   SSE stream that ends before its answers is resumed with a GET carrying `Last-Event-ID` after
 *   the server's `retry:` delay (2025-11-25 transports, "Resumability and Redelivery"), a bounded
 *   number of times; a stream without event ids cannot be resumed and fails its requests at once
 *   (ResponseStreamEndedError), never at their timeout.
 * - Modern (2026-07-28): no session, no GET stream, no DELETE (the server never hands out a
 *   session, and there is no `notifications/initialized`); `Mcp-Method` and `Mcp-Name` set from
 *   the body, the Client's `Mcp-Param-*` headers (TransportSendOptions.headers) merged, and a
 *   request cancelled by aborting its own HTTP request (`requestSignal`, `hasPerRequestStream`).
 *   No resumption: a stream that ends early fails its request at once.
 * Non-2xx answers throw the SDK's SdkHttpError with the status and body text, which the era
 * probe reads (404 with a session = the session expired, which classify.ts names). OAuth is not
 * supported here. Errors of the request itself are thrown as fetch would throw them
 * (`TypeError('fetch failed', { cause })`) so the stale-socket retry and classification stay
 * the same for both transports.
 */
import { getEventListeners, setMaxListeners } from 'node:events'
import type { Dispatcher } from 'undici'
import { SdkErrorCode, SdkHttpError } from '@modelcontextprotocol/client'
import type { JSONRPCMessage, Transport, TransportSendOptions } from '@modelcontextprotocol/client'
import { encodeHeaderValue } from './mcp-headers.js'
import type { UpstreamAuthorization } from './upstream-auth.js'
import {
  discard, envelopeVersion, failAll, header, isJsonRpcMessage, isMethod, isRequest, NAME_FIELD, progressTokenOf,
  readCapped, readErrorText, requestFailed, RESERVED_HEADERS
} from './lean-wire.js'
import { SseParser } from './sse-parser.js'
import type { SseEvent } from './sse-parser.js'
import { DEFAULT_MAX_MESSAGE_BYTES, isResponseLimitError, MessageTooLargeError } from './response-limits.js'
import type { ResponseBudget } from './response-limits.js'
import {
  CallStreamCount, checkEventWidth, GET_STREAM_MESSAGES_PER_MINUTE, GetStreamWindows, parseAnswer, StreamFloodError, TELL_TIMEOUTS, tellsOnly
} from './stream-bounds.js'
import type { PostTiming } from './stream-bounds.js'

export { MessageTooLargeError, SseParser }
export type { SseEvent }

/** Options of {@link LeanHttpTransport}. */
export interface LeanHttpTransportOptions {
  /** Extra request headers (e.g. Authorization) sent with every request; they win over ours, as in the SDK. */
  headers?: Record<string, string>
  /** The server's OAuth (SPEC 16): the Authorization header of each request, and what a 401 or 403 insufficient_scope means. */
  authorization?: UpstreamAuthorization
  /** Writes the active span's W3C trace context into a request's headers (src/tracing/); absent while tracing is off. */
  traceHeaders?: (headers: Record<string, string>) => void
  /**
   * The dispatcher (an undici Agent or Pool) for `url`. The SSRF guard's throws for a blocked
   * literal address and resolves names at connect time; called for every request.
   */
  dispatcher: (url: URL) => Dispatcher
  /** The error for a 3xx answer: redirects are never followed. */
  redirectError: (status: number) => Error
  /**
   * Largest JSON answer or single SSE event accepted (bytes): reading stops there and the
   * requests it answers fail with MessageTooLargeError. Default DEFAULT_MAX_MESSAGE_BYTES.
   */
  maxMessageBytes?: number
  /**
   * The budget of answer bytes in flight, shared by every connection of the gateway: each body
   * charges what it buffers to `budgetOwner` and gives it back once its message is parsed. A
   * body that cannot grow its charge stops being read; its requests fail with ResponseBudgetError.
   */
  budget?: ResponseBudget | undefined
  /** Whose budget this connection's answers count against (a tenant, a global server). Default `default`. */
  budgetOwner?: string | undefined
  /** GET stream reconnects (SDK defaults: 1000 ms, x1.5, at most 30 s, 2 retries). */
  reconnect?: { initialDelayMs: number, maxDelayMs: number, growFactor: number, maxRetries: number }
  /** Messages the standalone GET stream may carry per minute (GET_STREAM_MESSAGES_PER_MINUTE unless set: tests). */
  getStreamMessagesPerMinute?: number
  /**
   * Legacy servers: GETs with `Last-Event-ID` tried to resume one POST's SSE stream that ended
   * before its answers (each after the server's `retry:` delay, else the reconnect schedule).
   * Default 3.
   */
  maxResumeAttempts?: number
}

/**
 * The server ended a request's response stream before its answer and it cannot be resumed (no
 * event id, the 2026-07-28 era, or the resume attempts ran out). Rides in the `data` of the
 * JSON-RPC error the transport makes for the request (no server can forge it through JSON), so
 * classify.ts can name it.
 */
export class ResponseStreamEndedError extends Error {
  readonly code = 'GW_UPSTREAM_ERROR'
  constructor (message: string) {
    super(message)
    this.name = 'ResponseStreamEndedError'
  }
}

/** One SSE body read for a set of requests: a POST's answer stream, or a GET that resumes one. */
interface StreamRead {
  /** Ids of the requests it answers and that have no answer yet (undefined: the standalone GET stream). */
  pending: Set<string | number> | undefined
  /** The requests are 2026-07-28 ones (never resumed). */
  modern: boolean
  /** Resume attempts already made for these requests. */
  attempt: number
  /** The `retry:` the server last gave for this stream (ms). */
  retryMs: number | undefined
  /** The request's own abort (2026-07-28 cancellation) and stream-end callback. */
  requestSignal: AbortSignal | undefined
  onStreamEnd: (() => void) | undefined
  /** The `_meta.progressToken` of the one request the stream answers: what it carries belongs to that call (onrelated). */
  tag?: string | number | undefined
}

// The output cap in UTF-8 plus room for the raw items a trace keeps (response-limits.ts): a larger
// answer could only be cut afterwards, and holding it is what let a server inflate the gateway.
const DEFAULT_MAX_MESSAGE = DEFAULT_MAX_MESSAGE_BYTES
const DEFAULT_RECONNECT = { initialDelayMs: 1000, maxDelayMs: 30_000, growFactor: 1.5, maxRetries: 2 }
const DEFAULT_RESUME_ATTEMPTS = 3
/** The SDK Transport for streamable HTTP over undici's request(). */
export class LeanHttpTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  /**
   * Sees each request and notification a server sends on an SSE stream before the SDK does, with
   * the stream's tag (the progressToken of the request a POST's stream answers; undefined on the
   * GET stream); true takes the message away from the SDK (remote-mcp/relay.ts).
   */
  onrelated?: (message: JSONRPCMessage, tag: string | number | undefined) => boolean
  /**
   * Whether a legacy session opens the standalone GET stream, asked as `notifications/initialized`
   * goes (the Client knows the server's capabilities by then); absent: always, as the SDK's
   * transport does. The stream is dispatched right after that POST, not after its 202: the
   * 2025-11-25 transport lets a client GET once it holds the session id, and the stream is then
   * open before the client's first request (no list change is missed after the first listing).
   */
  standaloneStream?: () => boolean
  /** One HTTP request per JSON-RPC request: a 2026-07-28 request is cancelled by aborting it. */
  readonly hasPerRequestStream = true

  readonly #url: URL
  readonly #path: string
  readonly #extra: Record<string, string>
  readonly #o: LeanHttpTransportOptions
  readonly #maxBytes: number
  readonly #budget: ResponseBudget | undefined
  readonly #budgetOwner: string
  readonly #reconnect: NonNullable<LeanHttpTransportOptions['reconnect']>
  /** The standalone GET stream's messages in the current minute (across its reconnects). */
  readonly #getWindow: GetStreamWindows
  readonly #maxResume: number
  #abort: AbortController | undefined
  #sessionId: string | undefined
  #protocolVersion: string | undefined
  #serverRetryMs: number | undefined
  #reconnectTimer: NodeJS.Timeout | undefined
  readonly #resumeTimers = new Set<NodeJS.Timeout>()
  /**
   * The open response streams, by the ids of the legacy requests each still waits for: a request
   * the client cancels (notifications/cancelled) is never answered, and a stream left with nothing
   * to wait for is closed instead of held open until the server ends it.
   */
  readonly #waitingFor = new Map<string | number, () => void>()

  constructor (url: URL, options: LeanHttpTransportOptions) {
    this.#url = url
    this.#path = url.pathname + url.search
    this.#o = options
    this.#maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE
    this.#budget = options.budget
    this.#budgetOwner = options.budgetOwner ?? 'default'
    this.#reconnect = options.reconnect ?? DEFAULT_RECONNECT
    this.#getWindow = new GetStreamWindows(options.getStreamMessagesPerMinute ?? GET_STREAM_MESSAGES_PER_MINUTE)
    this.#maxResume = options.maxResumeAttempts ?? DEFAULT_RESUME_ATTEMPTS
    // Lower-case once: our own names are lower-case, so the caller's win without duplicates.
    const extra: Record<string, string> = {}
    for (const [k, v] of Object.entries(options.headers ?? {})) extra[k.toLowerCase()] = v
    this.#extra = extra
  }

  get sessionId (): string | undefined { return this.#sessionId }
  get protocolVersion (): string | undefined { return this.#protocolVersion }
  setProtocolVersion (version: string): void { this.#protocolVersion = version }

  /** Abort listeners on the transport-wide signal (one per request in flight; undici removes its own). */
  abortListenerCount (): number {
    return this.#abort === undefined ? 0 : getEventListeners(this.#abort.signal, 'abort').length
  }

  async start (): Promise<void> {
    if (this.#abort !== undefined) throw new Error('LeanHttpTransport already started')
    this.#abort = new AbortController()
    // One listener per request in flight (undici removes each when its request is done), so
    // the count is bounded by the client's concurrency; Node's warning at 11 is noise here.
    setMaxListeners(0, this.#abort.signal)
  }

  async close (): Promise<void> {
    if (this.#reconnectTimer !== undefined) clearTimeout(this.#reconnectTimer)
    this.#reconnectTimer = undefined
    for (const t of this.#resumeTimers) clearTimeout(t)
    this.#resumeTimers.clear()
    this.#abort?.abort()
    this.onclose?.()
  }

  #headers (accept: string | undefined, json: boolean): Record<string, string> {
    const h: Record<string, string> = {}
    if (this.#sessionId !== undefined) h['mcp-session-id'] = this.#sessionId
    if (this.#protocolVersion !== undefined) h['mcp-protocol-version'] = this.#protocolVersion
    Object.assign(h, this.#extra)
    if (json) h['content-type'] = 'application/json'
    if (accept !== undefined) h.accept = accept
    return h
  }

  async #request (
    method: 'POST' | 'GET' | 'DELETE',
    headers: Record<string, string>,
    body?: string,
    timing: PostTiming = 'call',
    requestSignal?: AbortSignal
  ): Promise<Dispatcher.ResponseData> {
    const auth = this.#o.authorization
    if (auth === undefined) return await this.#dispatch(method, headers, body, timing, requestSignal)
    const send = async (): Promise<{ res: Dispatcher.ResponseData, sent: string | undefined }> => {
      const sent = await auth.header(this.#url)
      if (sent !== undefined) headers.authorization = sent
      else delete headers.authorization
      return { res: await this.#dispatch(method, headers, body, timing, requestSignal), sent }
    }
    let { res, sent } = await send()
    for (const again of [false, true]) {
      if (res.statusCode !== 401 && res.statusCode !== 403) break
      let verdict: 'retry' | 'pass'
      try {
        verdict = await auth.refused(res.statusCode, header(res.headers, 'www-authenticate'), sent, again)
      } catch (err) {
        discard(res.body)
        throw err
      }
      if (verdict === 'pass') break
      discard(res.body)
      ;({ res, sent } = await send())
    }
    return res
  }

  async #dispatch (
    method: 'POST' | 'GET' | 'DELETE',
    headers: Record<string, string>,
    body: string | undefined,
    timing: PostTiming,
    requestSignal: AbortSignal | undefined
  ): Promise<Dispatcher.ResponseData> {
    const own = this.#abort?.signal
    // A 2026-07-28 request has a signal of its own (its cancellation); the transport's closes all.
    const signal = requestSignal === undefined ? own : own === undefined ? requestSignal : AbortSignal.any([own, requestSignal])
    const dispatcher = this.#o.dispatcher(this.#url)
    let res: Dispatcher.ResponseData
    try {
      res = await dispatcher.request({
        origin: this.#url.origin,
        path: this.#path,
        method,
        headers,
        ...(body !== undefined ? { body } : {}),
        ...(signal !== undefined ? { signal } : {}),
        // A long-lived GET stream may be silent for long (liveness is the pool's ping); a POST that only tells is quick.
        ...(timing === 'stream' ? { bodyTimeout: 0 } : timing === 'tell' ? TELL_TIMEOUTS : {})
      })
    } catch (err) {
      throw requestFailed(err)
    }
    if (res.statusCode >= 300 && res.statusCode < 400) {
      discard(res.body)
      throw this.#o.redirectError(res.statusCode)
    }
    return res
  }

  async send (message: JSONRPCMessage | JSONRPCMessage[], options?: TransportSendOptions): Promise<void> {
    const requestSignal = options?.requestSignal
    try {
      const headers = this.#headers('application/json, text/event-stream', true)
      this.#o.traceHeaders?.(headers)
      const version = envelopeVersion(message)
      if (version !== undefined) {
        // 2026-07-28: the headers a server (and any proxy) routes on, derived from the body.
        const m = message as { method: string, params?: Record<string, unknown> }
        headers['mcp-protocol-version'] = version
        headers['mcp-method'] = m.method
        const field = NAME_FIELD[m.method]
        const name = field === undefined ? undefined : m.params?.[field]
        if (typeof name === 'string') headers['mcp-name'] = encodeHeaderValue(name)
        // Never a session on a modern request (there is none: no initialize hands one out).
        delete headers['mcp-session-id']
      }
      if (options?.headers !== undefined) {
        for (const [k, v] of Object.entries(options.headers)) {
          const lower = k.toLowerCase()
          if (!RESERVED_HEADERS.has(lower)) headers[lower] = v
        }
      }
      const posted = this.#request('POST', headers, JSON.stringify(message), tellsOnly(message) ? 'tell' : 'call', requestSignal)
      // Only the GET goes beside notifications/initialized. Its send still settles at the 202, which
      // the Client's connect awaits before any request: over HTTP two POSTs have no order, and real
      // servers refuse a request that arrives before notifications/initialized (the Python SDK's
      // ServerSession; rmcp before 2026-04), although the spec only asks to wait for initialize's answer.
      if (version === undefined && isMethod(message, 'notifications/initialized') && (this.standaloneStream?.() ?? true)) {
        this.#openGetStream(undefined).catch((err: unknown) => this.onerror?.(err as Error))
      }
      const res = await posted
      const sid = version === undefined ? header(res.headers, 'mcp-session-id') : undefined
      if (sid !== undefined && sid !== '') this.#sessionId = sid
      const status = res.statusCode
      if (status < 200 || status >= 300) {
        const text = await readErrorText(res.body)
        // A 2026-07-28 refusal with a JSON-RPC error for this request (-32020 header mismatch,
        // -32022 unsupported version...) is that request's answer, not a transport failure.
        if (version !== undefined && status === 400 && this.#deliverErrorBody(text, message)) return
        const expired = status === 404 && this.#sessionId !== undefined
        throw new SdkHttpError(SdkErrorCode.ClientHttpNotImplemented, `Error POSTing to endpoint: ${expired ? `session expired (HTTP 404) ${text}` : text}`, {
          status,
          text
        })
      }
      if (status === 202) {
        res.body.dump().catch(() => {})
        // A legacy cancellation: the cancelled request will get no answer; its stream is not waited on.
        if (isMethod(message, 'notifications/cancelled')) {
          const cancelled = (message.params as { requestId?: unknown } | undefined)?.requestId
          if (typeof cancelled === 'string' || typeof cancelled === 'number') this.#waitingFor.get(cancelled)?.()
        }
        return
      }
      const messages = Array.isArray(message) ? message : [message]
      const ids = new Set<string | number>()
      for (const m of messages) if (isRequest(m)) ids.add((m as { id: string | number }).id)
      if (ids.size === 0) {
        res.body.dump().catch(() => {})
        return
      }
      const contentType = header(res.headers, 'content-type') ?? ''
      const semi = contentType.indexOf(';')
      const essence = (semi === -1 ? contentType : contentType.slice(0, semi)).trim().toLowerCase()
      if (essence === 'application/json') {
        const charge = this.#budget?.charge(this.#budgetOwner)
        try {
          const data: unknown = parseAnswer((await readCapped(res.body, this.#maxBytes, charge)).toString('utf8'))
          const list = Array.isArray(data) ? data as unknown[] : [data]
          for (const m of list) {
            if (!isJsonRpcMessage(m)) throw new Error('The MCP server answered with something that is not a JSON-RPC message')
          }
          for (const m of list) this.onmessage?.(m as JSONRPCMessage)
        } finally {
          charge?.release()
        }
      } else if (essence === 'text/event-stream') {
        this.#consumeSse(res.body, {
          pending: ids,
          modern: version !== undefined,
          attempt: 0,
          retryMs: undefined,
          requestSignal,
          onStreamEnd: options?.onRequestStreamEnd,
          tag: progressTokenOf(message)
        })
      } else {
        discard(res.body)
        throw new SdkHttpError(SdkErrorCode.ClientHttpUnexpectedContent, `Unexpected content type: ${contentType}`, { status, contentType })
      }
    } catch (err) {
      // A cancelled 2026-07-28 request: the Client already settled it; nothing to report.
      if (requestSignal?.aborted !== true) this.onerror?.(err as Error)
      throw err
    }
  }

  /** Delivers a 400 body that is a JSON-RPC error answering one of `sent`'s requests; false if it is not one. */
  #deliverErrorBody (text: string, sent: JSONRPCMessage | JSONRPCMessage[]): boolean {
    let parsed: unknown
    try {
      parsed = JSON.parse(text)
    } catch {
      return false
    }
    if (!isJsonRpcMessage(parsed) || !('error' in parsed)) return false
    const id = (parsed as { id?: unknown }).id
    const list = Array.isArray(sent) ? sent : [sent]
    if (!list.some((m) => isRequest(m) && (m as { id: unknown }).id === id)) return false
    this.onmessage?.(parsed)
    return true
  }

  /**
   * Reads an SSE body. A POST's stream (`read.pending` = the requests it answers) that ends or
   * breaks before all its answers is resumed (legacy, with event ids) or fails its requests at
   * once; the GET stream (`pending` undefined) is reopened on the SDK's schedule.
   */
  #consumeSse (body: Dispatcher.ResponseData['body'], read: StreamRead): void {
    const pending = read.pending
    // A GET that resumes a POST's stream is ours to end once every answer arrived.
    const resuming = read.attempt > 0
    // A request's stream bounds its messages and requests; the standalone GET stream, which lives as long as the session, per minute.
    const count = pending === undefined ? this.#getWindow : new CallStreamCount()
    const parser = new SseParser((ev) => {
      // Priming events (an id and an empty data line) carry no message.
      if (ev.event !== 'message' || ev.data === '') return
      // Each bound is thrown out of the parser's push, and the body's reader ends the stream with it (finish below): a
      // request's stream fails its requests; the standalone stream, past its minute's messages, reopens after the minute.
      count.message()
      checkEventWidth(ev.data)
      let m: unknown
      try {
        m = JSON.parse(ev.data)
      } catch (err) {
        this.onerror?.(err as Error)
        return
      }
      if (!isJsonRpcMessage(m)) {
        this.onerror?.(new Error('The MCP server sent an event that is not a JSON-RPC message'))
        return
      }
      if (isRequest(m)) count.request()
      if (pending !== undefined && 'id' in m && !('method' in m)) {
        pending.delete(m.id as string | number)
        this.#waitingFor.delete(m.id as string | number)
      } else if (!('id' in m) && count.dropsNotifications()) {
        // A notification past the bound (progress, log messages) is dropped: it only tells, and each cost ~50-65 us.
        return
      } else if ('method' in m && this.onrelated?.(m, read.tag) === true) return
      this.onmessage?.(m)
    }, (ms) => { read.retryMs = ms; this.#serverRetryMs = ms }, this.#maxBytes)
    // What this body holds of the budget: its unfinished event, given back as events are parsed.
    const charge = this.#budget?.charge(this.#budgetOwner)
    let done = false
    const forget = (id: string | number): void => {
      if (pending === undefined || !pending.delete(id) || pending.size > 0 || done) return
      finish(undefined)
      discard(body)
    }
    for (const id of pending ?? []) this.#waitingFor.set(id, () => { forget(id) })
    const finish = (err: Error | undefined): void => {
      if (done) return
      done = true
      for (const id of pending ?? []) this.#waitingFor.delete(id)
      parser.end()
      charge?.release()
      if (this.#abort?.signal.aborted === true || read.requestSignal?.aborted === true) return
      if (pending !== undefined) {
        if (isResponseLimitError(err)) {
          // The answer was there but too large, or there was no room to hold it: fail its
          // requests now rather than at their timeout. The error object rides in `data` (a
          // server cannot forge it: it never went through JSON), so classify.ts knows the cause.
          this.onerror?.(err)
          failAll(pending, err, (m) => this.onmessage?.(m))
          return
        }
        if (pending.size === 0) return
        // A stream being resumed is not an error (a server may end streams on purpose, 2025-11-25
        // "polling"); one that cannot be is reported, which makes the pool check the server.
        if (this.#resumeOrFail(read, parser.lastEventId)) return
        if (err !== undefined) this.onerror?.(new Error(`SSE stream disconnected: ${err.message}`))
        else this.onerror?.(new Error('SSE stream ended before the response'))
        return
      }
      if (err instanceof StreamFloodError) {
        this.onerror?.(err)
        this.#scheduleReconnect(parser.lastEventId, 0, err.retryInMs)
        return
      }
      if (err !== undefined) this.onerror?.(new Error(`SSE stream disconnected: ${err.message}`))
      this.#scheduleReconnect(parser.lastEventId, 0)
    }
    body.on('data', (chunk: Buffer) => {
      if (done) return
      try {
        // Room for the chunk before it is buffered, then what is still held once the events it
        // completed were dispatched (each parsed as soon as its blank line arrives).
        charge?.hold(parser.heldBytes + chunk.length)
        parser.push(chunk)
        charge?.hold(parser.heldBytes)
      } catch (err) {
        discard(body)
        finish(err as Error)
        return
      }
      if (resuming && pending !== undefined && pending.size === 0) {
        // Every answer the GET was opened for arrived: the stream is not ours to keep.
        finish(undefined)
        discard(body)
      }
    })
    body.on('end', () => { finish(undefined) })
    body.on('error', (err) => { finish(err) })
  }

  /**
   * A POST's stream (or a GET resuming it) ended with `read.pending` unanswered: a legacy stream
   * with an event id is resumed by a GET with `Last-Event-ID` after the server's `retry:` delay
   * (true); anything else fails the requests at once (false).
   */
  #resumeOrFail (read: StreamRead, lastEventId: string | undefined): boolean {
    const pending = read.pending as Set<string | number>
    const fail = (why: string): false => {
      failAll(pending, new ResponseStreamEndedError(why), (m) => this.onmessage?.(m))
      read.onStreamEnd?.()
      return false
    }
    if (read.modern) return fail('The MCP server closed the response stream before answering')
    if (lastEventId === undefined) return fail('The MCP server closed the response stream before answering and gave no event id to resume it from')
    if (read.attempt >= this.#maxResume) {
      return fail(`The MCP server closed the response stream before answering, and ${read.attempt} attempts to resume it (Last-Event-ID) did not bring the answer`)
    }
    const r = this.#reconnect
    const delay = read.retryMs ?? this.#serverRetryMs ?? Math.min(r.initialDelayMs * Math.pow(r.growFactor, read.attempt), r.maxDelayMs)
    const next: StreamRead = { ...read, attempt: read.attempt + 1 }
    const timer = setTimeout(() => {
      this.#resumeTimers.delete(timer)
      if (this.#abort?.signal.aborted !== false) return
      this.#resume(next, lastEventId).catch((err: unknown) => {
        if (this.#abort?.signal.aborted !== false) return
        const message = err instanceof Error ? err.message : String(err)
        this.onerror?.(new Error(`Failed to resume the SSE stream: ${message}`))
        if (err instanceof SdkHttpError) fail(`The MCP server closed the response stream before answering and refused to resume it (${message})`)
        else this.#resumeOrFail(next, lastEventId)
      })
    }, delay)
    timer.unref()
    this.#resumeTimers.add(timer)
    return true
  }

  /** GET with Last-Event-ID: the server replays what followed that event on the stream it belonged to. */
  async #resume (read: StreamRead, lastEventId: string): Promise<void> {
    const headers = this.#headers('text/event-stream', false)
    headers['last-event-id'] = lastEventId
    const res = await this.#request('GET', headers, undefined, 'stream')
    if (res.statusCode < 200 || res.statusCode >= 300) {
      res.body.dump().catch(() => {})
      throw new SdkHttpError(SdkErrorCode.ClientHttpFailedToOpenStream, `HTTP ${res.statusCode}`, { status: res.statusCode })
    }
    this.#consumeSse(res.body, read)
  }

  async #openGetStream (lastEventId: string | undefined): Promise<void> {
    const headers = this.#headers('text/event-stream', false)
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId
    const res = await this.#request('GET', headers, undefined, 'stream')
    if (res.statusCode < 200 || res.statusCode >= 300) {
      res.body.dump().catch(() => {})
      if (res.statusCode === 405) return
      throw new SdkHttpError(SdkErrorCode.ClientHttpFailedToOpenStream, `Failed to open SSE stream: HTTP ${res.statusCode}`, { status: res.statusCode })
    }
    this.#consumeSse(res.body, { pending: undefined, modern: false, attempt: 0, retryMs: undefined, requestSignal: undefined, onStreamEnd: undefined })
  }

  /** Opens the GET stream again on the reconnect schedule (the server's `retry:` first), not before `minDelayMs`. */
  #scheduleReconnect (lastEventId: string | undefined, attempt: number, minDelayMs = 0): void {
    if (this.#abort?.signal.aborted !== false) return
    const r = this.#reconnect
    if (attempt >= r.maxRetries) {
      this.onerror?.(new Error(`Maximum reconnection attempts (${r.maxRetries}) exceeded.`))
      return
    }
    const delay = Math.max(minDelayMs, this.#serverRetryMs ?? Math.min(r.initialDelayMs * Math.pow(r.growFactor, attempt), r.maxDelayMs))
    this.#reconnectTimer = setTimeout(() => {
      this.#reconnectTimer = undefined
      this.#openGetStream(lastEventId).catch((err: unknown) => {
        if (this.#abort?.signal.aborted !== false) return
        this.onerror?.(new Error(`Failed to reconnect SSE stream: ${err instanceof Error ? err.message : String(err)}`))
        this.#scheduleReconnect(lastEventId, attempt + 1)
      })
    }, delay)
    this.#reconnectTimer.unref()
  }

  /** Ends the session (DELETE); 405 means the server does not support it. No session (2026-07-28): nothing to do. */
  async terminateSession (): Promise<void> {
    if (this.#sessionId === undefined) return
    try {
      const res = await this.#request('DELETE', this.#headers(undefined, false))
      res.body.dump().catch(() => {})
      if ((res.statusCode < 200 || res.statusCode >= 300) && res.statusCode !== 405) {
        throw new SdkHttpError(SdkErrorCode.ClientHttpFailedToTerminateSession, `Failed to terminate session: HTTP ${res.statusCode}`, { status: res.statusCode })
      }
      this.#sessionId = undefined
    } catch (err) {
      this.onerror?.(err as Error)
      throw err
    }
  }
}
