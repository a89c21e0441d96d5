import type { IncomingMessage, ServerResponse } from 'node:http'
import { PerRequestHTTPServerTransport, isJsonContentType } from '@modelcontextprotocol/server'
import type {
  InboundClassificationOutcome, JSONRPCMessage, JSONRPCRequest, MessageClassification, MessageExtraInfo, TransportSendOptions
} from '@modelcontextprotocol/server'
import { MODERN_REVISION, SHARED_METHODS } from './server.js'
import { responseChunks } from './known-json.js'
import type { ExchangeState } from './server.js'

/** The SDK transport's SSE keep-alive period (its DEFAULT_SSE_KEEP_ALIVE_MS), kept so a slow call's stream looks the same. */
const KEEP_ALIVE_MS = 15_000
/** Bytes of a request's event stream that may wait in memory for its client to read them before events are dropped. */
export const MAX_BUFFERED_EVENT_BYTES = 1024 * 1024

/** The head of an answer that is an event stream, as the SDK's streamable HTTP transports write it. */
const SSE_HEAD = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no'
} as const

/** JSON-RPC -32021 (MissingRequiredClientCapability): the one handler error the 2026-07-28 revision answers with HTTP 400, not 200. */
const MISSING_CAPABILITY = -32021

/**
 * The 2026-07-28 methods whose `Mcp-Name` header mirrors a body field (the SDK's standard-header
 * rung checks it): the field, for the methods a shared server answers.
 */
const NAME_FIELD: Readonly<Record<string, string>> = { 'tools/call': 'name', 'prompts/get': 'name', 'resources/read': 'uri' }

/**
 * The one legacy POST the lean path serves: a single JSON-RPC request of SHARED_METHODS that the
 * SDK's streamable HTTP transport would dispatch as it is (both media types accepted, a JSON body,
 * one Content-Type). The SDK's classifier has proved its shape (a legacy request without a claim:
 * `no-claim`, which `initialize` is not). Anything else (batches, notifications, responses,
 * initialize, a refusal the SDK words) goes to the SDK's transport.
 */
export function leanLegacyRequest (req: IncomingMessage, body: unknown, route: InboundClassificationOutcome): JSONRPCRequest | undefined {
  if (route.kind !== 'legacy' || route.reason !== 'no-claim') return undefined
  if (!SHARED_METHODS.has((body as { method: string }).method)) return undefined
  const accept = req.headers.accept
  if (accept === undefined || !accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined
  return jsonContentType(req) ? body as JSONRPCRequest : undefined
}

/**
 * The one 2026-07-28 POST the lean path serves: a request of SHARED_METHODS (classified modern by
 * the SDK's classifier) that the SDK's entry (createMcpHandler) would hand to its server as it is:
 * the revision it serves, a JSON body, the MCP-Protocol-Version and Mcp-Method headers present
 * (the classifier checked that they agree with the body), and an Mcp-Name header equal to the
 * field it mirrors, in plain form. Anything else, refusals included, is the SDK entry's to answer.
 */
export function leanModernRequest (req: IncomingMessage, route: InboundClassificationOutcome): JSONRPCRequest | undefined {
  if (route.kind !== 'modern' || route.messageKind !== 'request' || route.classification.revision !== MODERN_REVISION) return undefined
  const message = route.message
  if (!SHARED_METHODS.has(message.method) || !jsonContentType(req)) return undefined
  if (req.headers['mcp-protocol-version'] === undefined || req.headers['mcp-method'] === undefined) return undefined
  const field = NAME_FIELD[message.method]
  if (field !== undefined) {
    const value = (message.params as Record<string, unknown> | undefined)?.[field]
    // Only the plain form: a Base64 sentinel (=?base64?...?=) or whitespace the SDK would strip is its to judge.
    if (typeof value !== 'string' || req.headers['mcp-name'] !== value || value.startsWith('=?') || value.trim() !== value) return undefined
  }
  return message
}

/** One JSON Content-Type: Node keeps only the first of repeated ones, the SDK's web Request would join them. */
function jsonContentType (req: IncomingMessage): boolean {
  const type = soleHeader(req, 'content-type')
  return type !== undefined && isJsonContentType(type)
}

/** A header sent exactly once, as sent; undefined when absent or repeated. */
function soleHeader (req: IncomingMessage, name: string): string | undefined {
  const raw = req.rawHeaders
  let value: string | undefined
  for (let i = 0; i + 1 < raw.length; i += 2) {
    if (raw[i]!.length !== name.length || raw[i]!.toLowerCase() !== name) continue
    if (value !== undefined) return undefined
    value = raw[i + 1]
  }
  return value
}

/**
 * How an answer is shaped, as the SDK's transports shape it:
 * - `json` (a legacy request other than tools/call, as the SDK's enableJsonResponse): the response
 *   as application/json; what the server sends before it has no stream to go to and is dropped;
 * - `legacy` (a legacy tools/call: the SDK's event stream, answered by web.ts writeAdaptiveResponse):
 *   the response as application/json when it comes first, else the event stream carrying what the
 *   server sends for the request, ended after its response; a keep-alive comment (every 15 s)
 *   opens the stream;
 * - `modern` (any 2026-07-28 request: the SDK's PerRequestHTTPServerTransport in its auto mode):
 *   the same, keep-alive comments only once the stream is open.
 */
export type AnswerMode = 'json' | 'legacy' | 'modern'

/**
 * The answer to one request on the raw Node response, as the SDK's transports write it (the SSE
 * head and `event: message` framing, the keep-alive comments), without the web Request /
 * Response, the ReadableStream and the SSE framing parsed back.
 */
export class LeanAnswer {
  readonly #res: ServerResponse
  readonly #mode: AnswerMode
  #streaming = false
  #ended = false
  #keepAlive: NodeJS.Timeout | undefined
  #settle: () => void = () => {}
  /** Settles when the answer is complete or the client went away. */
  readonly done: Promise<void>

  constructor (res: ServerResponse, mode: AnswerMode) {
    this.#res = res
    this.#mode = mode
    this.done = new Promise((resolve) => { this.#settle = resolve })
    res.once('close', () => {
      clearInterval(this.#keepAlive)
      this.#settle()
    })
  }

  /** The request was handed to its server: a legacy stream keeps its client company while the server works. */
  started (): void {
    if (this.#mode === 'legacy') this.#keepAliveEvery()
  }

  /**
   * A message the server sends for the request before its response (progress, log lines, a request of the
   * client); false when it was not written. Past MAX_BUFFERED_EVENT_BYTES of the stream waiting in memory for a
   * client that does not read, nothing more is written but the response: a tenant's server sending 1 MB progress
   * notifications to its own client that stopped reading grew the gateway by gigabytes, up to a crash (an audit).
   */
  event (message: JSONRPCMessage): boolean {
    if (this.#mode === 'json' || this.#ended || this.#res.destroyed) return false
    if (this.#res.writableLength > MAX_BUFFERED_EVENT_BYTES) return false
    this.#openStream()
    this.#res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)
    return true
  }

  /** The response (its id the client's): JSON at `status` unless the stream is already open. */
  answer (message: JSONRPCMessage, status: number): void {
    if (this.#ended || this.#res.destroyed) return
    this.#ended = true
    clearInterval(this.#keepAlive)
    this.#res.once('finish', () => this.#settle())
    // A cached listing's tools are written as the bytes they already have (known-json.ts), never serialised again.
    const chunks = responseChunks(message)
    if (!this.#streaming) {
      if (chunks === undefined) {
        this.#res.writeHead(status, { 'content-type': 'application/json' })
        this.#res.end(JSON.stringify(message))
        return
      }
      const length = chunks.reduce((n, chunk) => n + (typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.length), 0)
      this.#res.writeHead(status, { 'content-type': 'application/json', 'content-length': length })
      this.#writeAll(chunks)
      this.#res.end()
      return
    }
    if (chunks === undefined) this.#res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)
    else this.#writeAll(['event: message\ndata: ', ...chunks, '\n\n'])
    this.#res.end()
  }

  /** One writev for the chunks: the Buffers are handed to the socket as they are (shared, not copied). */
  #writeAll (chunks: Array<string | Buffer>): void {
    this.#res.cork()
    for (const chunk of chunks) this.#res.write(chunk)
    process.nextTick(() => this.#res.uncork())
  }

  #openStream (): void {
    if (this.#streaming) return
    this.#streaming = true
    this.#res.writeHead(200, SSE_HEAD)
    // An event stream is open as soon as its head is out: a client waits for it before the first event.
    this.#res.flushHeaders()
    if (this.#mode === 'modern') this.#keepAliveEvery()
  }

  #keepAliveEvery (): void {
    this.#keepAlive = setInterval(() => {
      if (this.#ended || this.#res.destroyed) return
      this.#openStream()
      this.#res.write(': keepalive\n\n')
    }, KEEP_ALIVE_MS)
    this.#keepAlive.unref()
  }
}

/** An exchange whose request a shared server is serving. */
interface Pending {
  /** The request's id as the client sent it. */
  id: string | number
  answer: LeanAnswer
  state: ExchangeState
  /** Set while the request is handed over: a response sent then is the protocol layer's refusal. */
  dispatching: boolean
  refused: boolean
}

/**
 * The transport of a server shared by many exchanges (server.ts createSharedMcpServer): no Server
 * and no transport object per request. Each request is handed to the server under an id of this
 * transport's own (clients' ids collide: each counts from 0), which the handlers find their
 * exchange by (exchangeOf) and which is mapped back to the client's id in the response; what the
 * server sends for the request (related to that id) goes to the exchange's answer. A message
 * related to no live exchange is dropped, as the SDK's stateless transports drop what has no stream.
 * Only requests are handed over, never notifications: a notifications/cancelled of one client
 * could otherwise name another's request; a client cancels by closing its request (the exchange's
 * signal, in every handler, aborts its work).
 * It is a PerRequestHTTPServerTransport only so that connecting a Server binds it to the
 * classification's revision (a 2026-07-28 one), as the SDK does for its per-request servers.
 */
export class SharedTransport extends PerRequestHTTPServerTransport {
  readonly #pending = new Map<number, Pending>()
  readonly #modern: boolean
  #next = 0
  #versions: readonly string[] = []

  constructor (classification: MessageClassification) {
    super({ classification })
    this.#modern = classification.era === 'modern'
  }

  override async start (): Promise<void> {}

  /** Set by Server.connect: the revisions the server speaks. */
  setSupportedProtocolVersions (versions: string[]): void {
    this.#versions = versions
  }

  /** Whether a legacy request's MCP-Protocol-Version header (if any) names a revision the server speaks; else the SDK refuses it. */
  speaks (version: string | string[] | undefined): boolean {
    return version === undefined || (typeof version === 'string' && this.#versions.includes(version))
  }

  /** The exchange of a request the server is serving; throws when its exchange is over (the client left). */
  exchangeOf (id: string | number): ExchangeState {
    const pending = typeof id === 'number' ? this.#pending.get(id) : undefined
    if (pending === undefined) throw new Error('the exchange of this request is over')
    return pending.state
  }

  /**
   * Hands `request` to the server for the exchange `state`, its answer to `answer`. False when
   * the protocol layer refused it as it was handed over (an unknown method, a bad envelope): no
   * handler ran and nothing was written, so the SDK's own path can answer it in its own words.
   */
  dispatch (request: JSONRPCRequest, answer: LeanAnswer, state: ExchangeState, res: ServerResponse, extra?: MessageExtraInfo): boolean {
    // Not (or no longer) connected to its server: nothing would answer; the SDK's own path does.
    if (this.onmessage === undefined) return false
    const id = ++this.#next
    const pending: Pending = { id: request.id, answer, state, dispatching: true, refused: false }
    this.#pending.set(id, pending)
    try {
      this.onmessage?.({ ...request, id }, extra)
    } catch (err) {
      this.#pending.delete(id)
      throw err
    } finally {
      pending.dispatching = false
    }
    if (pending.refused) return false
    answer.started()
    res.once('close', () => { this.#pending.delete(id) })
    return true
  }

  override async send (message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const m = message as { id?: unknown, method?: unknown, error?: { code?: unknown } }
    const isResponse = m.method === undefined && m.id !== undefined
    const related = isResponse ? m.id : options?.relatedRequestId
    const pending = typeof related === 'number' ? this.#pending.get(related) : undefined
    if (pending === undefined) return
    if (!isResponse) {
      // A request of the client that could not be written is refused to its asker; a notification is dropped.
      if (!pending.answer.event(message) && m.id !== undefined) throw new Error('The client is not reading its stream: the request was not sent')
      return
    }
    this.#pending.delete(related as number)
    if (pending.dispatching) {
      pending.refused = true
      return
    }
    const status = this.#modern && m.error?.code === MISSING_CAPABILITY ? 400 : 200
    pending.answer.answer({ ...message, id: pending.id } as JSONRPCMessage, status)
  }

  override async close (): Promise<void> {
    this.#pending.clear()
    this.onclose?.()
  }
}
