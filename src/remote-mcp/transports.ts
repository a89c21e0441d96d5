import { getEventListeners, setMaxListeners } from 'node:events'
import type { Readable } from 'node:stream'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { getDefaultEnvironment, StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { FetchLike, Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { Agent, type Dispatcher } from 'undici'
import { EgressBlockedError } from '../egress/ssrf.js'
import { LeanHttpTransport } from './lean-http-transport.js'
import { DEFAULT_MAX_MESSAGE_BYTES, MessageTooLargeError } from './response-limits.js'
import type { ResponseLimits } from './response-limits.js'
import { silentLogger } from '../logger.js'
import type { Logger } from '../logger.js'
import type { GwCode } from '../errors.js'

/** Remote MCP transports the gateway speaks (docs/ARCHITECTURE.md#registry; aliases are normalised by the registry). */
export const CONNECT_TYPES = ['streamable_http', 'sse', 'stdio'] as const
export type ConnectType = typeof CONNECT_TYPES[number]

/**
 * What the pool needs to reach one MCP server. Secrets (header and env values) are already
 * decrypted; nothing here is ever logged or put into an error message.
 */
export interface ConnectSpec {
  type: ConnectType
  /** http(s) URL of the MCP endpoint (streamable_http) or of the SSE stream (sse). */
  url?: string
  /** Extra request headers (e.g. Authorization) sent with every HTTP request. */
  headers?: Record<string, string>
  /** stdio: the executable to spawn (no shell). */
  command?: string
  args?: string[]
  /** stdio: added to the SDK's minimal default environment; the gateway's own env is never passed. */
  env?: Record<string, string>
  cwd?: string
  /** Default deadline for tools/call on this server (the caller may pass a lower one). */
  timeoutMs?: number
}

/** Options for {@link createTransport}. */
export interface CreateTransportOptions {
  /**
   * fetch used for every HTTP request of the transport (the SSRF guard supplies one that checks
   * the address actually dialled). Defaults to the global fetch.
   */
  fetch?: FetchLike
  logger?: Logger
  /** Label put into log lines (the pool key); never the URL's credentials or headers. */
  label?: string
  /** Bytes of a stdio child's stderr copied into the logs; the rest is drained and dropped. */
  stderrCapBytes?: number
  /**
   * streamable_http: the SDK's fetch-based transport or our own on undici request()
   * (MCP_HTTP_TRANSPORT; lean-http-transport.ts). Default 'sdk'. Lean needs a dispatcher with
   * the same egress guarantees as `fetch`: the SSRF guard's (`fetch.dispatcherFor`), or the
   * plain shared agent when no fetch is given; a custom fetch without one keeps the SDK's.
   */
  httpTransport?: HttpTransportKind
  /**
   * Bounds on the answers read (response-limits.ts): the largest message, and the budget of
   * answers in flight with the owner this connection counts against. Lean transport: reading
   * stops at the bound and the requests fail with the limit's error. SDK transports (sse, and
   * streamable_http with `sdk`): the body stream is cut at the bound (see limitResponses).
   * stdio: one line at most maxMessageBytes (the SDK then closes the connection); no budget.
   * Default: DEFAULT_MAX_MESSAGE_BYTES, no budget.
   */
  limits?: ResponseLimits
}

export const HTTP_TRANSPORT_KINDS = ['sdk', 'lean'] as const
export type HttpTransportKind = typeof HTTP_TRANSPORT_KINDS[number]

// Operator (global) servers without the SSRF guard: one keep-alive agent for the process, a
// pool per origin, no pipelining (a slow call must not hold up the next one on the socket),
// connections bounded per origin (each session's GET stream holds one while open).
let plainAgent: Agent | undefined
function plainDispatcher (): Dispatcher {
  plainAgent ??= new Agent({ pipelining: 1, connections: 1024, keepAliveTimeout: 4000 })
  return plainAgent
}

function leanDispatcher (fetchFn: FetchLike | undefined): ((url: URL) => Dispatcher) | undefined {
  if (fetchFn === undefined) return plainDispatcher
  const dispatcherFor = (fetchFn as { dispatcherFor?: unknown }).dispatcherFor
  return typeof dispatcherFor === 'function' ? dispatcherFor as (url: URL) => Dispatcher : undefined
}

/** A transport plus what the pool needs to manage it. */
export interface TransportHandle {
  transport: Transport
  type: ConnectType
  /** stdio: the child's pid once started, else null. */
  pid: () => number | null
  /**
   * Abort listeners currently registered on the transport-wide AbortSignal the SDK passes to
   * fetch (0 for stdio). Stays bounded by the number of in-flight requests; see isolateAbortSignals.
   */
  abortListenerCount: () => number
}

export class ConnectSpecError extends Error {
  readonly code = 'GW_BAD_MCP_CONFIG' satisfies GwCode
  constructor (message: string) {
    super(message)
    this.name = 'ConnectSpecError'
  }
}

const DEFAULT_STDERR_CAP = 64 * 1024

/**
 * Builds the SDK client transport for `spec`. Throws ConnectSpecError for a spec that cannot
 * work (missing url or command, non-http URL); the registry validates earlier, this is the
 * last line.
 */
export function createTransport (spec: ConnectSpec, options: CreateTransportOptions = {}): TransportHandle {
  const logger = options.logger ?? silentLogger
  const label = options.label ?? spec.type
  const limits: ResponseLimits = options.limits ?? { maxMessageBytes: DEFAULT_MAX_MESSAGE_BYTES }
  if (spec.type === 'stdio') return createStdio(spec, logger, label, options.stderrCapBytes ?? DEFAULT_STDERR_CAP, limits.maxMessageBytes)
  if (spec.type !== 'streamable_http' && spec.type !== 'sse') {
    throw new ConnectSpecError(`Unknown MCP transport type: ${String(spec.type)}`)
  }
  const url = parseHttpUrl(spec.url)
  const dispatcher = spec.type === 'streamable_http' && options.httpTransport === 'lean' ? leanDispatcher(options.fetch) : undefined
  if (dispatcher !== undefined) {
    const transport = new LeanHttpTransport(url, {
      headers: { ...(spec.headers ?? {}) },
      dispatcher,
      maxMessageBytes: limits.maxMessageBytes,
      budget: limits.budget,
      budgetOwner: limits.owner,
      // The same refusal as the SDK path's: the SSRF guard's own error for tenant servers.
      redirectError: options.fetch !== undefined
        ? (status) => new EgressBlockedError('redirect', `refused to follow a redirect (HTTP ${status}) from ${url.host}`)
        : (status) => new RedirectRefusedError(status)
    })
    return { transport, type: spec.type, pid: () => null, abortListenerCount: () => transport.abortListenerCount() }
  }
  const isolated = isolateAbortSignals(refuseRedirects(options.fetch ?? globalThis.fetch))
  const bounded = limitResponses(isolated.fetch, limits)
  // redirect 'manual' makes the SDK hand the POSTs to our fetch unchanged (it would otherwise
  // follow same-origin redirects itself); refuseRedirects then fails any 3xx, including on the
  // GET stream, because redirects are never followed (docs/ARCHITECTURE.md#egress).
  const requestInit: RequestInit = { headers: { ...(spec.headers ?? {}) }, redirect: 'manual' }
  const transport = spec.type === 'streamable_http'
    ? new StreamableHTTPClientTransport(url, { requestInit, fetch: bounded })
    : new SSEClientTransport(url, { requestInit, fetch: bounded })
  return { transport, type: spec.type, pid: () => null, abortListenerCount: isolated.sharedListenerCount }
}

function parseHttpUrl (raw: string | undefined): URL {
  if (raw === undefined || raw === '') throw new ConnectSpecError('An HTTP MCP server needs a url')
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ConnectSpecError('The MCP server url is not a valid URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConnectSpecError(`The MCP server url must be http or https, not ${url.protocol}`)
  }
  return url
}

function createStdio (spec: ConnectSpec, logger: Logger, label: string, capBytes: number, maxMessageBytes: number): TransportHandle {
  if (spec.command === undefined || spec.command === '') throw new ConnectSpecError('A stdio MCP server needs a command')
  const transport = new StdioClientTransport({
    command: spec.command,
    args: spec.args ?? [],
    // Only the SDK's minimal allow-list (HOME, PATH, ...) plus the server's own config: the
    // gateway's env holds SECRETS_KEY, API keys and Redis credentials.
    env: { ...getDefaultEnvironment(), ...(spec.env ?? {}) },
    // Piped, never inherited: a chatty or hostile child must not write into the gateway's logs
    // unbounded, and an unread pipe would block the child once the kernel buffer fills.
    stderr: 'pipe',
    // One line (message) at most this long: past it the SDK drops the buffer and closes the
    // connection (the child is stopped, its calls fail, the next call starts it again).
    maxBufferSize: maxMessageBytes,
    ...(spec.cwd !== undefined ? { cwd: spec.cwd } : {})
  })
  const stderr = transport.stderr as Readable | null
  if (stderr !== null) drainStderr(stderr, logger, label, capBytes)
  return { transport, type: 'stdio', pid: () => transport.pid, abortListenerCount: () => 0 }
}

/** Logs a child's stderr line by line up to `capBytes`, then keeps draining silently. */
function drainStderr (stream: Readable, logger: Logger, label: string, capBytes: number): void {
  let logged = 0
  let pending = ''
  let capped = false
  const emit = (line: string): void => {
    if (line === '') return
    if (logged >= capBytes) {
      if (!capped) {
        capped = true
        logger.warn({ mcpClient: label, capBytes }, 'stdio MCP server stderr exceeds the cap; further output dropped')
      }
      return
    }
    const room = capBytes - logged
    const text = line.length > room ? line.slice(0, room) : line
    logged += text.length
    logger.info({ mcpClient: label, stderr: text }, 'stdio MCP server stderr')
  }
  stream.setEncoding('utf8')
  stream.on('data', (chunk: string) => {
    if (capped) return
    pending += chunk
    let nl = pending.indexOf('\n')
    while (nl !== -1) {
      emit(pending.slice(0, nl).replace(/\r$/, ''))
      pending = pending.slice(nl + 1)
      nl = pending.indexOf('\n')
    }
    // A child that never writes a newline must not grow this buffer without bound.
    if (pending.length > capBytes) {
      emit(pending)
      pending = ''
    }
  })
  stream.on('end', () => { emit(pending); pending = '' })
  stream.on('error', () => {})
}

/** Thrown by refuseRedirects; the SDK surfaces it as a transport error. */
export class RedirectRefusedError extends Error {
  readonly code = 'GW_UPSTREAM_REDIRECT' satisfies GwCode
  constructor (status: number) {
    super(`The MCP server answered with a redirect (HTTP ${status}); redirects are not followed`)
    this.name = 'RedirectRefusedError'
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
