/**
 * A streamable-HTTP MCP client transport on undici's `request()` (docs/ARCHITECTURE.md#remote-mcp).
 * The SDK's `Client` runs over it unchanged; only the HTTP side is ours: no fetch, no web
 * streams, no TextDecoderStream, JSON answers parsed in one go and SSE answers parsed
 * incrementally on raw buffers. Behaviour follows the SDK's StreamableHTTPClientTransport
 * (1.x): headers, `Mcp-Session-Id`, `Mcp-Protocol-Version`, the optional GET stream after
 * `notifications/initialized` (405 means none) with the same reconnect schedule, DELETE on
 * terminateSession, and StreamableHTTPError for non-2xx answers (404 = the session expired,
 * which classify.ts turns into its own message). Resumption tokens and OAuth are not supported
 * (the gateway uses neither). Errors of the request itself are thrown as fetch would throw them
 * (`TypeError('fetch failed', { cause })`) so the stale-socket retry and classification stay
 * the same for both transports.
 */
import { getEventListeners, setMaxListeners } from 'node:events'
import type { Dispatcher } from 'undici'
import { StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport, TransportSendOptions } from '@modelcontextprotocol/sdk/shared/transport.js'
import { ErrorCode } from '@modelcontextprotocol/sdk/types.js'
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js'
import { EgressBlockedError } from '../egress/ssrf.js'
import { DEFAULT_MAX_MESSAGE_BYTES, isResponseLimitError, MessageTooLargeError } from './response-limits.js'
import type { ResponseBudget, ResponseCharge } from './response-limits.js'

export { MessageTooLargeError }

/** Options of {@link LeanHttpTransport}. */
export interface LeanHttpTransportOptions {
  /** Extra request headers (e.g. Authorization) sent with every request; they win over ours, as in the SDK. */
  headers?: Record<string, string>
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
}

// The output cap in UTF-8 plus room for the raw items a trace keeps (response-limits.ts): a larger
// answer could only be cut afterwards, and holding it is what let a server inflate the gateway.
const DEFAULT_MAX_MESSAGE = DEFAULT_MAX_MESSAGE_BYTES
const DEFAULT_RECONNECT = { initialDelayMs: 1000, maxDelayMs: 30_000, growFactor: 1.5, maxRetries: 2 }
const ERROR_TEXT_CAP = 4096

/** One dispatched SSE event. */
export interface SseEvent { event: string, data: string, id: string | undefined }

/**
 * Incremental parser of the text/event-stream format (WHATWG HTML, server-sent events) on raw
 * buffers: lines end in LF, CRLF or CR (also split across chunks); only complete lines are
 * decoded (a line terminator never occurs inside a UTF-8 sequence, so decoding per line is
 * safe). An event (data plus the unfinished line) larger than `maxBytes` throws.
 */
export class SseParser {
  readonly #onEvent: (event: SseEvent) => void
  readonly #onRetry: (ms: number) => void
  readonly #maxBytes: number
  #pending: Buffer[] = []
  #pendingBytes = 0
  #skipLf = false
  #start = true
  #data: string[] = []
  #dataBytes = 0
  #event = ''
  #id: string | undefined
  #lastId: string | undefined

  constructor (onEvent: (event: SseEvent) => void, onRetry: (ms: number) => void = () => {}, maxBytes = DEFAULT_MAX_MESSAGE) {
    this.#onEvent = onEvent
    this.#onRetry = onRetry
    this.#maxBytes = maxBytes
  }

  /** The id of the last event (for Last-Event-ID on a reconnect). */
  get lastEventId (): string | undefined { return this.#lastId }

  /** Bytes of the event under way held in memory (its data lines and the unfinished line). */
  get heldBytes (): number { return this.#pendingBytes + this.#dataBytes }

  push (chunk: Buffer): void {
    let pos = 0
    const len = chunk.length
    if (this.#skipLf && len > 0) {
      if (chunk[0] === 0x0a) pos = 1
      this.#skipLf = false
    }
    // Next LF and CR at or after pos; -1 once there is none left in this chunk.
    let lf = chunk.indexOf(0x0a, pos)
    let cr = chunk.indexOf(0x0d, pos)
    while (pos < len) {
      if (lf !== -1 && lf < pos) lf = chunk.indexOf(0x0a, pos)
      if (cr !== -1 && cr < pos) cr = chunk.indexOf(0x0d, pos)
      let end: number
      let next: number
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        end = cr
        if (cr + 1 < len) next = chunk[cr + 1] === 0x0a ? cr + 2 : cr + 1
        else { next = cr + 1; this.#skipLf = true }
      } else if (lf !== -1) {
        end = lf
        next = lf + 1
      } else {
        break
      }
      if (this.#pending.length > 0) {
        // A line begun in earlier chunks: joined once, when its end arrives (no copying per chunk).
        this.#pending.push(chunk.subarray(pos, end))
        const line = Buffer.concat(this.#pending)
        this.#pending = []
        this.#pendingBytes = 0
        this.#line(line, 0, line.length)
      } else {
        this.#line(chunk, pos, end)
      }
      pos = next
    }
    if (pos < len) {
      this.#pendingBytes += len - pos
      if (this.#pendingBytes + this.#dataBytes > this.#maxBytes) throw new MessageTooLargeError(this.#maxBytes)
      // A copy: the chunk may be a view into the socket's read buffer.
      this.#pending.push(Buffer.from(chunk.subarray(pos)))
    }
  }

  /** The stream ended: an unfinished event is dropped, as the spec says. */
  end (): void {
    this.#pending = []
    this.#pendingBytes = 0
    this.#data = []
    this.#dataBytes = 0
    this.#event = ''
  }

  #line (buf: Buffer, start: number, end: number): void {
    if (this.#start) {
      // A UTF-8 byte order mark may open the stream (and is not part of the first field name).
      this.#start = false
      if (end - start >= 3 && buf[start] === 0xef && buf[start + 1] === 0xbb && buf[start + 2] === 0xbf) start += 3
    }
    if (start === end) { this.#dispatch(); return }
    if (buf[start] === 0x3a) return // ':' comment
    const colon = buf.indexOf(0x3a, start)
    let name: string
    let value: string
    if (colon === -1 || colon >= end) {
      name = buf.toString('latin1', start, end)
      value = ''
    } else {
      name = buf.toString('latin1', start, colon)
      const from = buf[colon + 1] === 0x20 ? colon + 2 : colon + 1
      value = from >= end ? '' : buf.toString('utf8', from, end)
    }
    switch (name) {
      case 'data':
        this.#dataBytes += end - start
        if (this.#dataBytes > this.#maxBytes) throw new MessageTooLargeError(this.#maxBytes)
        this.#data.push(value)
        break
      case 'event': this.#event = value; break
      case 'id': if (!value.includes('\0')) this.#id = value; break
      case 'retry': if (/^\d+$/.test(value)) this.#onRetry(Number(value)); break
    }
  }

  #dispatch (): void {
    if (this.#id !== undefined) this.#lastId = this.#id
    const id = this.#id
    this.#id = undefined
    if (this.#data.length === 0) { this.#event = ''; return }
    const data = this.#data.length === 1 ? this.#data[0] as string : this.#data.join('\n')
    const event = this.#event === '' ? 'message' : this.#event
    this.#data = []
    this.#dataBytes = 0
    this.#event = ''
    this.#onEvent({ event, data, id })
  }
}

/** A cheap structural check instead of the SDK's zod schema: the Client checks results itself. */
function isJsonRpcMessage (value: unknown): value is JSONRPCMessage {
  if (typeof value !== 'object' || value === null) return false
  const m = value as Record<string, unknown>
  if (m.jsonrpc !== '2.0') return false
  if (typeof m.method === 'string') return true
  return ('result' in m || 'error' in m) && (typeof m.id === 'string' || typeof m.id === 'number')
}

function isRequest (m: JSONRPCMessage): boolean {
  return 'method' in m && 'id' in m && m.id !== undefined
}

function header (headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const v = headers[name]
  return Array.isArray(v) ? v[0] : v
}

/** As fetch reports a failed request, so classify.ts (stale sockets) treats both transports alike. */
function requestFailed (err: unknown): Error {
  if (err instanceof EgressBlockedError) return err
  const cause = (err as { cause?: unknown }).cause
  if (cause instanceof EgressBlockedError) return cause
  const name = (err as { name?: unknown }).name
  if (name === 'AbortError') return err as Error
  return new TypeError('fetch failed', { cause: err })
}

/**
 * Reads a whole body of at most `cap` bytes, charging what it holds to `charge` as it grows (the
 * caller releases it once the body is parsed). Past either bound the body is destroyed: the
 * rest is never read.
 */
async function readCapped (body: Dispatcher.ResponseData['body'], cap: number, charge: ResponseCharge | undefined): Promise<Buffer> {
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    try {
      if (size > cap) throw new MessageTooLargeError(cap)
      charge?.hold(size)
    } catch (err) {
      body.destroy()
      throw err
    }
    chunks.push(chunk as Buffer)
  }
  return chunks.length === 1 ? chunks[0] as Buffer : Buffer.concat(chunks, size)
}

async function readErrorText (body: Dispatcher.ResponseData['body']): Promise<string> {
  let text = ''
  try {
    for await (const chunk of body) {
      text += (chunk as Buffer).toString('utf8')
      // Leaving the loop destroys the body: an error page is never read past the cap.
      if (text.length >= ERROR_TEXT_CAP) break
    }
  } catch {}
  return text.slice(0, ERROR_TEXT_CAP)
}

/** The SDK Transport for streamable HTTP over undici's request(). */
export class LeanHttpTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void

  readonly #url: URL
  readonly #path: string
  readonly #extra: Record<string, string>
  readonly #o: LeanHttpTransportOptions
  readonly #maxBytes: number
  readonly #budget: ResponseBudget | undefined
  readonly #budgetOwner: string
  readonly #reconnect: NonNullable<LeanHttpTransportOptions['reconnect']>
  #abort: AbortController | undefined
  #sessionId: string | undefined
  #protocolVersion: string | undefined
  #serverRetryMs: number | undefined
  #reconnectTimer: NodeJS.Timeout | undefined

  constructor (url: URL, options: LeanHttpTransportOptions) {
    this.#url = url
    this.#path = url.pathname + url.search
    this.#o = options
    this.#maxBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE
    this.#budget = options.budget
    this.#budgetOwner = options.budgetOwner ?? 'default'
    this.#reconnect = options.reconnect ?? DEFAULT_RECONNECT
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

  async #request (method: 'POST' | 'GET' | 'DELETE', headers: Record<string, string>, body?: string, streaming = false): Promise<Dispatcher.ResponseData> {
    const signal = this.#abort?.signal
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
        // A long-lived GET stream may be silent for long; liveness is the pool's ping.
        ...(streaming ? { bodyTimeout: 0 } : {})
      })
    } catch (err) {
      throw requestFailed(err)
    }
    if (res.statusCode >= 300 && res.statusCode < 400) {
      res.body.destroy()
      throw this.#o.redirectError(res.statusCode)
    }
    return res
  }

  async send (message: JSONRPCMessage | JSONRPCMessage[], _options?: TransportSendOptions): Promise<void> {
    try {
      const res = await this.#request('POST', this.#headers('application/json, text/event-stream', true), JSON.stringify(message))
      const sid = header(res.headers, 'mcp-session-id')
      if (sid !== undefined && sid !== '') this.#sessionId = sid
      const status = res.statusCode
      if (status < 200 || status >= 300) {
        const text = await readErrorText(res.body)
        throw new StreamableHTTPError(status, `Error POSTing to endpoint: ${status === 404 && this.#sessionId !== undefined ? `session expired (HTTP 404) ${text}` : text}`)
      }
      if (status === 202) {
        res.body.dump().catch(() => {})
        if (!Array.isArray(message) && 'method' in message && message.method === 'notifications/initialized') {
          this.#openGetStream(undefined).catch((err: unknown) => this.onerror?.(err as Error))
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
          const data: unknown = JSON.parse((await readCapped(res.body, this.#maxBytes, charge)).toString('utf8'))
          const list = Array.isArray(data) ? data as unknown[] : [data]
          for (const m of list) {
            if (!isJsonRpcMessage(m)) throw new Error('The MCP server answered with something that is not a JSON-RPC message')
          }
          for (const m of list) this.onmessage?.(m as JSONRPCMessage)
        } finally {
          charge?.release()
        }
      } else if (essence === 'text/event-stream') {
        this.#consumeSse(res.body, ids)
      } else {
        res.body.destroy()
        throw new StreamableHTTPError(-1, `Unexpected content type: ${contentType}`)
      }
    } catch (err) {
      this.onerror?.(err as Error)
      throw err
    }
  }

  /**
   * Reads an SSE body. A POST's stream (`ids` = the requests it answers) that ends or breaks
   * before all its answers reports an error (the SDK would not resume it either: no event ids);
   * the GET stream (`ids` undefined) is reopened on the SDK's schedule.
   */
  #consumeSse (body: Dispatcher.ResponseData['body'], ids: Set<string | number> | undefined): void {
    const pending = ids === undefined ? undefined : new Set(ids)
    const parser = new SseParser((ev) => {
      if (ev.event !== 'message') return
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
      if (pending !== undefined && 'id' in m && !('method' in m)) pending.delete(m.id as string | number)
      this.onmessage?.(m)
    }, (ms) => { this.#serverRetryMs = ms }, this.#maxBytes)
    // What this body holds of the budget: its unfinished event, given back as events are parsed.
    const charge = this.#budget?.charge(this.#budgetOwner)
    let done = false
    const finish = (err: Error | undefined): void => {
      if (done) return
      done = true
      parser.end()
      charge?.release()
      if (this.#abort?.signal.aborted === true) return
      if (pending !== undefined) {
        if (isResponseLimitError(err)) {
          // The answer was there but too large, or there was no room to hold it: fail its
          // requests now rather than at their timeout. The error object rides in `data` (a
          // server cannot forge it: it never went through JSON), so classify.ts knows the cause.
          this.onerror?.(err)
          for (const id of pending) this.onmessage?.({ jsonrpc: '2.0', id, error: { code: ErrorCode.InternalError, message: err.message, data: err } })
          return
        }
        if (err !== undefined) this.onerror?.(new Error(`SSE stream disconnected: ${err.message}`))
        else if (pending.size > 0) this.onerror?.(new Error('SSE stream ended before the response'))
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
        body.destroy()
        finish(err as Error)
      }
    })
    body.on('end', () => { finish(undefined) })
    body.on('error', (err) => { finish(err) })
  }

  async #openGetStream (lastEventId: string | undefined): Promise<void> {
    const headers = this.#headers('text/event-stream', false)
    if (lastEventId !== undefined) headers['last-event-id'] = lastEventId
    const res = await this.#request('GET', headers, undefined, true)
    if (res.statusCode < 200 || res.statusCode >= 300) {
      res.body.dump().catch(() => {})
      if (res.statusCode === 405) return
      throw new StreamableHTTPError(res.statusCode, `Failed to open SSE stream: HTTP ${res.statusCode}`)
    }
    this.#consumeSse(res.body, undefined)
  }

  #scheduleReconnect (lastEventId: string | undefined, attempt: number): void {
    if (this.#abort?.signal.aborted !== false) return
    const r = this.#reconnect
    if (attempt >= r.maxRetries) {
      this.onerror?.(new Error(`Maximum reconnection attempts (${r.maxRetries}) exceeded.`))
      return
    }
    const delay = this.#serverRetryMs ?? Math.min(r.initialDelayMs * Math.pow(r.growFactor, attempt), r.maxDelayMs)
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

  /** Ends the session (DELETE); 405 means the server does not support it. */
  async terminateSession (): Promise<void> {
    if (this.#sessionId === undefined) return
    try {
      const res = await this.#request('DELETE', this.#headers(undefined, false))
      res.body.dump().catch(() => {})
      if ((res.statusCode < 200 || res.statusCode >= 300) && res.statusCode !== 405) {
        throw new StreamableHTTPError(res.statusCode, `Failed to terminate session: HTTP ${res.statusCode}`)
      }
      this.#sessionId = undefined
    } catch (err) {
      this.onerror?.(err as Error)
      throw err
    }
  }
}
