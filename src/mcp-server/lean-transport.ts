import type { IncomingMessage, ServerResponse } from 'node:http'
import { isJSONRPCErrorResponse, isJSONRPCRequest, isJSONRPCResultResponse, isJsonContentType } from '@modelcontextprotocol/server'
import type { JSONRPCMessage, JSONRPCRequest, Transport, TransportSendOptions } from '@modelcontextprotocol/server'

/** The SDK transport's SSE keep-alive period (its DEFAULT_SSE_KEEP_ALIVE_MS), kept so a slow call's stream looks the same. */
const KEEP_ALIVE_MS = 15_000

/** The head of an answer that is an event stream, as the SDK's streamable HTTP transport writes it. */
const SSE_HEAD = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  'x-accel-buffering': 'no'
} as const

/**
 * The one legacy POST the lean transport serves: a single JSON-RPC request other than
 * `initialize` that the SDK's streamable HTTP transport would dispatch as it is (both media
 * types accepted, a JSON body, one Content-Type). Anything else (batches, notifications,
 * responses, initialize, a refusal the SDK words) goes to the SDK's transport.
 */
export function leanLegacyRequest (req: IncomingMessage, body: unknown): JSONRPCRequest | undefined {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return undefined
  const accept = req.headers.accept
  if (accept === undefined || !accept.includes('application/json') || !accept.includes('text/event-stream')) return undefined
  // Node keeps only the first of repeated Content-Type headers; the SDK's web Request would join them.
  const type = soleHeader(req, 'content-type')
  if (type === undefined || !isJsonContentType(type)) return undefined
  // initialize (well-formed or not) is the SDK transport's: it answers the handshake.
  if ((body as { method?: unknown }).method === 'initialize' || !isJSONRPCRequest(body)) return undefined
  return body
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
 * A server transport for one legacy (2025-era, stateless) JSON-RPC request on the raw Node
 * response: what the SDK's WebStandardStreamableHTTPServerTransport does for it, without the web
 * Request / Response, the ReadableStream and the SSE framing parsed back. Its answer is the same:
 * - `json` (any request but a tools/call, as the SDK's enableJsonResponse): the response as
 *   application/json; what the server sends before it has no stream to go to and is dropped;
 * - otherwise adaptive (web.ts writeAdaptiveResponse): the response as application/json when it
 *   comes first, else an event stream (the SDK's head and `event: message` framing, a keep-alive
 *   comment every 15 s) carrying what the server sends for the request, ended after its response.
 * The endpoint (endpoint.ts) connects the exchange's Server to it and calls dispatch().
 */
export class LeanLegacyTransport implements Transport {
  onclose?: (() => void) | undefined
  onerror?: ((error: Error) => void) | undefined
  onmessage?: ((message: JSONRPCMessage) => void) | undefined
  readonly #res: ServerResponse
  readonly #request: JSONRPCRequest
  readonly #json: boolean
  #versions: readonly string[] = []
  #streaming = false
  #ended = false
  #closed = false
  #keepAlive: NodeJS.Timeout | undefined
  #settle: () => void = () => {}
  /** Settles when the answer is complete or the client went away. */
  readonly done: Promise<void>

  constructor (res: ServerResponse, request: JSONRPCRequest, json: boolean) {
    this.#res = res
    this.#request = request
    this.#json = json
    this.done = new Promise((resolve) => { this.#settle = resolve })
    res.once('close', () => this.#settle())
  }

  /** Set by Server.connect: the revisions the server speaks. */
  setSupportedProtocolVersions (versions: string[]): void {
    this.#versions = versions
  }

  /** Whether the request's MCP-Protocol-Version header (if any) names a revision the server speaks; else the SDK refuses it. */
  accepts (version: string | undefined): boolean {
    return version === undefined || this.#versions.includes(version)
  }

  async start (): Promise<void> {}

  /** Hands the request to the connected server. */
  dispatch (): void {
    if (!this.#json) {
      this.#keepAlive = setInterval(() => {
        if (this.#ended) return
        this.#openStream()
        this.#res.write(': keepalive\n\n')
      }, KEEP_ALIVE_MS)
      this.#keepAlive.unref()
    }
    this.onmessage?.(this.#request)
  }

  async send (message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    const isResponse = isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)
    const related = isResponse ? message.id : options?.relatedRequestId
    // No standalone (GET) stream on this transport: the SDK's drops such a message too.
    if (related === undefined) return
    if (related !== this.#request.id) throw new Error(`No connection established for request ID: ${String(related)}`)
    if (this.#ended || this.#res.destroyed) return
    if (this.#json || (isResponse && !this.#streaming)) {
      if (!isResponse) return
      this.#end()
      this.#res.writeHead(200, { 'content-type': 'application/json' })
      this.#res.end(JSON.stringify(message))
      return
    }
    this.#openStream()
    this.#res.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)
    if (isResponse) {
      this.#end()
      this.#res.end()
    }
  }

  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    clearInterval(this.#keepAlive)
    this.onclose?.()
  }

  #openStream (): void {
    if (this.#streaming) return
    this.#streaming = true
    this.#res.writeHead(200, SSE_HEAD)
    // An event stream is open as soon as its head is out: a client waits for it before the first event.
    this.#res.flushHeaders()
  }

  #end (): void {
    this.#ended = true
    clearInterval(this.#keepAlive)
    this.#res.once('finish', () => this.#settle())
  }
}
