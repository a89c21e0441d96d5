import type { CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js'
import type { UpstreamCallResult, UpstreamInputRequired } from './pooled-client.js'
import type { UpstreamTask } from './task-results.js'
import { encodeUserPromptName, encodeUserServiceName, encodeUserToolName, parseUserToolName, qualifiedName, toWireName } from '../naming/names.js'
import type { CatalogEntry, SourceScope, Selection, SourceListing, SurfaceListing, SurfaceRequest, ToolSource, Unavailable } from '../routing/source.js'
import { answersWithinCall } from '../routing/client-relay.js'
import type { CallContext, ToolOutcome } from '../routing/types.js'
import { TIER_TRAITS } from '../routing/types.js'
import { flattenCallToolResult } from '../mcp/flatten.js'
import type { RegistryScope } from '../registry/types.js'
import { InputUnavailableError, upstreamFailureReason } from './errors.js'
import { oauthRequiredIn } from './upstream-auth.js'

/** The part of a registered server this source needs (the registry's StoredServer fits). */
export interface RemoteServer {
  serverId: string
  config: {
    enabled?: boolean
    priority?: number
    timeoutMs?: number
    disabledTools?: string[]
  }
  /** The registry scope it was read from (the connector picks the SSRF-guarded pool for tenants). */
  scope?: RegistryScope
  /** Set when the entry cannot be used (e.g. its secrets cannot be decrypted): listed as unavailable. */
  error?: string
}

/** Where registered servers are read from (the RegistryStore). */
export interface ServerDirectory {
  list: (scope: RegistryScope) => Promise<RemoteServer[]>
}

/** How tools are listed and called on a registered server (the client pool). */
export interface McpConnector {
  /** `key` is AI4J's client key (`{serverId}` or `user_{userId}_service_{serverId}`). */
  listTools: (key: string, server: RemoteServer, opts: { signal: AbortSignal, timeoutMs: number }) => Promise<Tool[]>
  /** `retrySafe`: the listed tool is annotated read-only or idempotent (a call that got no answer may be retried once). */
  callTool: (
    key: string,
    server: RemoteServer,
    name: string,
    args: Record<string, unknown>,
    opts: { signal: AbortSignal, timeoutMs: number, onProgress?: CallContext['onProgress'], retrySafe?: boolean, input?: CallContext['input'], tasks?: boolean }
  ) => Promise<UpstreamCallResult>
  /** Connects ahead of use where a start is slow (stdio); never rejects. Optional: connectors without it connect on use. */
  warm?: (key: string, server: RemoteServer) => Promise<void>
  /**
   * Resources, templates, prompts and completion (/mcp): a list answers its items, the others
   * the server's result; the server's own JSON-RPC error is thrown as it is. Optional:
   * a connector without it offers tools only.
   */
  surface?: (key: string, server: RemoteServer, req: SurfaceRequest, opts: { signal: AbortSignal, timeoutMs: number }) => Promise<unknown>
}

export interface RemoteSourceOptions {
  /** Each server's listing deadline: a slower server shows in `unavailable` and is skipped. */
  listDeadlineMs: number
  /** tools/call timeout when the server config sets none. */
  callTimeoutMs: number
}

interface EntryRef {
  server: RemoteServer
  /** The pool key, fixed when the entry was resolved for its tenant. */
  key: string
}

interface ScopeIndex {
  /** The registry snapshot it was built from (the directory returns the same array while fresh). */
  snapshot: RemoteServer[]
  /** The tool lists it was built from (the pool returns the same arrays while cached). */
  toolLists: Tool[][]
  builtAt: number
  byName: Map<string, CatalogEntry>
  /** Enabled servers that could not be listed: their qualified names still route to them. */
  unlisted: Map<string, RemoteServer>
  /** Of those, the ones waiting for the user's OAuth authorization (SPEC 16). */
  awaitingUser: string[]
}

interface ServerTools {
  server: RemoteServer
  tools: Tool[]
}

/** How long a name index may be reused without relisting (tool lists change rarely; registry changes are seen at once). */
const INDEX_TTL_MS = 1000
const MAX_INDEXES = 1000

function sameItems<T> (a: readonly T[], b: readonly T[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}

/** Filtered tool lists per pool list: the same (===) while neither the list nor the disabled names changed. */
const filteredLists = new WeakMap<Tool[], { disabled: readonly string[], tools: Tool[] }>()

/**
 * A server's tools without its disabled ones. The pool's own array when none is disabled, else the
 * same filtered array while nothing changed: a name index (and every listing cached against it)
 * stays valid when it is rebuilt from unchanged lists (INDEX_TTL_MS), instead of being
 * re-policed, re-rendered and re-serialised every second.
 */
function withoutDisabled (tools: Tool[], disabledTools: readonly string[] | undefined): Tool[] {
  if (disabledTools === undefined || disabledTools.length === 0) return tools
  const known = filteredLists.get(tools)
  if (known !== undefined && sameItems(known.disabled, disabledTools)) return known.tools
  const disabled = new Set(disabledTools)
  const filtered = tools.filter((t) => !disabled.has(t.name))
  filteredLists.set(tools, { disabled: [...disabledTools], tools: filtered })
  return filtered
}

/** Collision order: higher priority first, ties to the lexically smaller serverId (a sorted copy). */
function sortByPriority (servers: readonly RemoteServer[]): RemoteServer[] {
  return [...servers].sort((a, b) => (b.config.priority ?? 0) - (a.config.priority ?? 0) || (a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : 0))
}

/**
 * Tiers 2 (a tenant's remote MCP servers, route `user_mcp`) and 5 (global servers,
 * `global_mcp`). Isolation is keyed: tier 2 only ever reads the registry scope of the exact
 * userId of the request.
 */
export class RemoteMcpSource implements ToolSource {
  readonly tier: 'user_mcp' | 'global_mcp'
  readonly #directory: ServerDirectory
  readonly #connector: McpConnector
  readonly #opts: RemoteSourceOptions
  readonly #indexes = new Map<string, ScopeIndex>()
  /** Entries per listed tool object (#entry), with what they were made for. */
  readonly #entries = new WeakMap<Tool, { entry: CatalogEntry, server: RemoteServer, user: string | undefined }>()
  /** TierTraits.tenantScoped: the tenant's own servers (else the global ones). */
  readonly #tenantScoped: boolean
  /** TierTraits.encodedNames: its tools are named user_{u}_tool_{t}. */
  readonly #encodedNames: boolean

  constructor (tier: 'user_mcp' | 'global_mcp', directory: ServerDirectory, connector: McpConnector, opts: RemoteSourceOptions) {
    this.tier = tier
    this.#tenantScoped = TIER_TRAITS[tier].tenantScoped
    this.#encodedNames = TIER_TRAITS[tier].encodedNames
    this.#directory = directory
    this.#connector = connector
    this.#opts = opts
  }

  #directoryScope (scope: SourceScope): RegistryScope | undefined {
    if (!this.#tenantScoped) return { kind: 'global' }
    return scope.userId === undefined ? undefined : { kind: 'user', userId: scope.userId }
  }

  #clientKey (scope: SourceScope, serverId: string): string {
    return this.#tenantScoped && scope.userId !== undefined ? encodeUserServiceName(scope.userId, serverId) : serverId
  }

  /** The scope's servers in collision order. */
  async #servers (scope: SourceScope): Promise<RemoteServer[]> {
    const dirScope = this.#directoryScope(scope)
    if (!dirScope) return []
    return sortByPriority(await this.#directory.list(dirScope))
  }

  /** Lists each server in parallel, each against its own deadline. */
  async #listServers (servers: RemoteServer[], scope: SourceScope): Promise<{ listed: ServerTools[], unavailable: Unavailable[] }> {
    const settled = await Promise.all(servers.map(async (server) => {
      if (server.error !== undefined) return { server, error: server.error }
      if (server.config.enabled === false) return { server, error: 'The server is disabled' }
      try {
        const tools = await withTimeout(
          this.#connector.listTools(this.#clientKey(scope, server.serverId), server, { signal: scope.signal, timeoutMs: this.#opts.listDeadlineMs }),
          this.#opts.listDeadlineMs
        )
        return { server, tools: withoutDisabled(tools, server.config.disabledTools) }
      } catch (err) {
        return { server, error: describeError(err), retryAt: (err as { retryAt?: unknown }).retryAt, oauth: oauthRequiredIn(err) }
      }
    }))
    const listed: ServerTools[] = []
    const unavailable: Unavailable[] = []
    for (const s of settled) {
      if ('tools' in s && s.tools) listed.push({ server: s.server, tools: s.tools })
      else {
        const retryAt = 'retryAt' in s && typeof s.retryAt === 'number' ? new Date(s.retryAt).toISOString() : undefined
        const oauth = 'oauth' in s ? s.oauth : undefined
        unavailable.push({
          serverId: s.server.serverId,
          reason: s.error ?? 'unknown error',
          ...(retryAt !== undefined ? { retryAt } : {}),
          // The user must connect it (SPEC 16): the code and the route that starts the authorization.
          ...(oauth !== undefined ? { code: 'GW_OAUTH_REQUIRED' as const, authorize: oauth.authorize } : {})
        })
      }
    }
    return { listed, unavailable }
  }

  /**
   * The catalog entry of a listed tool, made once per tool object (the pool keeps a server's list, its
   * tool objects with it, while it is unchanged) and registry snapshot (its server object): a listing
   * then reuses the entries, and their specs, whose definition digests (pins) and rendered forms are
   * kept per spec object. Made anew per listing, they cost a 10,000-tool listing ~2.5 s of CPU in 30
   * listings for the digests alone.
   */
  #entry (scope: SourceScope, server: RemoteServer, tool: Tool): CatalogEntry {
    // A tenant's tool objects come from its own clients only; the check keeps it so whatever the pool does.
    const user = this.#tenantScoped ? scope.userId : undefined
    const known = this.#entries.get(tool)
    if (known !== undefined && known.server === server && known.user === user) return known.entry
    const entry = this.#newEntry(scope, server, tool)
    this.#entries.set(tool, { entry, server, user })
    return entry
  }

  #newEntry (scope: SourceScope, server: RemoteServer, tool: Tool): CatalogEntry {
    const name = this.#encodedNames && scope.userId !== undefined ? encodeUserToolName(scope.userId, tool.name) : tool.name
    return {
      route: this.tier,
      source: server.serverId,
      name,
      qualifiedName: qualifiedName(server.serverId, tool.name),
      priority: server.config.priority ?? 0,
      spec: {
        name: tool.name,
        description: tool.description ?? '',
        inputSchema: tool.inputSchema as Record<string, unknown>,
        ...(tool.title ? { title: tool.title } : {}),
        ...(tool.annotations ? { annotations: tool.annotations as Record<string, unknown> } : {}),
        ...(tool.outputSchema ? { outputSchema: tool.outputSchema as Record<string, unknown> } : {}),
        ...(tool.execution ? { execution: tool.execution as Record<string, unknown> } : {})
      },
      ref: { server, key: this.#clientKey(scope, server.serverId) } satisfies EntryRef
    }
  }

  async list (selection: Selection | 'all', scope: SourceScope): Promise<SourceListing> {
    const all = await this.#servers(scope)
    let servers = all
    if (selection !== 'all') {
      const wanted = new Set(selection.serverIds ?? [])
      servers = all.filter((s) => wanted.has(s.serverId))
    }
    const { listed, unavailable } = await this.#listServers(servers, scope)
    const tools = listed.flatMap(({ server, tools }) => tools.map((t) => this.#entry(scope, server, t)))
    return { tools, matched: servers.map((s) => s.serverId), unavailable }
  }

  async resolve (name: string, scope: SourceScope): Promise<CatalogEntry | undefined> {
    const index = await this.#index(scope)
    if (!index) return undefined
    const hit = index.byName.get(name)
    if (hit) return hit
    // `{serverId}__{tool}` on a registered server that could not be listed: the name is
    // explicit, so route it there and let the call report the server's failure (a tool-level
    // upstream error the model can act on) instead of claiming the tool does not exist.
    // A tenant's tool is asked for by its encoded name (`user_{u}_tool_{serverId}__{tool}`).
    const bare = this.#encodedNames ? parseUserToolName(name)?.toolName ?? name : name
    const sep = bare.indexOf('__')
    const server = sep > 0 ? index.unlisted.get(bare.slice(0, sep)) : undefined
    if (server && bare.length > sep + 2) return this.#newEntry(scope, server, { name: bare.slice(sep + 2), inputSchema: { type: 'object' } })
    // A name the model was given while the server was connected, now that the user must connect it
    // again (disconnected, refresh failed): when one server alone waits for that, the call goes there
    // and answers GW_OAUTH_REQUIRED, which tells the model what to do, rather than "no such tool".
    const [only, ...others] = index.awaitingUser
    const waiting = only !== undefined && others.length === 0 ? index.unlisted.get(only) : undefined
    return waiting === undefined ? undefined : this.#newEntry(scope, waiting, { name: bare, inputSchema: { type: 'object' } })
  }

  /**
   * A server of `scope` said its tool list changed: the scope's index is listed again on its next
   * use instead of being reused for up to INDEX_TTL_MS (the pool's list is stale already), so a
   * client that re-lists on the notification gets the new tools.
   */
  toolsChanged (scope: RegistryScope): void {
    const cached = this.#indexes.get(scope.kind === 'global' ? 'g' : `u:${scope.userId}`)
    if (cached !== undefined) cached.builtAt = 0
  }

  /** Changes (a new object) whenever the names or tools this source offers the scope change. */
  async catalogToken (scope: SourceScope): Promise<unknown> {
    return await this.#index(scope)
  }

  /**
   * Every name this source answers to for a scope, built from one listing of its servers:
   * qualified names first (they name their server explicitly), then natural names, raw tool
   * names (the first server in priority order wins) and the wire forms of all of them. Reused
   * while the registry snapshot is the same and for at most INDEX_TTL_MS, so a listing that
   * resolves hundreds of names lists each server once, not once per name.
   */
  async #index (scope: SourceScope): Promise<ScopeIndex | undefined> {
    const dirScope = this.#directoryScope(scope)
    if (!dirScope) return undefined
    const key = dirScope.kind === 'global' ? 'g' : `u:${dirScope.userId}`
    const snapshot = await this.#directory.list(dirScope)
    const cached = this.#indexes.get(key)
    if (cached && cached.snapshot === snapshot && Date.now() - cached.builtAt < INDEX_TTL_MS) return cached
    const { listed, unavailable } = await this.#listServers(sortByPriority(snapshot), scope)
    const toolLists = listed.map((l) => l.tools)
    const awaitingUser = unavailable.filter((u) => u.code === 'GW_OAUTH_REQUIRED').map((u) => u.serverId)
    // Same registry snapshot and the very same tool lists (the pool returns its cached arrays):
    // keep the index object, so listings cached against it stay valid.
    if (cached && cached.snapshot === snapshot && sameItems(cached.toolLists, toolLists) && sameItems(cached.awaitingUser, awaitingUser)) {
      cached.builtAt = Date.now()
      return cached
    }
    const byName = new Map<string, CatalogEntry>()
    const add = (alias: string, entry: CatalogEntry): void => {
      if (!byName.has(alias)) byName.set(alias, entry)
    }
    const entries = listed.flatMap(({ server, tools }) => tools.map((tool) => this.#entry(scope, server, tool)))
    for (const entry of entries) {
      add(entry.qualifiedName ?? '', entry)
      add(toWireName(entry.qualifiedName ?? ''), entry)
    }
    for (const entry of entries) {
      add(entry.name, entry)
      add(toWireName(entry.name), entry)
      add(entry.spec.name, entry)
    }
    byName.delete('')
    const listedIds = new Set(listed.map((l) => l.server.serverId))
    const unlisted = new Map(snapshot
      .filter((s) => !listedIds.has(s.serverId) && s.config.enabled !== false && s.error === undefined)
      .map((s) => [s.serverId, s]))
    const index: ScopeIndex = { snapshot, toolLists, builtAt: Date.now(), byName, unlisted, awaitingUser }
    this.#indexes.delete(key)
    this.#indexes.set(key, index)
    // A bounded cache: the least recently built scope goes first.
    if (this.#indexes.size > MAX_INDEXES) this.#indexes.delete(this.#indexes.keys().next().value as string)
    return index
  }

  /**
   * Warms the scope's servers (or those of `serverIds`) in the background, so that a slow start
   * happens before the first listing needs it. Disabled and unreadable servers are skipped.
   */
  async warm (scope: SourceScope, serverIds?: readonly string[]): Promise<void> {
    const warm = this.#connector.warm
    if (warm === undefined) return
    const wanted = serverIds === undefined ? undefined : new Set(serverIds)
    const servers = (await this.#servers(scope))
      .filter((s) => (wanted === undefined || wanted.has(s.serverId)) && s.error === undefined && s.config.enabled !== false)
    await Promise.all(servers.map(async (server) => { await warm.call(this.#connector, this.#clientKey(scope, server.serverId), server) }))
  }

  /**
   * The selected servers of the scope (tier 2: only ever the scope's tenant) for /mcp's resources,
   * prompts and completion, through the same pooled clients as their tools. Lists have the
   * listing deadline, reads, prompts and completion the call timeout. Disabled and unreadable
   * servers are unavailable.
   */
  async surface (selection: Selection, scope: SourceScope): Promise<SurfaceListing> {
    const connector = this.#connector
    const surface = connector.surface
    const wanted = new Set(selection.serverIds ?? [])
    const selected = (await this.#servers(scope)).filter((s) => wanted.has(s.serverId))
    const unavailable: Unavailable[] = []
    const servers = []
    for (const server of selected) {
      if (server.error !== undefined || server.config.enabled === false || surface === undefined) {
        unavailable.push({ serverId: server.serverId, reason: server.error ?? (surface === undefined ? 'Serves tools only' : 'The server is disabled') })
        continue
      }
      const key = this.#clientKey(scope, server.serverId)
      const userId = this.#encodedNames ? scope.userId : undefined
      const listMs = this.#opts.listDeadlineMs
      const callMs = server.config.timeoutMs ?? this.#opts.callTimeoutMs
      servers.push({
        route: this.tier,
        source: server.serverId,
        priority: server.config.priority ?? 0,
        promptName: (name: string) => userId !== undefined ? encodeUserPromptName(userId, name) : name,
        qualifiedName: (name: string) => qualifiedName(server.serverId, name),
        request: async (req: SurfaceRequest, signal: AbortSignal) => await surface.call(connector, key, server, req, {
          signal,
          timeoutMs: req.method.endsWith('/list') ? listMs : callMs
        })
      })
    }
    return { servers, matched: selected.map((s) => s.serverId), unavailable }
  }

  /** One server's tools as MCP Tool objects (GET /users/{u}/mcp/servers/{s}/tools). */
  async serverTools (
    serverId: string,
    scope: SourceScope
  ): Promise<{ ok: true, tools: Tool[] } | { ok: false, reason: 'not-found' | 'unavailable' | 'oauth-required', message: string }> {
    const server = (await this.#servers(scope)).find((s) => s.serverId === serverId)
    if (!server) return { ok: false, reason: 'not-found', message: `No server '${serverId}' is registered ${this.#tenantScoped ? 'for this tenant' : 'globally'}` }
    const { listed, unavailable } = await this.#listServers([server], scope)
    if (listed[0]) return { ok: true, tools: listed[0].tools }
    if (unavailable[0]?.code === 'GW_OAUTH_REQUIRED') return { ok: false, reason: 'oauth-required', message: unavailable[0].reason }
    return { ok: false, reason: 'unavailable', message: `Server '${serverId}' could not be listed: ${unavailable[0]?.reason ?? 'unknown error'}` }
  }

  async call (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext): Promise<ToolOutcome> {
    const { server, key } = entry.ref as EntryRef
    // A call whose client can be asked waits for a person's answer as long as the call may last
    // (INVOKE_TIMEOUT_MS), not only the server's default deadline; a server's own timeoutMs still holds.
    const askable = ctx.input?.relay?.ask !== undefined
    const timeoutMs = Math.min(server.config.timeoutMs ?? (askable ? ctx.timeoutMs : this.#opts.callTimeoutMs), ctx.timeoutMs)
    // The annotations of the listed tool: a name routed to a server that could not be listed has none.
    const annotations = entry.spec.annotations
    const retrySafe = annotations?.readOnlyHint === true || annotations?.idempotentHint === true
    const input = ctx.input
    // A retry with answers goes to the server that asked, or nowhere.
    if (input?.server !== undefined && input.server !== key) {
      return { ok: false, reason: 'tool-error', message: `The MCP server that asked for input no longer serves '${entry.name}' (the registry changed between the rounds); call the tool again without inputResponses` }
    }
    try {
      const result = await this.#connector.callTool(key, server, entry.spec.name, args, {
        signal: ctx.signal,
        timeoutMs,
        retrySafe,
        ...(ctx.onProgress !== undefined ? { onProgress: ctx.onProgress } : {}),
        ...(input !== undefined ? { input } : {}),
        ...(ctx.tasks === true ? { tasks: true } : {})
      })
      if ('resultType' in result && result.resultType === 'input_required') {
        return inputRequiredOutcome(result as UpstreamInputRequired, key, input !== undefined)
      }
      if ('resultType' in result && result.resultType === 'task') return taskOutcome(result as UpstreamTask, this.tier, server.serverId)
      const flat = flattenCallToolResult(result as CallToolResult)
      return { ok: true, value: flat.text, isError: flat.isError, trace: flat.trace }
    } catch (err) {
      if (err instanceof InputUnavailableError) {
        const message = input === undefined
          ? INPUT_UNAVAILABLE
          : answersWithinCall(input.relay) ? err.message : `${err.message} (the MCP server asks for input of a kind this client did not declare in its capabilities)`
        // A caller that declares its capabilities answers the server's -32021 as the server sent it.
        const declaring = input !== undefined && !answersWithinCall(input.relay) && err.requiredCapabilities !== undefined
        return { ok: false, reason: 'tool-error', message, ...(declaring ? { requiredCapabilities: err.requiredCapabilities } : {}) }
      }
      const oauth = oauthRequiredIn(err)
      if (oauth !== undefined) return { ok: false, reason: 'oauth-required', message: oauth.message }
      const code = (err as { code?: unknown }).code
      const reason = code === 'GW_UPSTREAM_TIMEOUT'
        ? 'timeout'
        : code === 'GW_UPSTREAM_UNAVAILABLE' || code === 'GW_UPSTREAM_TOO_LARGE' || code === 'GW_UPSTREAM_BUDGET_EXHAUSTED'
          ? upstreamFailureReason(code)
          : 'upstream'
      return { ok: false, reason, message: `MCP server '${server.serverId}' failed: ${describeError(err)}` }
    }
  }
}

/** The tool error of a call whose server asks for input its caller cannot be given (REST without clientCapabilities, a legacy MCP client). */
const INPUT_UNAVAILABLE =
  'The MCP server asks for input (elicitation/sampling/roots), which this client\'s protocol revision cannot receive through the gateway yet ' +
  '(over POST /invoke: declare clientCapabilities to receive it as status input_required)'

/**
 * A server's `input_required`: for a caller that can answer it, the outcome carries it as it
 * came (never flattened into the output, never an error; the trace names only what is asked,
 * without the server's requestState); for any other caller, a tool error that says why.
 */
function inputRequiredOutcome (result: UpstreamInputRequired, server: string, canAnswer: boolean): ToolOutcome {
  if (!canAnswer) return { ok: false, reason: 'tool-error', message: INPUT_UNAVAILABLE }
  const inputRequests = result.inputRequests ?? {}
  const asked = Object.entries(inputRequests).map(([key, req]) => `${key} (${String((req as { method?: unknown } | null)?.method ?? 'unknown')})`)
  return {
    ok: true,
    value: `The MCP server asks for input before it answers: ${asked.length > 0 ? asked.join(', ') : 'none (it continues with its requestState)'}`,
    trace: { resultType: 'input_required', inputRequests },
    inputRequired: { inputRequests, ...(result.requestState !== undefined ? { requestState: result.requestState } : {}), server }
  }
}

/**
 * A server that runs the call as a task (Tasks extension; its caller declared the extension, so
 * it can take one): not a result and not an error. The outcome carries the task as it came and
 * which server runs it (the caller's polls go there); `value` only names the task, for logs.
 */
function taskOutcome (task: UpstreamTask, route: 'user_mcp' | 'global_mcp', serverId: string): ToolOutcome {
  const { resultType: _resultType, ...fields } = task
  return {
    ok: true,
    value: `The MCP server runs the call as a task (${String(task.status ?? 'working')})`,
    trace: { resultType: 'task', status: task.status },
    task: { route, serverId, task: fields }
  }
}

function describeError (err: unknown): string {
  return err instanceof Error ? err.message : String(err)
}

async function withTimeout<T> (promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
  })
  promise.catch(() => {})
  try {
    return await Promise.race([promise, deadline])
  } finally {
    clearTimeout(timer)
  }
}
