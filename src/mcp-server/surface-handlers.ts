import { CLIENT_CAPABILITIES_META_KEY, isInputRequiredResult } from '@modelcontextprotocol/server'
import type {
  CompleteResult, GetPromptResult, InputRequiredResult, Prompt, ReadResourceResult, Resource, ResourceTemplateType as ResourceTemplate
} from '@modelcontextprotocol/server'
import { HttpError } from '../errors.js'
import type { ToolPolicy } from '../routing/policy.js'
import type { CatalogEntry, SurfaceRequest, SurfaceServer } from '../routing/source.js'
import type { CallBudget } from './budget.js'
import type { GatewayMcpServerOptions, ToolCallRound } from './handlers.js'
import type { RoundClaims } from './request-state.js'
import { toJsonRpcError, withSignal } from './handlers.js'
import { JsonRpcError } from '../routing/client-relay.js'
import { templateMatches } from './uri-template-match.js'

/** JSON-RPC "Invalid params": an unknown prompt or completion reference, and (SEP-2164) an unknown resource with `data.uri`. */
const INVALID_PARAMS = -32602

type ReadParams = Extract<SurfaceRequest, { method: 'resources/read' }>['params']
type GetParams = Extract<SurfaceRequest, { method: 'prompts/get' }>['params']
type CompleteParams = Extract<SurfaceRequest, { method: 'completion/complete' }>['params']

/**
 * Resources, resource templates, prompts and completion of the exchange's MCP servers, once for
 * both eras (server.ts registers them next to the tools handlers):
 * - which servers: exactly those the allow-list selects (Gateway.surface: tiers 2, 3 and 5,
 *   tier 2 only ever the exchange's tenant); a server that cannot be listed is left out of
 *   listings, and a read or get that finds nothing while one is down says so (not "not found").
 * - names: a prompt is exposed like a tool (a global server's own name, `user_{u}_prompt_{p}` for
 *   the tenant's, apiFunctionName(service, p) for a local service); a natural name already taken
 *   (tier order, then priority, then serverId) is exposed as `{serverId}__{p}`. Resource URIs
 *   are the servers' own, never rewritten: a read goes to the first server (same order) that
 *   listed the URI, else to the first whose template matches it.
 * - policy: each prompt is decided like a tool by its names; a server's resources and templates
 *   as one entry named `{serverId}__resources`. What it denies is not listed, and a get, read or
 *   completion of it is GW_POLICY_DENIED, as a tools/call of a denied tool (a URI is looked up in
 *   the withheld servers' lists only after the open ones miss). Reads and gets have no side
 *   effects, so a policy's readOnly and requireApproval do not hold them back.
 * - results as the server sent them (its cache fields dropped: the gateway's own apply).
 * - listings are merged across servers without pagination: each server's list is walked
 *   whole (bounded by the client's page limit and the answer-size bounds, like tools).
 * - each read, get and completion counts against the exchange's budget, as a tools/call does.
 */
export interface SurfaceHandlers {
  listResources: (signal: AbortSignal) => Promise<{ resources: Resource[] }>
  listResourceTemplates: (signal: AbortSignal) => Promise<{ resourceTemplates: ResourceTemplate[] }>
  listPrompts: (signal: AbortSignal) => Promise<{ prompts: Prompt[] }>
  /** `round`: a 2026-07-28 client's request (multi round-trip: the server may answer input_required); absent for a legacy one. */
  readResource: (params: ReadParams, signal: AbortSignal, round?: ToolCallRound) => Promise<ReadResourceResult | InputRequiredResult>
  getPrompt: (params: GetParams, signal: AbortSignal, round?: ToolCallRound) => Promise<GetPromptResult | InputRequiredResult>
  complete: (params: CompleteParams, signal: AbortSignal) => Promise<CompleteResult>
}

interface Selected {
  servers: SurfaceServer[]
  policy: ToolPolicy | undefined
}

/** A listing of one kind across the selected servers; `failed` names those that could not be listed. */
interface Lists<T> {
  perServer: Array<{ server: SurfaceServer, items: T[] }>
  failed: string[]
}

interface PromptIndex {
  prompts: Prompt[]
  byName: Map<string, { server: SurfaceServer, name: string }>
  /** The exposed names the policy withholds, with its reason: a get of one is refused, not "not found". */
  denied: Map<string, string>
  failed: string[]
}

interface ResourceIndex {
  resources: Resource[]
  owners: Map<string, SurfaceServer>
  templates: Array<{ server: SurfaceServer, template: ResourceTemplate }>
  /** The selected servers whose resources the policy withholds, with its reason (not listed unless a lookup misses). */
  closed: Array<{ server: SurfaceServer, reason: string }>
  failed: string[]
}

export function surfaceHandlers (opts: GatewayMcpServerOptions, budget: CallBudget | undefined): SurfaceHandlers {
  const { gateway, scope, caller } = opts
  let selected: Promise<Selected> | undefined
  const select = async (signal: AbortSignal): Promise<Selected> => {
    selected ??= gateway.surface(scope, caller, signal)
    return await selected
  }

  type ListMethod = 'resources/list' | 'resources/templates/list' | 'prompts/list'
  const lists = async <T>(method: ListMethod, fresh: boolean, signal: AbortSignal, servers: SurfaceServer[]): Promise<Lists<T>> => {
    const settled = await Promise.all(servers.map(async (server) => {
      try {
        return { server, items: await server.request({ method, fresh }, signal) as T[] }
      } catch {
        return { server, items: undefined }
      }
    }))
    return {
      perServer: settled.filter((s): s is { server: SurfaceServer, items: T[] } => Array.isArray(s.items)),
      failed: settled.filter((s) => !Array.isArray(s.items)).map((s) => s.server.source)
    }
  }

  const promptIndex = async (fresh: boolean, signal: AbortSignal): Promise<PromptIndex> => {
    const { servers, policy } = await select(signal)
    const listed = await lists<Prompt>('prompts/list', fresh, signal, servers)
    const prompts: Prompt[] = []
    const byName = new Map<string, { server: SurfaceServer, name: string }>()
    const denied = new Map<string, string>()
    for (const { server, items } of listed.perServer) {
      for (const prompt of items) {
        const natural = server.promptName(prompt.name)
        const exposed = byName.has(natural) ? server.qualifiedName(prompt.name) : natural
        if (byName.has(exposed)) continue
        const refusal = deniedBy(policy, server, exposed, prompt.name)
        if (refusal !== undefined) {
          if (!denied.has(exposed)) denied.set(exposed, refusal)
          continue
        }
        byName.set(exposed, { server, name: prompt.name })
        prompts.push(exposed === prompt.name ? prompt : { ...prompt, name: exposed })
      }
    }
    return { prompts, byName, denied, failed: listed.failed }
  }

  const resourceIndex = async (fresh: boolean, signal: AbortSignal): Promise<ResourceIndex> => {
    const { servers, policy } = await select(signal)
    const open: SurfaceServer[] = []
    const closed: ResourceIndex['closed'] = []
    for (const server of servers) {
      const reason = deniedBy(policy, server, server.qualifiedName('resources'), 'resources')
      if (reason === undefined) open.push(server)
      else closed.push({ server, reason })
    }
    const [resources, templates] = await Promise.all([
      lists<Resource>('resources/list', fresh, signal, open),
      lists<ResourceTemplate>('resources/templates/list', fresh, signal, open)
    ])
    const index: ResourceIndex = { resources: [], owners: new Map(), templates: [], closed, failed: [...new Set([...resources.failed, ...templates.failed])] }
    for (const { server, items } of resources.perServer) {
      for (const resource of items) {
        if (index.owners.has(resource.uri)) continue
        index.owners.set(resource.uri, server)
        index.resources.push(resource)
      }
    }
    const seen = new Set<string>()
    for (const { server, items } of templates.perServer) {
      for (const template of items) {
        if (seen.has(template.uriTemplate)) continue
        seen.add(template.uriTemplate)
        index.templates.push({ server, template })
      }
    }
    return index
  }

  /** Looks up in the cached lists, then once more in fresh ones (a server may have added it since). */
  const twice = async <I, T>(build: (fresh: boolean) => Promise<I>, find: (index: I) => T | undefined): Promise<{ hit: T | undefined, index: I }> => {
    const cached = await build(false)
    const hit = find(cached)
    if (hit !== undefined) return { hit, index: cached }
    const index = await build(true)
    return { hit: find(index), index }
  }

  /**
   * A URI (or template) no open server has: whether one whose resources the policy withholds has
   * it, listed only now (a refusal says so, as a denied tools/call does; anything else is "not found").
   */
  const refusedResource = async (index: ResourceIndex, uri: string, signal: AbortSignal): Promise<HttpError | undefined> => {
    if (index.closed.length === 0) return undefined
    const servers = index.closed.map((c) => c.server)
    const [resources, templates] = await Promise.all([
      lists<Resource>('resources/list', false, signal, servers),
      lists<ResourceTemplate>('resources/templates/list', false, signal, servers)
    ])
    const owner = resources.perServer.find(({ items }) => items.some((r) => r.uri === uri))?.server ??
      templates.perServer.find(({ items }) => items.some((t) => t.uriTemplate === uri || templateMatches(t.uriTemplate, uri)))?.server
    const closed = index.closed.find((c) => c.server === owner)
    if (closed === undefined) return undefined
    return new HttpError('GW_POLICY_DENIED', `Resource ${uri} is a resource of '${closed.server.source}': ${closed.reason}`)
  }

  /** Runs one upstream request in the exchange's budget, its failures as JSON-RPC errors (the server's own kept). */
  const rounds = surfaceRounds(opts)
  const run = async <T>(fn: () => Promise<T>): Promise<T> => {
    const refused = budget?.take()
    if (refused !== undefined) throw toJsonRpcError(refused)
    try {
      return budget !== undefined ? await budget.run(fn) : await fn()
    } catch (err) {
      throw failure(err, opts)
    }
  }

  return {
    async listResources (signal) {
      try {
        return { resources: (await resourceIndex(false, withSignal(signal, opts.signal))).resources }
      } catch (err) {
        throw failure(err, opts)
      }
    },

    async listResourceTemplates (signal) {
      try {
        return { resourceTemplates: (await resourceIndex(false, withSignal(signal, opts.signal))).templates.map((t) => t.template) }
      } catch (err) {
        throw failure(err, opts)
      }
    },

    async listPrompts (signal) {
      try {
        return { prompts: (await promptIndex(false, withSignal(signal, opts.signal))).prompts }
      } catch (err) {
        throw failure(err, opts)
      }
    },

    async readResource (params, signal, round) {
      const both = withSignal(signal, opts.signal)
      return await run(async () => {
        const { hit, index } = await twice((fresh) => resourceIndex(fresh, both), (i) => ownerOf(i, params.uri))
        if (hit === undefined) {
          throw await refusedResource(index, params.uri, both) ??
            missing(index.failed, `Resource not found: ${params.uri}`, { uri: params.uri }, 'Resource not found')
        }
        const asked = rounds.open(`resources/read:${params.uri}`, hit, round)
        const result = await hit.request({ method: 'resources/read', params: { ...params, ...asked.params } }, both)
        return rounds.answer(result, asked) ?? withoutCacheFields(result) as ReadResourceResult
      })
    },

    async getPrompt (params, signal, round) {
      const both = withSignal(signal, opts.signal)
      return await run(async () => {
        const { hit, index } = await twice((fresh) => promptIndex(fresh, both), (i) => i.byName.get(params.name))
        if (hit === undefined) throw promptMissing(index, params.name)
        const asked = rounds.open(`prompts/get:${params.name}`, hit.server, round)
        const result = await hit.server.request({ method: 'prompts/get', params: { ...params, name: hit.name, ...asked.params } }, both)
        return rounds.answer(result, asked) ?? withoutCacheFields(result) as GetPromptResult
      })
    },

    async complete (params, signal) {
      const both = withSignal(signal, opts.signal)
      const ref = params.ref as { type?: unknown, name?: unknown, uri?: unknown }
      return await run(async () => {
        if (ref.type === 'ref/prompt' && typeof ref.name === 'string') {
          const name = ref.name
          const { hit, index } = await twice((fresh) => promptIndex(fresh, both), (i) => i.byName.get(name))
          if (hit === undefined) throw promptMissing(index, name)
          const upstream = { ...params, ref: { ...params.ref, name: hit.name } }
          return withoutCacheFields(await hit.server.request({ method: 'completion/complete', params: upstream }, both)) as CompleteResult
        }
        if (ref.type === 'ref/resource' && typeof ref.uri === 'string') {
          const uri = ref.uri
          const { hit, index } = await twice((fresh) => resourceIndex(fresh, both), (i) =>
            i.templates.find((t) => t.template.uriTemplate === uri)?.server ?? i.owners.get(uri))
          if (hit === undefined) throw await refusedResource(index, uri, both) ?? missing(index.failed, `Resource template not found: ${uri}`, { uri })
          return withoutCacheFields(await hit.request({ method: 'completion/complete', params }, both)) as CompleteResult
        }
        throw new JsonRpcError(INVALID_PARAMS, 'completion/complete needs a ref of type ref/prompt (with a name) or ref/resource (with a uri)')
      })
    }
  }
}

/** The server a URI reads from: the first that listed it, else the first whose template matches it. */
function ownerOf (index: ResourceIndex, uri: string): SurfaceServer | undefined {
  return index.owners.get(uri) ?? index.templates.find((t) => templateMatches(t.template.uriTemplate, uri))?.server
}

/** A prompt no server answered with: refused when the policy withholds it (as tools/call), else not found. */
function promptMissing (index: PromptIndex, name: string): Error {
  const refusal = index.denied.get(name)
  if (refusal !== undefined) return new HttpError('GW_POLICY_DENIED', refusal)
  return missing(index.failed, `Prompt not found: ${name}`, { name })
}

/** Why the tenant's policy withholds the exposed item, or undefined when it lets it through (decided like a tool of its server; a read runs nothing). */
function deniedBy (policy: ToolPolicy | undefined, server: SurfaceServer, exposed: string, upstream: string): string | undefined {
  if (policy === undefined) return undefined
  const entry: CatalogEntry = {
    route: server.route,
    source: server.source,
    name: exposed,
    qualifiedName: server.qualifiedName(upstream),
    spec: { name: upstream, description: '', inputSchema: { type: 'object' }, annotations: { readOnlyHint: true } }
  }
  const decision = policy.decide(entry)
  return decision.kind === 'deny' ? decision.message : undefined
}

/**
 * Nothing the reachable servers list has this name or URI: -32602 with `data` (SEP-2164 for a
 * URI), unless a selected server could not be listed: then it may be its, and that is the answer.
 */
function missing (failed: string[], message: string, data: Record<string, unknown>, short = message): Error {
  if (failed.length > 0) {
    return new HttpError('GW_UPSTREAM_ERROR', `${message} on the servers that answered; could not be listed: ${failed.join(', ')}`)
  }
  return new JsonRpcError(INVALID_PARAMS, short, data)
}

/** An upstream result without the fields the gateway's own 2026-07-28 codec sets (cache hints, resultType). */
function withoutCacheFields (result: unknown): unknown {
  if (result === null || typeof result !== 'object') return result
  const { ttlMs: _ttl, cacheScope: _scope, resultType: _type, ...rest } = result as Record<string, unknown>
  return rest
}

/**
 * The JSON-RPC error of a failed surface request: the upstream server's own error with its code
 * and data (a number code: the SDK's error of either version), the gateway's errors mapped as
 * for tools; anything else is a bug, reported and answered -32603.
 */
/** One round of a multi round-trip prompts/get or resources/read, as the server that serves it sees it. */
interface SurfaceRound {
  /** What the upstream request carries: the client's capabilities, and on a retry its answers and the server's own requestState. */
  params: Record<string, unknown>
  /** What the gateway's handle binds: the request's subject and the server that serves it. */
  bound?: RoundClaims | undefined
}

/**
 * A 2026-07-28 client's prompts/get and resources/read go upstream with its declared capabilities,
 * and a server's `input_required` comes back as it sent it, its requestState inside the gateway's
 * handle (request-state.ts; bound to the tenant, the key, the request's subject and the server),
 * as for tools/call (handlers.ts). A retry's handle is opened before anything is sent: an altered,
 * expired or foreign one, or one of another server than the one serving the subject now, is -32602.
 */
function surfaceRounds (opts: GatewayMcpServerOptions): {
  open: (subject: string, server: SurfaceServer, round: ToolCallRound | undefined) => SurfaceRound
  answer: (result: unknown, round: SurfaceRound) => InputRequiredResult | undefined
} {
  const sealer = opts.requestState
  const who = { tenant: opts.scope.userId ?? opts.caller.userId ?? '_', keyId: opts.caller.keyId ?? '' }
  return {
    open (subject, server, round) {
      if (round === undefined || sealer === undefined) return { params: {} }
      const bound: RoundClaims = { ...who, name: subject, server: `${server.route}:${server.source}` }
      const params: Record<string, unknown> = { _meta: { [CLIENT_CAPABILITIES_META_KEY]: round.capabilities } }
      if (round.requestState !== undefined) {
        const opened = sealer.open(round.requestState, { ...who, name: subject })
        if (!opened.ok || opened.server !== bound.server) {
          throw new JsonRpcError(INVALID_PARAMS, 'Invalid or expired requestState; send the request again without inputResponses and requestState', {
            code: 'GW_BAD_REQUEST', statusCode: 400, reason: 'invalid_request_state'
          })
        }
        if (opened.state !== undefined) params.requestState = opened.state
      }
      if (round.inputResponses !== undefined) params.inputResponses = round.inputResponses
      return { params, bound }
    },
    answer (result, round) {
      if (!isInputRequiredResult(result)) return undefined
      if (round.bound === undefined || sealer === undefined) {
        // It was told no capabilities (a legacy client's request): it may not ask, and its answer is no result.
        throw new JsonRpcError(-32603, 'The MCP server asked for input this client cannot be asked through the gateway')
      }
      const asked = result as { inputRequests?: unknown, requestState?: unknown }
      return {
        resultType: 'input_required',
        inputRequests: (asked.inputRequests ?? {}) as InputRequiredResult['inputRequests'],
        requestState: sealer.seal({ ...round.bound, state: typeof asked.requestState === 'string' ? asked.requestState : undefined })
      } as InputRequiredResult
    }
  }
}

function failure (err: unknown, opts: GatewayMcpServerOptions): JsonRpcError {
  if (err instanceof JsonRpcError) return err
  const code = (err as { code?: unknown } | null)?.code
  if (err instanceof Error && typeof code === 'number' && Number.isSafeInteger(code)) {
    return new JsonRpcError(code, err.message.replace(/^MCP error -?\d+: /, ''), (err as { data?: unknown }).data)
  }
  if (!(err instanceof HttpError) && typeof code !== 'string') opts.onError?.(err)
  return toJsonRpcError(err)
}
