import { MissingRequiredClientCapabilityError } from '@modelcontextprotocol/server'
import type { CallToolResult, ClientCapabilities, InputRequiredResult, Tool } from '@modelcontextprotocol/server'
import type { InvokeBodyT } from '../api/invoke.js'
import { HttpError, toJsonRpcFailure } from '../errors.js'
import type { Gateway } from '../gateway.js'
import { splitComma } from '../routing/allow-list.js'
import type { InvokeResult } from '../routing/router.js'
import type { Caller, ToolProgress } from '../routing/types.js'
import { JsonRpcError } from '../routing/client-relay.js'
import type { ClientRelay } from '../routing/client-relay.js'
import { TIER_TRAITS } from '../routing/types.js'
import { CallBudget } from './budget.js'
import type { CallLimits } from './budget.js'
import { mcpListingQuery } from './json-rpc.js'
import { foundByToolSearch, TOOL_SEARCH } from '../listing/tool-search.js'
import type { McpQueryT } from './json-rpc.js'
import type { RequestStateSealer } from './request-state.js'
import { sealedTaskResult } from './tasks.js'
import { jsonOnce } from './known-json.js'

/** What one tools/call did, for the HTTP layer's log line and overhead accounting. */
export type McpCallRecord =
  | { ok: true, result: InvokeResult }
  | { ok: false, name: string, error: HttpError }

/** The MCP revisions the /mcp endpoint serves, by their wire shape: legacy (2025-11-25 and earlier) or 2026-07-28. */
export type McpEra = 'legacy' | 'modern'

export interface GatewayMcpServerOptions {
  gateway: Gateway
  scope: McpQueryT
  caller: Caller
  /** Aborted when the HTTP exchange ends early (the client went away). */
  signal?: AbortSignal
  /** Called once per tools/call, success or refusal. */
  onCall?: (record: McpCallRecord) => void
  /** Unexpected failures (bugs, an unreachable registry): the client gets -32603 without details. */
  onError?: (err: unknown) => void
  /** The tenant's limits for this exchange (each tools/call of a batch counts); unset = unlimited. */
  limits?: CallLimits
  /**
   * Seals and opens the requestState handles of the `input_required` rounds of prompts/get and
   * resources/read (surface-handlers.ts). A tools/call's rounds are the Gateway's (it has the same sealer).
   */
  requestState?: RequestStateSealer
  /** A legacy client's channel for the requests and log messages of its calls (endpoint.ts); absent for a 2026-07-28 one. */
  legacyClient?: LegacyClient | undefined
  /** Search mode: a `tool_search` call added tools to this client's listing (its list_changed streams are told). */
  onListingChanged?: () => void
  /**
   * Set on the SDK's path, which writes each answer as one JSON text (budget.ts AnswerBytes): holds a
   * listing's bytes until the exchange ends; throws GW_RATE_LIMITED past the tenant's share.
   */
  holdAnswer?: (bytes: number) => void
}

/** What a legacy client declared, and how a call of it reaches it while the call runs. */
export interface LegacyClient {
  capabilities: Record<string, unknown>
  /** The relay of the call with this JSON-RPC id: requests go out on its response stream, logs through `notify`. */
  relay: (requestId: string | number, notify: (notification: { method: string, params: Record<string, unknown> }) => Promise<void>) => ClientRelay
}

/**
 * What a 2026-07-28 tools/call brings besides its params (the SDK lifts these out of them): the
 * client's declared capabilities (its envelope), and on a retry its answers and the handle.
 */
export interface ToolCallRound {
  capabilities: Record<string, unknown>
  /** A client the call's questions and log messages are relayed to while it runs (a legacy one). */
  relay?: ClientRelay | undefined
  inputResponses?: Record<string, unknown> | undefined
  requestState?: string | undefined
}

/** The params of a tools/call as both eras send them (the 2026 `_meta` envelope is the SDK's concern). */
export interface ToolCallParams {
  name: string
  arguments?: Record<string, unknown> | undefined
  _meta?: { progressToken?: string | number | undefined } | undefined
}

/** Sends a notification related to the request being served (progress), on its own stream. */
export type NotifyRelated = (notification: { method: 'notifications/progress', params: Record<string, unknown> }) => Promise<void>

/**
 * What the gateway's MCP server does, once for both eras: tools/list is exactly GET
 * /tools?format=mcp for the same tenant and allow-list, and tools/call is POST /invoke with
 * `allow` set to that allow-list: same routing, same isError, same truncation. An MCP tool's
 * result reaches the client as its server sent it (toCallToolResult); other tools' results
 * are their `output` as one text item. A tools/call with a progressToken gets the upstream
 * server's progress under that token. The trace goes to onCall (for the logs). Each era's
 * server (v1 SDK for legacy, v2 for 2026-07-28) registers these as its request handlers.
 */
export interface GatewayMcpHandlers {
  listTools: (signal: AbortSignal) => Promise<{ tools: Tool[] }>
  /** `round`: a 2026-07-28 client's call (it can receive `input_required`); absent for a legacy client. */
  callTool: (params: ToolCallParams, signal: AbortSignal, notify: NotifyRelated, round?: ToolCallRound) => Promise<CallToolResult | InputRequiredResult>
}

/** The exchange's share of the tenant's limits, shared by every handler of its server (one per exchange). */
export function exchangeBudget (opts: GatewayMcpServerOptions): CallBudget | undefined {
  return opts.limits !== undefined ? new CallBudget(opts.limits) : undefined
}

export function gatewayMcpHandlers (opts: GatewayMcpServerOptions, era: McpEra, budget = exchangeBudget(opts)): GatewayMcpHandlers {
  const { gateway, scope, caller } = opts
  const allow = { functions: splitComma(scope.functions), mcp: splitComma(scope.mcp) }
  const report = (err: unknown): JsonRpcError => {
    if (!(err instanceof HttpError) && !(err instanceof JsonRpcError) && !hasRpcCode(err)) opts.onError?.(err)
    return toJsonRpcError(err)
  }
  return {
    async listTools (signal) {
      try {
        const listing = await gateway.listTools(mcpListingQuery(scope), caller, withSignal(signal, opts.signal))
        const tools = era === 'modern' ? withoutExecution(listing.tools) : listing.tools
        // Serialised once per cached listing: the lean transport writes these bytes (known-json.ts).
        jsonOnce(tools)
        return { tools: tools as Tool[] }
      } catch (err) {
        throw report(err)
      }
    },

    async callTool (params, signal, notify, round) {
      const { name } = params
      const refused = budget?.take()
      if (refused !== undefined) {
        gateway.refused('mcp', name, refused)
        opts.onCall?.({ ok: false, name, error: refused })
        throw toJsonRpcError(refused)
      }
      const progressToken = params._meta?.progressToken
      // The token is this request's own: the SDK client upstream uses one of its own per call, and
      // this closure maps it back, so one call's progress never reaches another's.
      const onProgress = progressToken === undefined
        ? undefined
        : (p: ToolProgress): void => {
            const progress = {
              progressToken,
              progress: p.progress,
              ...(p.total !== undefined ? { total: p.total } : {}),
              ...(p.message !== undefined ? { message: p.message } : {})
            }
            // Best effort: a client that went away fails the call through the signal instead.
            notify({ method: 'notifications/progress', params: progress }).catch(() => {})
          }
      const invoke = async (): ReturnType<Gateway['invoke']> => await gateway.invoke({
        name,
        arguments: params.arguments ?? {},
        ...(scope.userId !== undefined ? { userId: scope.userId } : {}),
        allow,
        trace: true,
        // A 2026-07-28 client's round, opened and sealed by the gateway as for REST (src/routing/input-rounds.ts):
        // a handle that does not open is GW_INVALID_REQUEST_STATE, -32602 invalid_request_state here.
        ...(era === 'modern' && round !== undefined
          ? {
              clientCapabilities: round.capabilities as InvokeBodyT['clientCapabilities'],
              ...(round.inputResponses !== undefined ? { inputResponses: round.inputResponses } : {}),
              ...(round.requestState !== undefined ? { requestState: round.requestState } : {})
            }
          : {}),
        // A legacy client that declared capabilities is asked within the call (client-relay.ts).
        ...(era === 'legacy' && round?.relay !== undefined ? { clientCapabilities: round.capabilities as InvokeBodyT['clientCapabilities'] } : {})
      }, caller, withSignal(signal, opts.signal), {
        via: 'mcp',
        onProgress,
        relay: round !== undefined && (era === 'modern' || round.relay !== undefined) ? round.relay : undefined
      })
      let outcome
      try {
        outcome = budget !== undefined ? await budget.run(invoke) : await invoke()
      } catch (err) {
        throw report(err)
      }
      if (!outcome.ok) {
        opts.onCall?.({ ok: false, name, error: outcome.error })
        throw toJsonRpcError(outcome.error)
      }
      opts.onCall?.({ ok: true, result: outcome.result })
      // Search mode: what the model found joins this client's listing, announced with list_changed.
      if (name === TOOL_SEARCH && scope.mode === 'search' && !outcome.result.isError) {
        const found = foundByToolSearch(outcome.result.trace)
        const changed = found.length > 0 && await gateway.rememberFound(scope, caller, found).catch((err: unknown) => { report(err); return false })
        if (changed) opts.onListingChanged?.()
      }
      const required = outcome.result.requiredCapabilities
      if (era === 'modern' && required !== null && typeof required === 'object') {
        // The server needs a capability the client did not declare: its -32021, as the revision says (HTTP 400).
        throw new MissingRequiredClientCapabilityError({ requiredCapabilities: required as ClientCapabilities }, outcome.result.error?.message)
      }
      const result = outcome.result
      if (result.status === 'input_required') {
        // The server's questions as it sent them; its requestState only inside the gateway's handle.
        return {
          resultType: 'input_required',
          inputRequests: result.inputRequests as InputRequiredResult['inputRequests'],
          requestState: result.requestState as string
        } as InputRequiredResult
      }
      // The server runs the call as a task (the client declared the Tasks extension): its handle (tasks.ts).
      const created = outcome.result.task
      if (created !== undefined && opts.requestState !== undefined) {
        const owner = { tenant: scope.userId ?? caller.userId ?? '_', keyId: caller.keyId ?? '' }
        return sealedTaskResult(opts.requestState, owner, created) as unknown as CallToolResult
      }
      return toCallToolResult(outcome.result, era)
    }
  }
}

/** A cached listing's tools as 2026-07-28 lists them, made once per listing. */
const modernTools = new WeakMap<readonly unknown[], readonly unknown[]>()

/**
 * The tools without `execution` (the legacy Tasks' taskSupport), which 2026-07-28 deleted: the SDK
 * strips it from each tool of every answer (a new array per answer, never the cached one).
 */
function withoutExecution (tools: readonly unknown[]): readonly unknown[] {
  let modern = modernTools.get(tools)
  if (modern === undefined) {
    const has = (tool: unknown): tool is { execution?: unknown } => tool !== null && typeof tool === 'object' && 'execution' in tool
    modern = tools.some(has) ? tools.map((tool) => { if (!has(tool)) return tool; const { execution: _, ...rest } = tool; return rest }) : tools
    modernTools.set(tools, modern)
  }
  return modern
}

const MCP_ERROR_PREFIX = /^MCP error -?\d+: /

/** An error of either SDK carrying a JSON-RPC code (McpError of v1, ProtocolError of v2). */
function hasRpcCode (err: unknown): err is Error & { code: number, data?: unknown } {
  return err instanceof Error && Number.isSafeInteger((err as { code?: unknown }).code) &&
    (err.name === 'McpError' || err.name === 'ProtocolError')
}

/** The JSON-RPC error for a failed MCP request, as toJsonRpcFailure (src/errors.ts) maps it. */
export function toJsonRpcError (err: unknown): JsonRpcError {
  if (err instanceof JsonRpcError) return err
  if (hasRpcCode(err)) return new JsonRpcError(err.code, err.message.replace(MCP_ERROR_PREFIX, ''), err.data)
  const { rpcCode, message, data } = toJsonRpcFailure(err)
  return new JsonRpcError(rpcCode, message, data)
}

const CONTENT_TYPES: ReadonlySet<string> = new Set(['text', 'image', 'audio', 'resource_link', 'resource'])
/** Items kept beside the capped text when a result's text was truncated: they carry no text of their own. */
const NON_TEXT_TYPES: ReadonlySet<string> = new Set(['image', 'audio', 'resource_link'])

/**
 * The tools/call result for one invoke result. An MCP tool's (local or remote) as its server
 * sent it: its content items (images, audio, resources and links included), its
 * structuredContent (the tool's outputSchema is in tools/list, and clients check one against
 * the other) and its own isError. That comes from the invoke's trace, the raw result as
 * received. Two cases keep the gateway's limits: when the text was cut to the output cap,
 * the text is the capped `output` followed by the items without text (images, audio, links,
 * blob resources); and a result with no content item gets `output` as its text, so a client
 * that ignores structuredContent still reads something. Everything else (built-in and
 * function tools, a call the gateway failed) is `output` as one text item.
 * structuredContent is any JSON value in 2026-07-28, an object before: a legacy client gets a
 * non-object one only as the text.
 */
function toCallToolResult (result: InvokeResult, era: McpEra): CallToolResult {
  const raw = mcpTrace(result)
  if (raw === undefined) return { content: [{ type: 'text', text: result.output }], isError: result.isError }
  let content = raw.content as CallToolResult['content']
  if (result.truncated) {
    content = [
      { type: 'text', text: result.output },
      ...content.filter((item) => NON_TEXT_TYPES.has(item.type) || (item.type === 'resource' && 'blob' in item.resource))
    ]
  } else if (content.length === 0 && result.output !== '') {
    content = [{ type: 'text', text: result.output }]
  }
  const sc = raw.structuredContent
  const keep = sc !== undefined && (era === 'modern' || (sc !== null && typeof sc === 'object' && !Array.isArray(sc)))
  return {
    content,
    ...(keep ? { structuredContent: sc as Record<string, unknown> } : {}),
    isError: result.isError
  }
}

/** The raw MCP result in an MCP tool's trace, when every item is of a type MCP defines. */
function mcpTrace (result: InvokeResult): { content: unknown[], structuredContent?: unknown } | undefined {
  if (!TIER_TRAITS[result.route].mcpResults) return undefined
  const trace = result.trace as { content?: unknown, structuredContent?: unknown } | null
  if (trace === null || typeof trace !== 'object' || !Array.isArray(trace.content)) return undefined
  const known = trace.content.every((item: unknown) =>
    item !== null && typeof item === 'object' && CONTENT_TYPES.has((item as { type?: unknown }).type as string))
  if (!known) return undefined
  return trace as { content: unknown[], structuredContent?: unknown }
}

export function withSignal (a: AbortSignal, b: AbortSignal | undefined): AbortSignal {
  return b === undefined || b === a ? a : AbortSignal.any([a, b])
}
