import type { IncomingMessage, ServerResponse } from 'node:http'
import { InMemoryServerEventBus, Server, createMcpHandler, isLegacyRequest } from '@modelcontextprotocol/server'
import type { McpHttpHandler, McpRequestContext } from '@modelcontextprotocol/server'
import type { ListChangedTarget } from './notifier.js'
import { gatewayMcpHandlers } from './handlers.js'
import type { GatewayMcpServerOptions } from './handlers.js'
import { INSTRUCTIONS, SERVER_INFO } from './server.js'

/**
 * Every listing the gateway serves depends on the caller (API key, tenant, allow-list), so no
 * shared cache may keep one; `ttlMs: 0` because a registry change anywhere in the cluster
 * changes it at once.
 */
const PRIVATE_NOW = { ttlMs: 0, cacheScope: 'private' } as const

/**
 * The /mcp endpoint's 2026-07-28 leg: the SDK's per-request entry (`createMcpHandler`, strict
 * modern) does the revision's wire rules (the `_meta` envelope, the Mcp-Method / Mcp-Name
 * header checks and their error codes with the request id kept, `server/discover`,
 * `resultType`, cache fields); the gateway gives it a fresh v2 `Server` per request carrying
 * the exchange's tenant, allow-list, budget and hooks (handlers.ts, shared with the legacy leg).
 * The exchange reaches the factory keyed by the web `Request` object the entry hands back.
 */
export type ListenOptions = GatewayMcpServerOptions & { signal: AbortSignal }

export class ModernMcp {
  readonly #handler: McpHttpHandler
  readonly #exchanges = new WeakMap<Request, GatewayMcpServerOptions>()
  readonly #onError: (err: Error) => void

  constructor (onError: (err: unknown, what: string) => void) {
    this.#onError = (err) => onError(err, 'MCP (2026-07-28) request failed')
    this.#handler = createMcpHandler((ctx) => this.#server(ctx), { legacy: 'reject', onerror: this.#onError })
  }

  #server (ctx: McpRequestContext): Server {
    const opts = ctx.requestInfo !== undefined ? this.#exchanges.get(ctx.requestInfo) : undefined
    if (opts === undefined) throw new Error('MCP request without a gateway exchange')
    const server = new Server(SERVER_INFO, {
      capabilities: { tools: { listChanged: true } },
      instructions: INSTRUCTIONS,
      cacheHints: { 'tools/list': PRIVATE_NOW, 'server/discover': PRIVATE_NOW }
    })
    const handlers = gatewayMcpHandlers(opts, 'modern')
    server.setRequestHandler('tools/list', async (_request, c) => await handlers.listTools(c.mcpReq.signal))
    server.setRequestHandler('tools/call', async (request, c) =>
      await handlers.callTool(request.params, c.mcpReq.signal, async (n) => { await c.mcpReq.notify(n) }))
    return server
  }

  /**
   * Serves one POST whose body is already parsed (`body`) on the raw Node request/response.
   * `signal` aborts when the client goes away, and so does the exchange.
   */
  async post (req: IncomingMessage, res: ServerResponse, body: unknown, opts: GatewayMcpServerOptions & { signal: AbortSignal }): Promise<void> {
    const request = toWebRequest(req, opts.signal)
    this.#exchanges.set(request, opts)
    const response = await this.#handler.fetch(request, { parsedBody: body })
    await writeWebResponse(response, res, opts.signal)
  }

  /**
   * Serves a subscriptions/listen until the client leaves (`opts.signal`). The stream has an
   * entry and an event bus of its own: `watch` registers the target the gateway's list-change
   * watch calls for this exchange's listing, and only this stream hears it.
   */
  async listen (
    req: IncomingMessage,
    res: ServerResponse,
    body: unknown,
    opts: ListenOptions,
    watch: (target: ListChangedTarget) => Promise<() => void>
  ): Promise<void> {
    const bus = new InMemoryServerEventBus(this.#onError)
    const handler = createMcpHandler((ctx) => this.#server(ctx), { legacy: 'reject', bus, maxSubscriptions: 1, onerror: this.#onError })
    let unwatch: (() => void) | undefined
    try {
      // The current listing is known before the stream opens: a change after it is notified.
      unwatch = await watch({ sendToolListChanged: async () => { bus.publish({ kind: 'tools_list_changed' }) } })
      const request = toWebRequest(req, opts.signal)
      this.#exchanges.set(request, opts)
      await writeWebResponse(await handler.fetch(request, { parsedBody: body }), res, opts.signal)
    } finally {
      unwatch?.()
      await handler.close()
    }
  }

  async close (): Promise<void> {
    await this.#handler.close()
  }
}

/**
 * Whether a POST body is of the legacy revisions (2025-11-25 and earlier): the SDK's own
 * classifier, from the parsed body (`initialize`, no `_meta` protocol version claim, a batch).
 */
export async function isLegacyPost (req: IncomingMessage, body: unknown): Promise<boolean> {
  return await isLegacyRequest(toWebRequest(req), body)
}

/** A body-less web `Request` with the Node request's method, URL and headers (the body is passed parsed). */
function toWebRequest (req: IncomingMessage, signal?: AbortSignal): Request {
  const headers = new Headers()
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!)
  // The URL's host is not trusted for anything: only its path and query are read.
  return new Request(new URL(req.url ?? '/', 'http://mcp.invalid'), { method: req.method ?? 'POST', headers, ...(signal ? { signal } : {}) })
}

/** Writes a web `Response` to the Node response: status and headers, then the body (JSON, or an SSE stream). */
async function writeWebResponse (response: Response, res: ServerResponse, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string | string[]> = {}
  response.headers.forEach((value, name) => {
    const seen = headers[name]
    headers[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value]
  })
  res.writeHead(response.status, headers)
  if (response.body === null) {
    res.end()
    return
  }
  const reader = response.body.getReader()
  const cancel = (): void => { reader.cancel().catch(() => {}) }
  signal.addEventListener('abort', cancel, { once: true })
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      // SSE frames go out as they come (progress before the result).
      if (!res.write(value)) await new Promise<void>((resolve) => { res.once('drain', resolve); res.once('close', resolve) })
    }
    res.end()
  } catch {
    res.destroy()
  } finally {
    signal.removeEventListener('abort', cancel)
  }
}
