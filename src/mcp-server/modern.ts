import type { ServerResponse } from 'node:http'
import { InMemoryServerEventBus, MissingRequiredClientCapabilityError, UnsupportedProtocolVersionError, createMcpHandler } from '@modelcontextprotocol/server'
import type { McpHttpHandler, McpRequestContext, Server } from '@modelcontextprotocol/server'
import type { ListChangedTarget } from './notifier.js'
import type { GatewayMcpServerOptions } from './handlers.js'
import { createGatewayMcpServer } from './server.js'
import { writeWebResponse } from './web.js'
import { longRevisions, withRevisionsCut } from './revision-quotes.js'

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

  constructor (onError: (err: unknown, what: string) => void, onRefused: (err: unknown, what: string) => void = onError) {
    // The SDK reports the requests it refuses (a 4xx it answers itself) through the same callback as its failures.
    this.#onError = (err) => {
      if (isInboundRefusal(err)) onRefused(err, 'MCP (2026-07-28) request refused')
      else onError(err, 'MCP (2026-07-28) request failed')
    }
    this.#handler = createMcpHandler((ctx) => this.#server(ctx), { legacy: 'reject', onerror: this.#onError })
  }

  #server (ctx: McpRequestContext): Server {
    const opts = ctx.requestInfo !== undefined ? this.#exchanges.get(ctx.requestInfo) : undefined
    if (opts === undefined) throw new Error('MCP request without a gateway exchange')
    return createGatewayMcpServer(opts, 'modern')
  }

  /**
   * Serves one POST (`request`, its body already parsed: `body`) on the raw Node response.
   * `opts.signal` aborts when the client goes away, and so does the exchange.
   */
  async post (request: Request, res: ServerResponse, body: unknown, opts: GatewayMcpServerOptions & { signal: AbortSignal }): Promise<void> {
    this.#exchanges.set(request, opts)
    await this.#answer(this.#handler, request, res, body, opts.signal)
  }

  /** The entry's answer to `request`, the revisions it quotes cut (revision-quotes.ts), written on `res`. */
  async #answer (handler: McpHttpHandler, request: Request, res: ServerResponse, body: unknown, signal: AbortSignal): Promise<void> {
    const response = await handler.fetch(request, { parsedBody: body })
    await writeWebResponse(await withRevisionsCut(response, longRevisions(request.headers.get('mcp-protocol-version'), body)), res, signal)
  }

  /**
   * Serves a subscriptions/listen until the client leaves (`opts.signal`). The stream has an
   * entry and an event bus of its own: `watch` registers the target the gateway's list-change
   * watch calls for this exchange's listing, and only this stream hears it.
   */
  async listen (
    request: Request,
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
      this.#exchanges.set(request, opts)
      await this.#answer(handler, request, res, body, opts.signal)
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
 * The SDK entry's reports of requests it refused with a 4xx of its own (`createMcpHandler`: a body that is no JSON-RPC
 * message or an empty batch, a 2025-era request on its modern-only entry, a content type or Accept it does not serve,
 * a revision it does not serve, a client capability the method needs and the request did not declare): the client's
 * mistake, not the gateway's failure. The last two are typed; for the others the messages are the only mark (plain
 * Errors): test/http/plugins/request-log.test.ts pins them to the SDK version installed.
 */
function isInboundRefusal (err: unknown): boolean {
  if (err instanceof UnsupportedProtocolVersionError || err instanceof MissingRequiredClientCapabilityError) return true
  return err instanceof Error && INBOUND_REFUSAL.test(err.message)
}
const INBOUND_REFUSAL = /^(?:Rejected inbound request \(|Rejected 2025-era request |Unsupported Media Type: |Not Acceptable: )/
