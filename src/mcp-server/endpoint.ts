import type { IncomingMessage, ServerResponse } from 'node:http'
import { WebStandardStreamableHTTPServerTransport, classifyInboundRequest } from '@modelcontextprotocol/server'
import type { InboundClassificationOutcome, JSONRPCRequest, Server, Transport } from '@modelcontextprotocol/server'
import type { Gateway } from '../gateway.js'
import type { ListingListener } from '../registry/types.js'
import { parseServerSelection, splitComma } from '../routing/allow-list.js'
import { toolRequestTenant } from '../routing/tenancy.js'
import type { Caller } from '../routing/types.js'
import { ListChangedNotifier } from './notifier.js'
import { HttpError, quoted } from '../errors.js'
import { duplicateRequestId, jsonRpcRefusalBody, mcpListingQuery, methodNotAllowed } from './json-rpc.js'
import { MODERN_REVISION, createGatewayMcpServer, createSharedMcpServer, exchangeState } from './server.js'
import type { ExchangeState } from './server.js'
import type { GatewayMcpServerOptions, LegacyClient, McpCallRecord } from './handlers.js'
import { ModernMcp } from './modern.js'
import { asBatchAnswer, toWebRequest, writeAdaptiveResponse, writeWebResponse } from './web.js'
import { ClientRequests } from './client-requests.js'
import { LeanAnswer, SharedTransport, leanLegacyRequest, leanModernRequest } from './lean-transport.js'
import type { AnswerMode } from './lean-transport.js'
import type { AnswerOwner } from './client-requests.js'
import { canBeAsked, capabilitiesOf, sessionIdFor } from './legacy-session.js'
import { randomUUID } from 'node:crypto'
import { checkParamHeaders, paramHeadersOf } from './param-headers.js'
import type { ParamHeader } from './param-headers.js'
import type { ListenOptions } from './modern.js'
import { AnswerBytes, isListenRequest } from './budget.js'
import type { McpQueryT } from './json-rpc.js'
import type { AnswerByteLimits, CallLimits } from './budget.js'
import { fanOutAbortController } from '../routing/signals.js'
import { RequestStateSealer } from './request-state.js'
import { longRevisions, withRevisionsCut } from './revision-quotes.js'

export interface McpEndpointOptions {
  gateway: Gateway
  /** How often open notification streams' listings are compared (ms). */
  pollMs?: number
  /** Open GET notification streams this instance holds at most; more get 429. */
  maxStreams?: number
  /** Open GET notification streams one tenant holds at most on this instance (default: streamShare(maxStreams)). */
  maxStreamsPerTenant?: number
  /** Registry and upstream tool-list changes, so a change is notified at once instead of at the next poll. */
  subscribe?: (listener: ListingListener) => () => void
  /** While a listing is watched, its upstream servers' tool list changes are listened for (ListChangedNotifierOptions). */
  watchServers?: (tenant: string | undefined, serverIds: readonly string[]) => () => void
  onError?: (err: unknown, what: string) => void
  /** A request the MCP SDK refused with a 4xx of its own (a client's mistake, not a failure); default onError. */
  onRefused?: (err: unknown, what: string) => void
  /** Seals the requestState handles of upstream `input_required` rounds; default one with a per-process key. */
  requestState?: RequestStateSealer | undefined
  /** The requests sent to legacy clients during their calls, and their answers (any instance's); default one of this endpoint's own. */
  clientRequests?: ClientRequests | undefined
  /**
   * Single requests served by one shared server per era (lean-transport.ts), default true; false
   * sends every POST through the SDK's per-request servers and transports (the tests compare both).
   */
  lean?: boolean
  /** Bytes of listings the SDK's path may have in flight per tenant and in all (budget.ts AnswerBytes); default DEFAULT_ANSWER_BYTES. */
  answerBytes?: AnswerByteLimits
}

/** One checked request: who acts for which tenant with which allow-list. */
export interface McpExchange {
  scope: McpQueryT
  caller: Caller
  /** The tenant the exchange acts for (toolRequestTenant of the caller, the URL's userId and its mcp= names). */
  tenant: string | undefined
  serverIds: string[]
}

export interface PostHooks {
  /** The tenant's per-minute and concurrency share for this exchange (each tools/call counts). */
  limits?: CallLimits
  onCall?: (record: McpCallRecord) => void
  /** Read when the response head is written: the gateway overhead so far, in ms. */
  overheadMs?: () => number
  /** Whose share of the instance's streams a subscriptions/listen counts against (see get()); default the tenant. */
  tenantKey?: string
}

/** A long-lived notification stream: a legacy GET /mcp or a 2026-07-28 subscriptions/listen. */
interface OpenStream {
  res: ServerResponse
  close: () => Promise<void>
}

/** JSON-RPC code of the 2026-07-28 revision for headers that disagree with the body (HTTP 400). */
const HEADER_MISMATCH = -32020
const DEFAULT_POLL_MS = 2000
const DEFAULT_MAX_STREAMS = 1000

/**
 * A tenant's share of the instance's notification streams: a tenth, at least 4. One tenant can
 * no longer hold them all (every other tenant would get 429); an MCP client needs one stream
 * per endpoint URL, so 100 (of the default 1000) is plenty for any honest tenant.
 */
function streamShare (maxStreams: number): number {
  return Math.min(maxStreams, Math.max(4, Math.ceil(maxStreams / 10)))
}

/**
 * The /mcp endpoint without the web framework: MCP over streamable HTTP on raw Node
 * request/response objects.
 *
 * Stateless: no session id, so any instance serves any request and nothing has to expire. A
 * single request of the common methods is served by one long-lived server per era on a shared
 * transport (lean-transport.ts), each request acting for its own exchange; everything else
 * (initialize, batches, notifications, what the SDK refuses or words itself) gets a fresh SDK
 * Server and transport. The tenant and allow-list come from the request itself (API key + URL),
 * so a client can never switch tenant mid-way.
 *
 * Notifications: a client that keeps a GET /mcp SSE stream open (the SDK client opens one
 * after initialize) gets notifications/tools/list_changed on it when its listing changes;
 * the stream is bound to the key and URL of that GET. It holds no other state: losing it
 * (another instance, a restart) only means the client reconnects.
 */
export class McpEndpoint {
  readonly #gateway: Gateway
  readonly #notifier: ListChangedNotifier
  readonly #maxStreams: number
  readonly #maxStreamsPerTenant: number
  readonly #streams = new Set<OpenStream>()
  /** Open streams per tenant key (only keys with at least one). */
  readonly #tenantStreams = new Map<string, number>()
  readonly #onError: (err: unknown, what: string) => void
  readonly #modern: ModernMcp
  readonly #requestState: RequestStateSealer
  readonly #answerBytes: AnswerBytes
  readonly #clientRequests: ClientRequests
  /** The x-mcp-header parameters of each listed tool, per listing (a cached listing is the same array). */
  readonly #declared = new WeakMap<unknown[], Map<string, ParamHeader[]>>()
  readonly #leanPath: boolean
  /** The transports of the two shared servers: single legacy requests, single 2026-07-28 requests. */
  readonly #sharedLegacy = new SharedTransport({ era: 'legacy' })
  readonly #sharedModern = new SharedTransport({ era: 'modern', revision: MODERN_REVISION })
  readonly #sharedServers: Server[]

  constructor (opts: McpEndpointOptions) {
    this.#gateway = opts.gateway
    this.#maxStreams = opts.maxStreams ?? DEFAULT_MAX_STREAMS
    this.#maxStreamsPerTenant = opts.maxStreamsPerTenant ?? streamShare(this.#maxStreams)
    this.#onError = opts.onError ?? (() => {})
    this.#requestState = opts.requestState ?? new RequestStateSealer()
    this.#answerBytes = new AnswerBytes(opts.answerBytes)
    this.#clientRequests = opts.clientRequests ?? new ClientRequests({ instanceId: randomUUID(), onError: this.#onError })
    this.#notifier = new ListChangedNotifier({
      gateway: opts.gateway,
      pollMs: opts.pollMs ?? DEFAULT_POLL_MS,
      ...(opts.subscribe ? { subscribe: opts.subscribe } : {}),
      ...(opts.watchServers ? { watchServers: opts.watchServers } : {}),
      onError: (err) => this.#onError(err, 'list_changed check failed')
    })
    this.#modern = new ModernMcp((err, what) => this.#onError(err, what), opts.onRefused)
    this.#leanPath = opts.lean ?? true
    this.#sharedServers = [
      createSharedMcpServer('legacy', (ctx) => this.#sharedLegacy.exchangeOf(ctx.mcpReq.id)),
      createSharedMcpServer('modern', (ctx) => this.#sharedModern.exchangeOf(ctx.mcpReq.id))
    ]
    // Both transports start at once (nothing to wait for): the servers are connected before any request.
    this.#sharedServers[0]!.connect(this.#sharedLegacy).catch((err: unknown) => this.#onError(err, 'MCP shared server failed'))
    this.#sharedServers[1]!.connect(this.#sharedModern).catch((err: unknown) => this.#onError(err, 'MCP shared server failed'))
  }

  /** Open notification streams on this instance. */
  get streams (): number {
    return this.#streams.size
  }

  /**
   * Checks the tenant and allow-list before any MCP message is read: another tenant's userId
   * or `user_{u}_service_{s}` name is a 403 (HttpError) for the whole exchange.
   */
  exchange (scope: McpQueryT, caller: Caller): McpExchange {
    // The rule of GET /tools and /invoke: an admin's (or open mode's) encoded names imply the tenant.
    const mcp = splitComma(scope.mcp)
    const tenant = toolRequestTenant(caller, scope.userId, { mcp })
    const { serverIds } = parseServerSelection(mcp, tenant)
    return { scope, caller, tenant, serverIds }
  }

  /**
   * POST /mcp: one JSON-RPC message or batch, `body` already parsed. A request of the
   * 2026-07-28 revision (its `_meta` claims it: the SDK's own classifier) goes to the modern
   * leg (modern.ts); everything else (initialize, batches, no claim) is served in the legacy
   * revisions by the SDK's stateless streamable HTTP transport. Both legs run the same server
   * (server.ts) on SDK v2. In either era a single request the SDK would hand to its server as it
   * is goes to the era's shared server instead (lean-transport.ts: the same answer, byte for byte).
   */
  async post (req: IncomingMessage, res: ServerResponse, body: unknown, ex: McpExchange, hooks: PostHooks = {}): Promise<void> {
    const gone = fanOutAbortController()
    const opts: GatewayMcpServerOptions & { signal: AbortSignal } = {
      gateway: this.#gateway,
      scope: ex.scope,
      caller: ex.caller,
      signal: gone.signal,
      ...(hooks.onCall ? { onCall: hooks.onCall } : {}),
      ...(hooks.limits ? { limits: hooks.limits } : {}),
      requestState: this.#requestState,
      onError: (err: unknown) => this.#onError(err, 'MCP request failed'),
      onListingChanged: () => {
        this.#notifier.recheck(ex.scope, ex.tenant, ex.caller).catch((err: unknown) => this.#onError(err, 'list_changed check failed'))
      }
    }
    if (hooks.overheadMs) addOverheadHeader(res, hooks.overheadMs)
    // A legacy client's answers to the requests its calls' servers made (client-requests.ts): never the SDK's.
    if (ClientRequests.isAnswerBody(body)) {
      await this.#clientRequests.deliver(answerOwnerOf(ex), body)
      res.writeHead(202).end()
      return
    }
    let server: Server | undefined
    res.once('close', () => {
      if (res.writableFinished) return
      // The client left before its answer: the call is cancelled (upstream too), the server's pending work aborted.
      gone.abort(new Error('client disconnected'))
      server?.close().catch(() => {})
    })
    try {
      // The SDK's own era verdict (what isLegacyRequest runs), on the Node headers: no web Request for it.
      const route = classifyInboundRequest({ httpMethod: 'POST', ...mcpHeadersOf(req), body })
      if (route.kind !== 'legacy') {
        if (isListenRequest(body)) await this.#listen(toWebRequest(req, gone.signal), res, body, ex, opts, hooks.tenantKey ?? tenantKeyOf(ex))
        else if (!await this.#paramHeadersAgree(req, res, body, ex, gone.signal)) return
        else if (!await this.#lean(this.#sharedModern, leanModernRequest(req, route), res, 'modern', exchangeState(opts), route)) {
          await this.#modern.post(toWebRequest(req, gone.signal), res, body, this.#holdingAnswers(opts, ex, res))
        }
        return
      }
      const duplicate = route.reason === 'batch' ? duplicateRequestId(body as unknown[]) : undefined
      if (duplicate !== undefined) {
        // Refused whole: an answer per request could not be told apart, and the SDK would lose one silently.
        const message = `Invalid Request: the batch holds two requests of id ${quoted(JSON.stringify(duplicate))}: none of its requests ran; give each its own id`
        refuse(res, new HttpError('GW_DUPLICATE_REQUEST_ID', message))
        return
      }
      // A single tools/call may send things before its result (progress, its servers' log messages
      // and questions for the client): its answer is a stream, sent as plain JSON when the result
      // comes first (writeAdaptiveResponse). Anything else is answered JSON, unless it asks for progress.
      const oneCall = isToolsCall(body)
      const single = this.#sharedLegacy.speaks(req.headers['mcp-protocol-version']) ? leanLegacyRequest(req, body, route) : undefined
      if (single !== undefined) {
        // The common case, one request: the shared server (lean-transport.ts), the same answer without the per-request objects.
        const send: Send = async (m, o) => { await this.#sharedLegacy.send(m, o) }
        const state = exchangeState(oneCall ? { ...opts, legacyClient: this.#legacyClient(headerOf(req, 'mcp-session-id'), ex, send) } : opts)
        if (await this.#lean(this.#sharedLegacy, single, res, oneCall ? 'legacy' : 'json', state)) return
      }
      const request = toWebRequest(req, gone.signal)
      const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !oneCall && !wantsProgress(body) })
      const send: Send = transport.send.bind(transport)
      const sdkOpts = this.#holdingAnswers(opts, ex, res)
      const legacyClient = oneCall ? this.#legacyClient(request.headers.get('mcp-session-id'), ex, send) : undefined
      server = createGatewayMcpServer(legacyClient !== undefined ? { ...sdkOpts, legacyClient } : sdkOpts, 'legacy')
      await server.connect(transport)
      const answer = await transport.handleRequest(request, { parsedBody: body })
      const response = await withRevisionsCut(answer, longRevisions(request.headers.get('mcp-protocol-version'), body))
      if (oneCall) await writeAdaptiveResponse(response, res, gone.signal)
      else await writeWebResponse(await asBatchAnswer(withSession(response, body), body), res, gone.signal)
    } catch (err) {
      this.#fail(res, err, body)
    }
  }

  /** `opts` for the SDK's path: the exchange's listings held (AnswerBytes) until its response is over. */
  #holdingAnswers<T extends GatewayMcpServerOptions> (opts: T, ex: McpExchange, res: ServerResponse): T {
    const { hold, release } = this.#answerBytes.exchange(tenantKeyOf(ex))
    res.once('close', release)
    return { ...opts, holdAnswer: hold }
  }

  /**
   * Serves `request` (when the era's lean predicate let it through) on the era's shared server:
   * false when it did not (the SDK's path answers then), true once it has answered.
   */
  async #lean (
    shared: SharedTransport,
    request: JSONRPCRequest | undefined,
    res: ServerResponse,
    mode: AnswerMode,
    state: ExchangeState,
    route?: InboundClassificationOutcome
  ): Promise<boolean> {
    if (request === undefined || !this.#leanPath) return false
    const answer = new LeanAnswer(res, mode)
    const extra = route?.kind === 'modern' ? { classification: route.classification } : undefined
    if (!shared.dispatch(request, answer, state, res, extra)) return false
    await answer.done
    return true
  }

  /**
   * A legacy client's call's way back to it: what it declared in `initialize` (its session id,
   * legacy-session.ts) and the call's own response stream, on which the requests its servers
   * make of the client go out (with ids of client-requests.ts, whose answers come back as POSTs).
   */
  #legacyClient (sessionId: string | null | undefined, ex: McpExchange, transportSend: Send): LegacyClient {
    const capabilities = capabilitiesOf(sessionId)
    const owner = answerOwnerOf(ex)
    const askable = canBeAsked(capabilities)
    return {
      capabilities,
      relay: (requestId, notify) => ({
        ask: askable
          ? async (question, signal) => {
            const send = async (m: Parameters<Send>[0]): Promise<void> => { await transportSend(m, { relatedRequestId: requestId }) }
            return await this.#clientRequests.ask(owner, send, question, signal)
          }
          : undefined,
        log: (params) => { notify({ method: 'notifications/message', params }).catch(() => {}) },
        // Straight onto the call's stream: the SDK's Server, never initialized here, would check it against no capabilities.
        notify: (method, params) => {
          transportSend({ jsonrpc: '2.0', method, ...(params !== undefined ? { params } : {}) }, { relatedRequestId: requestId }).catch(() => {})
        },
        // No level kept between requests (stateless): what a legacy server would send a client that set none.
        logLevel: 'debug'
      })
    }
  }

  /**
   * A 2026-07-28 tools/call must repeat the arguments its tool marks with `x-mcp-header` in
   * `Mcp-Param-*` headers (param-headers.ts). Checked before dispatch against the tool as the
   * exchange lists it (the cached listing); a disagreement is answered 400 -32020 with the
   * request id, like the SDK's own header checks. False when it answered.
   */
  async #paramHeadersAgree (req: IncomingMessage, res: ServerResponse, body: unknown, ex: McpExchange, signal: AbortSignal): Promise<boolean> {
    // No body, `null` or a batch is no single call: the SDK answers it (400 -32600), not this check.
    if (body === null || typeof body !== 'object' || Array.isArray(body)) return true
    const call = body as { id?: unknown, method?: unknown, params?: { name?: unknown, arguments?: unknown } }
    if (call.method !== 'tools/call' || typeof call.params?.name !== 'string') return true
    const declared = await this.#paramHeaders(ex, call.params.name, signal)
    if (declared.length === 0) return true
    const mismatch = checkParamHeaders(declared, call.params.arguments, (name) => headerOf(req, name))
    if (mismatch === undefined) return true
    const id = typeof call.id === 'string' || typeof call.id === 'number' ? call.id : null
    res.writeHead(400, { 'content-type': 'application/json' })
    res.end(JSON.stringify({
      jsonrpc: '2.0',
      id,
      error: { code: HEADER_MISMATCH, message: `Bad Request: the request headers and body disagree: ${mismatch.message}`, data: { mismatch: { header: mismatch.header, body: mismatch.message } } }
    }))
    return false
  }

  /** The `x-mcp-header` parameters of a listed tool; none when it is not listed (the call then fails on its own). */
  async #paramHeaders (ex: McpExchange, name: string, signal: AbortSignal): Promise<ParamHeader[]> {
    let tools: unknown[]
    try {
      tools = (await this.#gateway.listTools(mcpListingQuery(ex.scope), ex.caller, signal)).tools
    } catch {
      return []
    }
    let byName = this.#declared.get(tools)
    if (byName === undefined) {
      byName = new Map()
      for (const tool of tools as Array<{ name?: unknown, inputSchema?: unknown }>) {
        if (typeof tool.name !== 'string') continue
        const declared = paramHeadersOf(tool.inputSchema)
        if (declared.length > 0) byName.set(tool.name, declared)
      }
      this.#declared.set(tools, byName)
    }
    return byName.get(name) ?? []
  }

  /**
   * GET /mcp: an SSE stream that carries notifications/tools/list_changed for the exchange's
   * listing. `tenantKey` names whose share the stream counts against (the rate-limit bucket:
   * a tenant, or an admin key); by default the exchange's tenant.
   */
  async get (req: IncomingMessage, res: ServerResponse, ex: McpExchange, tenantKey = tenantKeyOf(ex)): Promise<void> {
    // The 2026-07-28 revision is POST only: its client listens with subscriptions/listen (the SDK's modern entry answers a GET 405 too).
    if (headerOf(req, 'mcp-protocol-version')?.trim() === MODERN_REVISION) {
      const why = ` in protocol revision ${MODERN_REVISION}, which has no GET stream: open a notification stream with a POST of subscriptions/listen`
      refuse(res, methodNotAllowed('GET', 'POST', why), { allow: 'POST' })
      return
    }
    // What the SDK's transport refuses (no event stream accepted, a revision it does not speak) is refused
    // before a stream is counted or the listing watched: each such GET built the listing for nothing.
    const accept = req.headers.accept
    if (accept === undefined || !accept.includes('text/event-stream') || !this.#sharedLegacy.speaks(req.headers['mcp-protocol-version'])) {
      await this.#refusedGet(req, res, ex)
      return
    }
    const leave = this.#admit(res, tenantKey)
    if (leave === undefined) return
    const server = createGatewayMcpServer({ gateway: this.#gateway, scope: ex.scope, caller: ex.caller }, 'legacy')
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    const gone = new AbortController()
    const stream = { res, close: async () => { await server.close().catch(() => {}) } }
    this.#streams.add(stream)
    let unwatch: (() => void) | undefined
    let closed = false
    res.once('close', () => {
      closed = true
      gone.abort()
      this.#streams.delete(stream)
      leave()
      unwatch?.()
      server.close().catch(() => {})
    })
    try {
      // The current listing is known before the stream opens: a change after it is notified.
      unwatch = await this.#notifier.watch(ex.scope, ex.tenant, ex.caller, server, ex.serverIds)
      if (closed) unwatch()
      await server.connect(transport)
      const response = await transport.handleRequest(toWebRequest(req, gone.signal))
      await writeWebResponse(await withRevisionsCut(response, longRevisions(headerOf(req, 'mcp-protocol-version'), undefined)), res, gone.signal)
    } catch (err) {
      this.#streams.delete(stream)
      leave()
      unwatch?.()
      await server.close().catch(() => {})
      this.#fail(res, err)
    }
  }

  /** The SDK transport's own refusal of a GET (its status and words), with no stream behind it; 400 should it open one. */
  async #refusedGet (req: IncomingMessage, res: ServerResponse, ex: McpExchange): Promise<void> {
    const server = createGatewayMcpServer({ gateway: this.#gateway, scope: ex.scope, caller: ex.caller }, 'legacy')
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined })
    const gone = new AbortController()
    res.once('close', () => { gone.abort() })
    try {
      await server.connect(transport)
      const response = await transport.handleRequest(toWebRequest(req, gone.signal))
      if (response.status < 400) {
        await response.body?.cancel()
        refuse(res, new HttpError('GW_BAD_REQUEST', 'GET /mcp opens an event stream: send Accept: text/event-stream and a revision it speaks'))
        return
      }
      await writeWebResponse(await withRevisionsCut(response, longRevisions(headerOf(req, 'mcp-protocol-version'), undefined)), res, gone.signal)
    } catch (err) {
      this.#fail(res, err)
    } finally {
      await server.close().catch(() => {})
    }
  }

  /**
   * A 2026-07-28 subscriptions/listen: the revision's notification stream, in place of the
   * legacy GET. The same watch and the same stream limits as GET /mcp; the SDK's listen router
   * answers the request (acknowledgement with the honoured filter, the subscription id on every
   * notification, keepalives) on a bus of this stream's own, so a change reaches only the
   * streams whose listing changed.
   */
  async #listen (request: Request, res: ServerResponse, body: unknown, ex: McpExchange, opts: ListenOptions, tenantKey: string): Promise<void> {
    const leave = this.#admit(res, tenantKey, body)
    if (leave === undefined) return
    const stream = { res, close: async () => { res.destroy() } }
    this.#streams.add(stream)
    res.once('close', () => {
      this.#streams.delete(stream)
      leave()
    })
    await this.#modern.listen(request, res, body, opts, async (target) =>
      await this.#notifier.watch(ex.scope, ex.tenant, ex.caller, target, ex.serverIds))
  }

  /**
   * Counts a new notification stream against the instance's and the tenant's limits: the
   * function that uncounts it (once), or undefined after answering 429.
   */
  #admit (res: ServerResponse, tenantKey: string, body?: unknown): (() => void) | undefined {
    if (this.#streams.size >= this.#maxStreams) {
      const err = new HttpError('GW_RATE_LIMITED', `Too many open MCP notification streams on this instance (at most ${this.#maxStreams}); retry later`)
      refuse(res, err, { 'retry-after': '60' }, body)
      return undefined
    }
    const held = this.#tenantStreams.get(tenantKey) ?? 0
    if (held >= this.#maxStreamsPerTenant) {
      const err = new HttpError('GW_RATE_LIMITED', `Too many open MCP notification streams for this tenant on this instance (at most ${this.#maxStreamsPerTenant}); close one or retry later`)
      refuse(res, err, { 'retry-after': '60' }, body)
      return undefined
    }
    this.#tenantStreams.set(tenantKey, held + 1)
    let counted = true
    return () => {
      if (!counted) return
      counted = false
      const left = (this.#tenantStreams.get(tenantKey) ?? 1) - 1
      if (left > 0) this.#tenantStreams.set(tenantKey, left)
      else this.#tenantStreams.delete(tenantKey)
    }
  }

  /** A failure after the response was handed to the SDK: logged; a 500 if nothing was sent yet. */
  #fail (res: ServerResponse, err: unknown, body?: unknown): void {
    // A refusal of the gateway's own (a tenant's streams watching too many listings): its code and message.
    if (err instanceof HttpError && err.code === 'GW_RATE_LIMITED' && !res.headersSent) {
      refuse(res, err, { 'retry-after': '60' }, body)
      return
    }
    this.#onError(err, 'MCP exchange failed')
    // Whatever failed, a bug to the client: GW_INTERNAL, its message hidden (the log has it).
    if (!res.headersSent) refuse(res, new HttpError('GW_INTERNAL', 'MCP exchange failed'), {}, body)
    else res.destroy()
  }

  /**
   * Ends every open stream: notification streams and subscriptions, which would keep the HTTP
   * server from closing. Requests in flight keep their servers until `close`, after the drain.
   */
  async closeStreams (): Promise<void> {
    this.#notifier.close()
    await this.#modern.close()
    const open = [...this.#streams]
    this.#streams.clear()
    this.#tenantStreams.clear()
    await Promise.all(open.map(async ({ close, res }) => {
      await close()
      res.destroy()
    }))
  }

  /**
   * Closes everything, the shared servers last: once the requests in flight have their answers
   * (closing a shared server drops the answers still to come).
   */
  async close (): Promise<void> {
    await this.closeStreams()
    await Promise.all(this.#sharedServers.map(async (server) => { await server.close() }))
  }
}

/** The share of the instance's streams an exchange counts against by default: its tenant's, or the admins'. */
function tenantKeyOf (ex: McpExchange): string {
  return ex.tenant !== undefined ? `t:${ex.tenant}` : 'admin'
}

/** Whose call a request to a client belongs to: its answer must come from the same tenant and key. */
function answerOwnerOf (ex: McpExchange): AnswerOwner {
  return { tenant: ex.tenant ?? '_', keyId: ex.caller.keyId ?? '' }
}

/** Sends a message on the exchange's transport (either kind). */
type Send = Transport['send']

/** The MCP headers the SDK's era classifier reads (its standardHeadersOf), from the Node request. */
function mcpHeadersOf (req: IncomingMessage): { protocolVersionHeader?: string, mcpMethodHeader?: string, mcpNameHeader?: string } {
  const version = headerOf(req, 'mcp-protocol-version')
  const method = headerOf(req, 'mcp-method')
  const name = headerOf(req, 'mcp-name')
  return {
    ...(version !== undefined ? { protocolVersionHeader: version } : {}),
    ...(method !== undefined ? { mcpMethodHeader: method } : {}),
    ...(name !== undefined ? { mcpNameHeader: name } : {})
  }
}

/** A request header as a web Headers.get gives it (repeated ones joined by ", "), undefined when absent. */
function headerOf (req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name]
  return Array.isArray(value) ? value.join(', ') : value
}

/** Whether a POST body is one tools/call request. */
function isToolsCall (body: unknown): boolean {
  return body !== null && typeof body === 'object' && !Array.isArray(body) && (body as { method?: unknown }).method === 'tools/call' &&
    (body as { id?: unknown }).id !== undefined
}

/**
 * The answer to `initialize` names the session the client declared (legacy-session.ts): its
 * capabilities, which its later requests bring back in Mcp-Session-Id. Other answers as they are.
 */
function withSession (response: Response, body: unknown): Response {
  const init = body as { method?: unknown, params?: { capabilities?: unknown } } | null
  if (init === null || typeof init !== 'object' || Array.isArray(init) || init.method !== 'initialize' || response.status !== 200) return response
  const headers = new Headers(response.headers)
  headers.set('mcp-session-id', sessionIdFor(init.params?.capabilities))
  return new Response(response.body, { status: response.status, headers })
}

/** Whether a POST body (one message or a batch) has a tools/call with `_meta.progressToken`. */
function wantsProgress (body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body]
  return messages.some((m: unknown) => {
    if (m === null || typeof m !== 'object') return false
    const { method, params } = m as { method?: unknown, params?: { _meta?: { progressToken?: unknown } } }
    const token = params !== null && typeof params === 'object' ? params._meta?.progressToken : undefined
    return method === 'tools/call' && (typeof token === 'string' || typeof token === 'number')
  })
}

/** Answers with the JSON-RPC refusal of `err` (jsonRpcRefusalBody), at its HTTP status. */
function refuse (res: ServerResponse, err: HttpError, headers: Record<string, string> = {}, request?: unknown): void {
  const body = jsonRpcRefusalBody(err, request)
  res.writeHead(body.error.data.statusCode, { 'content-type': 'application/json', ...headers })
  res.end(JSON.stringify(body))
}

/** Sets x-gateway-overhead-ms as the head is written, when the tools have run (JSON responses). */
function addOverheadHeader (res: ServerResponse, overheadMs: () => number): void {
  const writeHead = res.writeHead
  res.writeHead = function (this: ServerResponse, ...args: Parameters<ServerResponse['writeHead']>) {
    if (!res.headersSent) res.setHeader('x-gateway-overhead-ms', Math.max(0, overheadMs()).toFixed(3))
    return writeHead.apply(this, args)
  } as ServerResponse['writeHead']
}
