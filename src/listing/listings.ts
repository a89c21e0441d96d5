import { HttpError } from '../errors.js'
import { renderTools } from '../routing/formats.js'
import type { ToolFormat } from '../routing/formats.js'
import { VersionedCache } from '../routing/versioned-cache.js'
import { splitComma } from '../routing/allow-list.js'
import type { AllowList, Unresolved } from '../routing/allow-list.js'
import type { Diagnostic } from '../routing/diagnostic.js'
import type { ListedTool, ToolRouter } from '../routing/router.js'
import { definitionChangeMessage } from '../routing/policy.js'
import type { ToolPolicy } from '../routing/policy.js'
import type { Unavailable } from '../routing/source.js'
import { ToolIndex, toolDocument } from '../search/index.js'
import type { Embedder, ToolDocument } from '../search/index.js'
import { describeRunToolsScript, RUN_TOOLS_SCRIPT } from '../code-mode/index.js'
import { deferTools } from './deferral.js'
import { describeToolSearch, findListed } from './search-mode.js'
import { MemoryWorkingSets, WORKING_SET_MAX, WORKING_SET_TTL_MS, workingSetKey } from './working-sets.js'
import type { WorkingSetStore } from './working-sets.js'

export interface ListToolsRequest {
  functions?: string
  mcp?: string
  userId?: string
  format?: ToolFormat
  strict?: boolean
  /** `search`: only `tool_search` and the pinned tools (SPEC 17); `code`: only `run_tools_script` and the pinned tools (SPEC 19). */
  mode?: 'all' | 'search' | 'code'
  /** Comma list of listed names shown beside `tool_search` (search mode), or never deferred (defer). */
  pinned?: string
  /** Provider-native deferral: every tool but the pinned ones `defer_loading`, plus the provider's search tool. */
  defer?: boolean
  /**
   * Search mode: also list what `tool_search` found for this caller and allow-list (its working
   * set, listing/working-sets.ts). /mcp sets it (an MCP host lets its model call listed tools
   * only); never a query parameter: a REST orchestrator adds the found tools itself.
   */
  withFound?: boolean
}

/** GET /tools/search's query (api/tools.ts ToolSearchQuery). */
export interface ToolSearchRequest {
  q: string
  functions?: string | undefined
  mcp?: string | undefined
  userId?: string | undefined
  limit?: number | undefined
  format?: ToolFormat | undefined
}

/** GET /tools/search's answer: the matches rendered, best first, with their scores; what was searched. */
export interface ToolSearchResponse {
  tools: unknown[]
  scores: number[]
  total: number
  unresolved: Unresolved[]
  unavailable: Unavailable[]
}

export interface ListToolsResponse {
  tools: unknown[]
  unresolved: Unresolved[]
  unavailable: Unavailable[]
  diagnostics: Diagnostic[]
}

/** A listing after the tenant's policy: what a model may be shown of an allow-list (denied tools removed and reported). */
export interface PolicedListing {
  tools: ListedTool[]
  unresolved: Unresolved[]
  unavailable: Unavailable[]
  diagnostics: Diagnostic[]
}

/** One ranked tool of a search. */
export interface SearchMatch {
  tool: ListedTool
  score: number
}

/** Who lists what: the acting tenant (already checked against the caller) and its effective policy. */
export interface ListingScope {
  userId: string | undefined
  /** The caller's API key id: whose working set a search-mode listing with `withFound` shows. */
  keyId?: string | undefined
  policy: ToolPolicy | undefined
  signal: AbortSignal
}

export interface ListingsOptions {
  /** The embeddings hook of tool search (search/tool-index.ts); none: full text alone. */
  embedder?: Embedder | undefined
  /** Where search mode's found tools are kept (Redis in a cluster); default: this process's memory. */
  workingSets?: WorkingSetStore | undefined
}

/** Serialised listings, cached with the listing: a warm GET /tools writes bytes it already has. */
const serialised = new WeakMap<ListToolsResponse, Buffer>()

/** The JSON bytes of a listing, computed once per cached listing object. */
export function listingJson (response: ListToolsResponse): Buffer {
  let bytes = serialised.get(response)
  if (!bytes) {
    bytes = Buffer.from(JSON.stringify(response))
    serialised.set(response, bytes)
  }
  return bytes
}

/** The part of each listings cache one tenant may hold. */
const OWNER_SHARE = 0.25

/** What an index weighs for the cache, per indexed character (bench row 7.3: ~2.1 KB of heap for a tool of ~240 characters). */
const INDEX_BYTES_PER_CHAR = 9

/**
 * Listings of an allow-list (GET /tools, /mcp's tools/list, GET /tools/search, `tool_search`):
 * the router's listing with the tenant's policy applied, rendered per format and mode, and its
 * search index. All three are cached per (tenant, allow-list) against the catalog version of
 * every source plus the policy object, so a registry change on any instance, a server's
 * tool-list change or a policy change is seen at once. A listing with an unavailable server is
 * listed again at every request (the server is tried again), and what is made of it is reused only
 * while the same servers are unavailable for the same reasons.
 */
export class Listings {
  readonly #router: ToolRouter
  readonly #embedder: Embedder | undefined
  readonly #workingSets: WorkingSetStore
  // Each cache is shared by all tenants, and one tenant holds at most a quarter of it (OWNER_SHARE): listing many
  // allow-lists, it pushes out its own older listings, not everyone else's (listings without a tenant are not counted so).
  readonly #policed = new VersionedCache<PolicedListing>({ maxEntries: 1000, ownerShare: OWNER_SHARE })

  // 1,000 listings or 64 MiB of their JSON, whichever comes first (a listing can be 200 KiB).
  readonly #rendered = new VersionedCache<ListToolsResponse>({
    maxEntries: 1000, maxBytes: 64 * 1024 * 1024, sizeOf: (r) => listingJson(r).length, ownerShare: OWNER_SHARE
  })

  // An index of 1,000 tools weighs a few MiB: 128 MiB of them, at most 500.
  readonly #indexes = new VersionedCache<ToolIndex>({
    maxEntries: 500, maxBytes: 128 * 1024 * 1024, sizeOf: (i) => i.textChars * INDEX_BYTES_PER_CHAR, ownerShare: OWNER_SHARE
  })

  /** Index builds under way, per listing: concurrent cold searches share one. */
  readonly #building = new WeakMap<PolicedListing, Promise<ToolIndex>>()

  constructor (router: ToolRouter, opts: ListingsOptions = {}) {
    this.#router = router
    this.#embedder = opts.embedder
    this.#workingSets = opts.workingSets ?? new MemoryWorkingSets()
  }

  /** GET /tools: the listing in the requested format and mode. */
  async render (query: ListToolsRequest, scope: ListingScope): Promise<ListToolsResponse> {
    const format = query.format ?? 'openai'
    const mode = query.mode ?? 'all'
    const pinned = splitComma(query.pinned)
    if (query.defer === true && format !== 'responses' && format !== 'anthropic') {
      throw new HttpError('GW_BAD_REQUEST', 'defer=true needs format=responses or format=anthropic (the providers with native tool search)')
    }
    if (query.defer === true && mode === 'search') {
      throw new HttpError('GW_BAD_REQUEST', 'defer=true and mode=search are two ways of searching: choose one')
    }
    if (query.defer === true && mode === 'code') {
      throw new HttpError('GW_BAD_REQUEST', 'defer=true and mode=code: in code mode the tools are reached from the script; choose one')
    }
    if (pinned.length > 0 && mode === 'all' && query.defer !== true) {
      throw new HttpError('GW_BAD_REQUEST', 'pinned= takes effect with mode=search, mode=code or defer=true')
    }
    const allow = { functions: splitComma(query.functions), mcp: splitComma(query.mcp) }
    const { listing, key, version } = await this.#listing(allow, scope)
    const remembered = mode === 'search' && query.withFound === true ? await this.#workingSets.get(foundKey(query, scope)) : []
    const renderKey = JSON.stringify([key, format, mode, query.defer === true, pinned, remembered])
    let response = this.#rendered.get(renderKey, version)
    if (!response) {
      const { found, missing } = findListed(listing.tools, pinned)
      const reason = 'Not a tool of this listing (the allow-list, after the tool policy)'
      const unresolved = [...listing.unresolved, ...missing.map((name): Unresolved => ({ kind: 'pinned', name, reason }))]
      let tools: unknown[]
      if (mode === 'search') {
        const searchTool = describeToolSearch(listing.tools)
        // The policy decides tool_search like any tool: denied, search mode lists the pinned tools alone.
        const shown = scope.policy?.decide(searchTool.entry).kind === 'deny' ? [] : [searchTool]
        // The working set in listing order (a name found later does not reorder the listing), after the pinned tools.
        const known = new Set(remembered)
        const extra = listing.tools.filter((t) => known.has(t.name) && !found.includes(t))
        tools = renderTools([...shown, ...found, ...extra], format)
      } else if (mode === 'code') {
        // The policy decides run_tools_script like any tool: denied, code mode lists the pinned tools alone.
        const script = describeRunToolsScript(listing.tools)
        tools = renderTools([...(scope.policy?.decide(script.entry).kind === 'deny' ? [] : [script]), ...found.filter((t) => t.name !== script.name)], format)
      } else if (query.defer === true) {
        tools = deferTools(renderTools(listing.tools, format), listing.tools, new Set(found.map((t) => t.name)), format as 'responses' | 'anthropic')
      } else {
        // `functions=@code`: run_tools_script beside the tools, its description the typed API of the others.
        const shown = listing.tools.map((t) => t.name === RUN_TOOLS_SCRIPT && t.entry.source === 'gateway' ? describeRunToolsScript(listing.tools) : t)
        tools = renderTools(shown, format)
      }
      response = { tools, unresolved, unavailable: listing.unavailable, diagnostics: listing.diagnostics }
      this.#rendered.set(renderKey, version, response, scope.userId)
    }
    if (query.strict === true) {
      // Denied tools, and changed definitions held under `pinning: hold`.
      const hidden = response.diagnostics.filter((d) => d.type === 'denied' || (d.type === 'definition_changed' && d.exposedAs === null))
      if (response.unresolved.length > 0 || hidden.length > 0) {
        const names = [
          ...response.unresolved.map((u) => `${u.kind} '${u.name}' (${u.reason})`),
          ...hidden.map((d) => `tool '${d.name}' (${d.message})`)
        ].join('; ')
        throw new HttpError('GW_UNRESOLVED', `Names that cannot be listed: ${names}`)
      }
    }
    return response
  }

  /**
   * The allow-list's tools ranked against `query`, best first, at most `limit` (GET /tools/search
   * and `tool_search`): exactly the tools its listing shows, never another.
   */
  async search (query: string, limit: number, allow: AllowList, scope: ListingScope): Promise<{ matches: SearchMatch[], listing: PolicedListing }> {
    const { listing, key, version } = await this.#listing({ functions: [...allow.functions ?? []], mcp: [...allow.mcp ?? []] }, scope)
    if (listing.tools.length === 0) return { matches: [], listing }
    const index = await this.#index(listing, key, version, scope.userId)
    const hits = await index.search(query, limit, scope.signal)
    return { matches: hits.map((h) => ({ tool: listing.tools[h.index] as ListedTool, score: h.score })), listing }
  }

  /**
   * Adds tools `tool_search` found to the working set of this caller, allow-list and pinned
   * (search mode with `withFound`); true when one was new (the listing changed).
   */
  async remember (query: ListToolsRequest, who: Pick<ListingScope, 'userId' | 'keyId'>, names: readonly string[]): Promise<boolean> {
    return await this.#workingSets.add(foundKey(query, who), names, WORKING_SET_MAX, WORKING_SET_TTL_MS)
  }

  /** The allow-list's listing under the tenant's policy (what `run_tools_script` may call): GET /tools' tools. */
  async policed (allow: AllowList, scope: ListingScope): Promise<PolicedListing> {
    return (await this.#listing({ functions: [...allow.functions ?? []], mcp: [...allow.mcp ?? []] }, scope)).listing
  }

  /**
   * The policed listing of an allow-list, cached. One with an unavailable server is listed again at
   * every request (the server is tried again), but what is made of it (policed, rendered, indexed) is
   * kept apart, under the unavailable servers (id, code, retryAt): otherwise a tenant keeping one of its
   * servers down made each listing and each search police, render and index all its tools again
   * (~140 ms and ~250 ms at 10,000 tools). Their reasons are then those first seen; a server's own
   * error text does not make a new entry at each request.
   */
  async #listing (allow: { functions: string[], mcp: string[] }, scope: ListingScope): Promise<{ listing: PolicedListing, key: string, version: unknown[] }> {
    let key = JSON.stringify([scope.userId ?? null, allow.functions.join(','), allow.mcp.join(',')])
    // The policy object is part of the version: a policy change (on any instance) is seen at once.
    const version = [...await this.#router.catalogVersion({ userId: scope.userId, signal: scope.signal }), scope.policy]
    let listing = this.#policed.get(key, version)
    if (!listing) {
      const listed = await this.#router.list(allow, { userId: scope.userId, signal: scope.signal })
      if (listed.unavailable.length > 0) {
        key += `\n${JSON.stringify(listed.unavailable.map((u) => [u.serverId, u.code ?? null, u.retryAt ?? null]))}`
        listing = this.#policed.get(key, version)
      }
      if (!listing) {
        listing = police(listed, scope.policy)
        this.#policed.set(key, version, listing, scope.userId)
      }
    }
    return { listing, key, version }
  }

  async #index (listing: PolicedListing, key: string, version: unknown[], owner: string | undefined): Promise<ToolIndex> {
    const hit = this.#indexes.get(key, version)
    if (hit) return hit
    let building = this.#building.get(listing)
    if (!building) {
      // Not the first searcher's signal: the build is shared, and it is bounded by the embedder's own deadline.
      const embedder = this.#embedder
      building = (async () => await ToolIndex.build(await documentsOf(listing), embedder, AbortSignal.timeout(60_000)))()
      this.#building.set(listing, building)
    }
    const index = await building
    this.#indexes.set(key, version, index, owner)
    return index
  }
}

/** The listing's tools as the search reads them, a thousand at a time between turns of the event loop (a listing may hold 100,000). */
async function documentsOf (listing: PolicedListing): Promise<ToolDocument[]> {
  const docs: ToolDocument[] = []
  for (const t of listing.tools) {
    if (docs.length > 0 && docs.length % 1000 === 0) await new Promise((resolve) => setImmediate(resolve))
    docs.push(toolDocument(t.entry.spec, t.entry.source))
  }
  return docs
}

/** The working set of a search-mode listing: its tenant, API key, allow-list and pinned tools, as the query names them. */
function foundKey (query: ListToolsRequest, who: Pick<ListingScope, 'userId' | 'keyId'>): string {
  return workingSetKey({
    tenant: who.userId,
    keyId: who.keyId,
    functions: splitComma(query.functions),
    mcp: splitComma(query.mcp),
    pinned: splitComma(query.pinned)
  })
}

/**
 * The router's listing after the tenant's policy, the decision /invoke makes: a denied tool is
 * never listed, and it is reported instead of its other diagnostics (a `denied` one), so a name
 * the request asked for never vanishes silently. A remote tool whose definition is not the pinned
 * one is reported (`definition_changed`), and withheld like a denied one under `pinning: hold`.
 */
function police (listing: Awaited<ReturnType<ToolRouter['list']>>, policy: ToolPolicy | undefined): PolicedListing {
  const reports: Diagnostic[] = []
  const hidden = new Set<string>()
  if (policy !== undefined) {
    for (const t of listing.tools) {
      const { route, source } = t.entry
      const decision = policy.decide(t.entry)
      if (decision.kind === 'deny') {
        reports.push({ type: 'denied', name: t.name, route, source, exposedAs: null, message: decision.message })
        hidden.add(t.name)
        continue
      }
      const change = policy.definitionCheck?.(t.entry)
      if (change === undefined) continue
      const { oldDigest, newDigest } = change
      const message = definitionChangeMessage(t.name, change)
      reports.push({ type: 'definition_changed', name: t.name, route, source, exposedAs: change.held ? null : t.name, oldDigest, newDigest, message })
      if (change.held) hidden.add(t.name)
    }
  }
  if (reports.length === 0) return { tools: listing.tools, unresolved: listing.unresolved, unavailable: listing.unavailable, diagnostics: listing.diagnostics }
  return {
    tools: hidden.size === 0 ? listing.tools : listing.tools.filter((t) => !hidden.has(t.name)),
    unresolved: listing.unresolved,
    unavailable: listing.unavailable,
    diagnostics: [...listing.diagnostics.filter((d) => d.exposedAs === null || !hidden.has(d.exposedAs)), ...reports]
  }
}
