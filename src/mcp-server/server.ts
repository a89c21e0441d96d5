import { CLIENT_CAPABILITIES_META_KEY, LOG_LEVEL_META_KEY, SUPPORTED_PROTOCOL_VERSIONS, Server } from '@modelcontextprotocol/server'
import type { JSONRPCRequest, Result, ServerContext } from '@modelcontextprotocol/server'
import { exchangeBudget, gatewayMcpHandlers, toJsonRpcError } from './handlers.js'
import { registerTaskMethods } from './tasks.js'
import { TASKS_EXTENSION } from '../routing/tasks-extension.js'
import { surfaceHandlers } from './surface-handlers.js'
import type { SurfaceHandlers } from './surface-handlers.js'
import type { CallBudget } from './budget.js'
import type { GatewayMcpHandlers, GatewayMcpServerOptions, LegacyClient, McpEra, ToolCallRound } from './handlers.js'
import { VERSION } from '../version.js'
import { HttpError } from '../errors.js'
import { jsonOnce } from './known-json.js'
import { withInvalidParams } from './invalid-params.js'

export const SERVER_INFO = { name: 'tool-gateway', version: VERSION } as const
/** The 2026-07-28 revision: the one modern revision the SDK serves. */
export const MODERN_REVISION = '2026-07-28'
const INSTRUCTIONS = 'Tools, resources and prompts of tool-gateway for this API key and allow-list ' +
  '(the functions, mcp and userId query parameters of the endpoint URL).'

/**
 * Every listing the gateway serves depends on the caller (API key, tenant, allow-list), so no
 * shared cache may keep one; `ttlMs: 0` because a registry change anywhere in the cluster
 * changes it at once. Only the 2026-07-28 revision carries these fields.
 */
const PRIVATE_NOW = { ttlMs: 0, cacheScope: 'private' } as const

/** What the handlers of a server act for: one exchange's options, and its share of the tenant's limits. */
export interface ExchangeState {
  opts: GatewayMcpServerOptions
  budget: CallBudget | undefined
  /** Built at the exchange's first request (a batch's requests share them: one surface selection). */
  handlers?: GatewayMcpHandlers
  surface?: SurfaceHandlers
  /** Listings (tools, resources, templates, prompts) the exchange answered: MAX_LISTINGS_PER_EXCHANGE at most. */
  listings?: number
}

/**
 * Listings one exchange answers (a batch of them: the SDK answers a batch as one JSON text). A 4.8 KB batch of 100
 * tools/list over a 4 MB listing was answered with 418 MB (an audit); a listing past this is a JSON-RPC error
 * (GW_RATE_LIMITED), the rest of the batch runs.
 */
const MAX_LISTINGS_PER_EXCHANGE = 4

/** The exchange a request belongs to (shared servers look it up by the request's id); throws when it is over. */
type ExchangeOf = (ctx: ServerContext) => ExchangeState

/** The exchange's state for `opts`: one budget for its tools/call, resources/read, prompts/get and completion/complete. */
export function exchangeState (opts: GatewayMcpServerOptions): ExchangeState {
  return { opts, budget: exchangeBudget(opts) }
}

/**
 * The gateway's MCP server for one HTTP exchange (stateless), on the SDK v2 `Server`, which
 * speaks whichever revision the transport it is connected to serves: the era-blind handlers
 * (handlers.ts) registered once for both. `era` tells the handlers which shapes the client
 * reads (structuredContent of any JSON type in 2026-07-28).
 */
export function createGatewayMcpServer (opts: GatewayMcpServerOptions, era: McpEra): Server {
  const server = newServer(era)
  const state = exchangeState(opts)
  registerHandlers(server, era, () => state, (ctx) => ctx.mcpReq.signal)
  if (era === 'modern') {
    const tenant = opts.scope.userId ?? opts.caller.userId
    registerTaskMethods(server, { gateway: opts.gateway, caller: opts.caller, tenant, sealer: opts.requestState, toRpcError: toJsonRpcError })
  }
  return server
}

/**
 * One server of `era` for many exchanges at once (lean-transport.ts's SharedTransport): the same
 * handlers, each request acting for the exchange `exchangeOf` finds for it. It serves the
 * methods of SHARED_METHODS only (no task methods: those stay on a per-exchange server); a
 * 2026-07-28 one is told the revision by the transport it is connected to, like a per-request one.
 */
export function createSharedMcpServer (era: McpEra, exchangeOf: ExchangeOf): Server {
  const server = newServer(era)
  // The exchange's own signal alone: the server's per-request one aborts only when the shared server closes.
  registerHandlers(server, era, exchangeOf, (ctx) => exchangeOf(ctx).opts.signal ?? ctx.mcpReq.signal)
  return server
}

/** The methods a shared server answers (createSharedMcpServer); everything else needs a server of its exchange's own. */
export const SHARED_METHODS: ReadonlySet<string> = new Set([
  'tools/list', 'tools/call', 'resources/list', 'resources/templates/list', 'resources/read', 'prompts/list', 'prompts/get', 'completion/complete'
])

/** A request handler as the SDK's Protocol stores it. */
type StoredHandler = (request: JSONRPCRequest, ctx: ServerContext) => Promise<Result>

/**
 * The SDK's Server, its params checks answered as the caller's mistake (-32602, invalid-params.ts)
 * instead of an internal error: `_wrapHandler` is the SDK's hook for subclasses around every
 * handler registered, its own included (initialize, server/discover).
 */
class GatewayServer extends Server {
  protected override _wrapHandler (method: string, handler: StoredHandler): StoredHandler {
    return super._wrapHandler(method, withInvalidParams(method, handler))
  }
}

function newServer (era: McpEra): Server {
  return new GatewayServer(SERVER_INFO, {
    // No resources.subscribe: the endpoint is stateless (nothing could hold a subscription).
    // logging: an upstream server's log messages of a call reach the client that made it (legacy clients).
    capabilities: {
      tools: { listChanged: true },
      resources: {},
      prompts: {},
      completions: {},
      logging: {},
      // The Tasks extension (SEP-2663) is defined on the 2026-07-28 wire only (tasks.ts).
      ...(era === 'modern' ? { extensions: { [TASKS_EXTENSION]: {} } } : {})
    },
    instructions: INSTRUCTIONS,
    // What a per-request 2026-07-28 server lists once the SDK's entry has served it (its installModernOnlyHandlers).
    ...(era === 'modern' ? { supportedProtocolVersions: [...SUPPORTED_PROTOCOL_VERSIONS, MODERN_REVISION] } : {}),
    cacheHints: {
      'tools/list': PRIVATE_NOW,
      'server/discover': PRIVATE_NOW,
      'prompts/list': PRIVATE_NOW,
      'resources/list': PRIVATE_NOW,
      'resources/templates/list': PRIVATE_NOW,
      'resources/read': PRIVATE_NOW
    }
  })
}

/** `signalOf`: what aborts a request's work (handlers.ts adds the exchange's signal unless it is the same). */
function registerHandlers (server: Server, era: McpEra, exchangeOf: ExchangeOf, signalOf: (ctx: ServerContext) => AbortSignal): void {
  const handlers = (ctx: ServerContext): { state: ExchangeState, tools: GatewayMcpHandlers } => {
    const state = exchangeOf(ctx)
    state.handlers ??= gatewayMcpHandlers(state.opts, era, state.budget)
    return { state, tools: state.handlers }
  }
  const surface = (ctx: ServerContext): SurfaceHandlers => {
    const state = exchangeOf(ctx)
    state.surface ??= surfaceHandlers(state.opts, state.budget)
    return state.surface
  }
  /**
   * A listing of the exchange (a JSON-RPC error past MAX_LISTINGS_PER_EXCHANGE), its bytes held
   * while the SDK's path writes them (`holdAnswer`); `list` makes it.
   */
  const listing = async <T extends object>(ctx: ServerContext, list: () => Promise<T>): Promise<T> => {
    const state = exchangeOf(ctx)
    state.listings = (state.listings ?? 0) + 1
    if (state.listings > MAX_LISTINGS_PER_EXCHANGE) {
      throw toJsonRpcError(new HttpError('GW_RATE_LIMITED', `A batch gets at most ${MAX_LISTINGS_PER_EXCHANGE} listings answered; this one was not run`))
    }
    const result = await list()
    const hold = state.opts.holdAnswer
    if (hold !== undefined) {
      const tools = (result as { tools?: unknown }).tools
      try {
        hold(Array.isArray(tools) ? jsonOnce(tools).length : JSON.stringify(result).length)
      } catch (err) {
        throw toJsonRpcError(err)
      }
    }
    return result
  }
  server.setRequestHandler('tools/list', async (_request, ctx) => await listing(ctx, async () => await handlers(ctx).tools.listTools(signalOf(ctx))))
  server.setRequestHandler('tools/call', async (request, ctx) => {
    const { state, tools } = handlers(ctx)
    const notify = async (n: { method: string, params: Record<string, unknown> }): Promise<void> => {
      await ctx.mcpReq.notify(n as Parameters<typeof ctx.mcpReq.notify>[0])
    }
    const log = (params: Record<string, unknown>): void => { notify({ method: 'notifications/message', params }).catch(() => {}) }
    const round = era === 'modern' ? callRound(ctx, log) : legacyRound(state.opts, ctx.mcpReq.id, notify)
    return await tools.callTool(request.params, signalOf(ctx), notify, round)
  })
  // Stateless: a level cannot be kept between requests; the calls' log messages are passed on as the servers send them.
  server.setRequestHandler('logging/setLevel', async () => ({}))
  server.setRequestHandler('resources/list', async (_request, ctx) => await listing(ctx, async () => await surface(ctx).listResources(signalOf(ctx))))
  server.setRequestHandler('resources/templates/list', async (_request, ctx) =>
    await listing(ctx, async () => await surface(ctx).listResourceTemplates(signalOf(ctx))))
  server.setRequestHandler('resources/read', async (request, ctx) =>
    await surface(ctx).readResource(request.params, signalOf(ctx), era === 'modern' ? callRound(ctx) : undefined))
  server.setRequestHandler('prompts/list', async (_request, ctx) => await listing(ctx, async () => await surface(ctx).listPrompts(signalOf(ctx))))
  server.setRequestHandler('prompts/get', async (request, ctx) =>
    await surface(ctx).getPrompt(request.params, signalOf(ctx), era === 'modern' ? callRound(ctx) : undefined))
  server.setRequestHandler('completion/complete', async (request, ctx) => await surface(ctx).complete(request.params, signalOf(ctx)))
}

/** RFC 5424 severities as MCP names them, least severe first. */
const LOG_LEVELS = ['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']

/** Passes on the log messages at `level` or above (a legacy server sends every level; the client asked for these). */
function atLeast (level: string, log: (params: Record<string, unknown>) => void): (params: Record<string, unknown>) => void {
  const floor = Math.max(0, LOG_LEVELS.indexOf(level))
  return (params) => { if (LOG_LEVELS.indexOf(String(params.level)) >= floor) log(params) }
}

/** A legacy client's call: what it declared, and its relay (legacy-session.ts, client-requests.ts). */
function legacyRound (opts: GatewayMcpServerOptions, id: string | number, notify: Parameters<LegacyClient['relay']>[1]): ToolCallRound | undefined {
  const client = opts.legacyClient
  return client === undefined ? undefined : { capabilities: client.capabilities, relay: client.relay(id, notify) }
}

/**
 * A 2026-07-28 tools/call's multi round-trip material, which the SDK lifts out of the params:
 * the client's declared capabilities (its envelope), the retry's answers, and the requestState
 * as the client sent it (no verify hook is configured, so the accessor gives the raw string).
 */
function callRound (ctx: ServerContext, notify: (params: Record<string, unknown>) => void = () => {}): ToolCallRound {
  const declared = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[CLIENT_CAPABILITIES_META_KEY]
  const state = ctx.mcpReq.requestState<unknown>()
  const logLevel = (ctx.mcpReq.envelope as Record<string, unknown> | undefined)?.[LOG_LEVEL_META_KEY]
  return {
    capabilities: declared !== null && typeof declared === 'object' ? declared as Record<string, unknown> : {},
    inputResponses: ctx.mcpReq.inputResponses,
    requestState: typeof state === 'string' ? state : undefined,
    // The client asked for the call's log messages (per-request logLevel): its servers are asked at that level and their messages passed on.
    ...(typeof logLevel === 'string' ? { relay: { logLevel, log: atLeast(logLevel, notify) } } : {})
  }
}
