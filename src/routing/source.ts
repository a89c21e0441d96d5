import type { CallContext, Tier, ToolOutcome, ToolSpec } from './types.js'

/** One tool as a source offers it to one tenant, with everything needed to name, route and call it. */
export interface CatalogEntry {
  route: Tier
  /** `builtin`, the function's name, the local MCP service's name, or the serverId. */
  source: string
  /**
   * The natural exposed name in this tier's scheme (docs/ARCHITECTURE.md#names), before wire shortening:
   * built-in name, function name, apiFunctionName(service, tool), `user_{u}_tool_{t}`, or the
   * MCP tool's own name for global servers.
   */
  name: string
  /** `{serverId}__{toolName}` for MCP tools; the fallback name when `name` is shadowed. */
  qualifiedName?: string
  spec: ToolSpec
  /** Collision rank among servers of one tier: higher wins, ties to the smaller serverId. */
  priority?: number
  /** Opaque handle the owning source uses in call(). */
  ref?: unknown
}

/** A request-scoped allow-list, already split by kind. An empty or absent list selects nothing. */
export interface Selection {
  /** From `functions=` after group expansion: built-in, function and local MCP tool names. */
  names?: readonly string[]
  /** From `mcp=`: serverIds. */
  serverIds?: readonly string[]
}

/** Whose tools a listing or a name lookup is for, and when to give up. */
export interface SourceScope {
  /** The tenant whose tier-2 servers take part; undefined means none. */
  userId: string | undefined
  signal: AbortSignal
}

export interface Unavailable {
  serverId: string
  reason: string
  /** ISO time from which the server is tried again (its circuit breaker is open). */
  retryAt?: string
  /** `GW_OAUTH_REQUIRED`: the server needs the tenant's OAuth authorization (SPEC 16). */
  code?: 'GW_OAUTH_REQUIRED'
  /** With `code`: the route that starts the authorization (POST, relative to the gateway). */
  authorize?: string
}

export interface SourceListing {
  tools: CatalogEntry[]
  /** The selected names or serverIds this source owns (so lower tiers are not asked for them). */
  matched: string[]
  /** Selected servers this source owns that could not be listed (dead, slow, disabled). */
  unavailable: Unavailable[]
}

/**
 * One source of tools. The router asks sources in priority order (docs/ARCHITECTURE.md#tiers) and never looks
 * inside them: listing, resolving a name, and calling all go through this interface.
 */
export interface ToolSource {
  readonly tier: Tier
  /** Tools for the selection, or every tool the source can offer the scope ('all', for /catalog). */
  list: (selection: Selection | 'all', scope: SourceScope) => Promise<SourceListing>
  /**
   * The entry a model-facing name refers to in this source, if any. Sources accept their
   * natural names, qualified names and the wire names derived from either. A source with a
   * static catalog answers at once (no promise): the router then resolves a call without waiting.
   */
  resolve: (name: string, scope: SourceScope) => CatalogEntry | undefined | Promise<CatalogEntry | undefined>
  /** Runs the tool. Arguments were already validated against `entry.spec.inputSchema`. */
  call: (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext) => Promise<ToolOutcome>
  /**
   * For sources whose tools change at run time: a value that is the same object (===) for as
   * long as what the source offers the scope is unchanged. Listings are cached against it.
   */
  catalogToken?: (scope: SourceScope) => Promise<unknown>
  /** Sources of servers (tiers 2 and 5): one server's live tool list, for debugging. */
  serverTools?: (
    serverId: string,
    scope: SourceScope
  ) => Promise<{ ok: true, tools: unknown[] } | { ok: false, reason: 'not-found' | 'unavailable' | 'oauth-required', message: string }>
  /** Sources of MCP servers (tiers 2, 3, 5): the selected servers' resources, prompts and completion for /mcp. */
  surface?: McpSurfaceSource['surface']
}

export function sameEntry (a: CatalogEntry, b: CatalogEntry): boolean {
  return a.route === b.route && a.source === b.source && a.spec.name === b.spec.name
}

/**
 * What /mcp asks of one MCP server besides its tools (resources, resource templates, prompts,
 * completion). Lists answer every item the server has (all pages); `fresh` skips a cached list.
 */
export type SurfaceRequest =
  | { method: 'resources/list' | 'resources/templates/list' | 'prompts/list', fresh?: boolean }
  | { method: 'resources/read', params: { uri: string } & Record<string, unknown> }
  | { method: 'prompts/get', params: { name: string, arguments?: Record<string, string> } & Record<string, unknown> }
  | { method: 'completion/complete', params: { ref: Record<string, unknown> } & Record<string, unknown> }
  /** The Tasks extension (SEP-2663): a task the server created for a call, by the server's own taskId. */
  | { method: TaskMethod, params: { taskId: string } & Record<string, unknown> }

/** The requests of the Tasks extension a caller makes of the server that runs its task. */
export type TaskMethod = 'tasks/get' | 'tasks/update' | 'tasks/cancel'

/**
 * One allow-listed MCP server (tiers 2, 3 and 5) as /mcp serves its resources, templates, prompts
 * and completion: its own results, as it sent them. Lists answer the items' array (empty when
 * the server does not offer the capability); the others the result object. Failures: a JSON-RPC
 * error the server answered is thrown as the SDK's error (its code and data kept), anything else
 * as the gateway's error (an unreachable server, a timeout).
 */
export interface SurfaceServer {
  route: Tier
  /** serverId, or the local MCP service's name. */
  source: string
  /** Collision rank among servers of one tier: higher wins, ties to the smaller source. */
  priority: number
  /** A prompt's natural exposed name in the tier's scheme (as a tool's: own name, user_{u}_prompt_{p}, apiFunctionName). */
  promptName: (name: string) => string
  /** `{source}__{name}`: a prompt's name when its natural one is taken; also what the tool policy sees for the server's resources (`{source}__resources`). */
  qualifiedName: (name: string) => string
  request: (req: SurfaceRequest, signal: AbortSignal) => Promise<unknown>
}

export interface SurfaceListing {
  servers: SurfaceServer[]
  /** The selected names or serverIds this source owns (so lower tiers are not asked for them). */
  matched: string[]
  /** Selected servers this source owns that cannot be used (disabled, unreadable config). */
  unavailable: Unavailable[]
}

/** A source of MCP servers (tiers 2, 3, 5): the servers a selection names, for the MCP surface beyond tools. */
export interface McpSurfaceSource {
  surface: (selection: Selection, scope: SourceScope) => Promise<SurfaceListing>
}

/**
 * Why the gateway cannot run a tool, or undefined. An MCP tool with `execution.taskSupport:
 * "required"` only runs as an MCP task (a call that answers at once with a task to poll); the
 * gateway calls tools synchronously, so such a tool would always fail. It is not offered, its
 * listing says why in `diagnostics`, and a call names the reason.
 */
export function unsupportedReason (entry: CatalogEntry): string | undefined {
  if (entry.spec.execution?.taskSupport === 'required') {
    return `Tool '${entry.name}' runs only as an MCP task (execution.taskSupport "required"); the gateway calls tools synchronously and does not support MCP tasks`
  }
  return undefined
}
