import { HttpError } from '../errors.js'
import { authorize } from '../registry/facade.js'
import type { RegistryScope } from '../registry/types.js'
import type { ToolPolicyProvider } from '../routing/policy.js'
import type { ToolRouter } from '../routing/router.js'
import type { CatalogEntry } from '../routing/source.js'
import { TIER_TRAITS } from '../routing/types.js'
import type { Caller } from '../routing/types.js'
import { changedFields, definitionOf, digestOf } from './digest.js'
import type { Definition, Digested } from './digest.js'
import type { Pin, PinnedRoute, ServerPins } from './document.js'
import type { PinService } from './service.js'

/** One tool of a server as its pins see it: GET and POST .../pins. */
export interface ToolPinView {
  /** The tool's own name at its server. */
  name: string
  /** `changed`: offered with another definition than pinned; `unpinned`: never seen; `removed`: pinned, no longer offered. */
  status: 'pinned' | 'changed' | 'unpinned' | 'removed'
  pinnedDigest: string | null
  currentDigest: string | null
  pinnedAt: string | null
  /** The top-level fields that differ, when both definitions are known. */
  fields: string[]
  /** The pinned definition and the offered one (null when unknown or too large to keep): the diff. */
  pinned: Definition | null
  current: Definition | null
}

export interface ServerPinsView {
  serverId: string
  route: PinnedRoute
  /** What the scope's policy does with a changed definition. */
  pinning: 'warn' | 'hold'
  /** Why the server's current tools could not be read (then `current` is the last changed definition seen), or null. */
  unavailable: string | null
  tools: ToolPinView[]
}

export interface AcceptRequest {
  /** The tools to accept (their own names); all the server offers when absent. */
  tools?: string[] | undefined
  /** Accept only if each named tool is still offered with this digest (what the caller saw): else 409 GW_DEFINITION_CHANGED. */
  digests?: Record<string, string> | undefined
}

/** What the server offers the scope now, by tool name. */
type Offered = Map<string, { entry: CatalogEntry, digested: Digested }>

/** The server's tier (undefined when it offers nothing and has no pins), its tools, and why they could not be read. */
interface Live { route: PinnedRoute | undefined, tools: Offered, unavailable: string | null }

/**
 * Definition pins' operations (SPEC 18), with their tenancy: a tenant key reads and accepts its own
 * pins, an admin any tenant's and those of calls without a tenant (the global scope). A server id
 * names the tenant's own server when it has one, else the global server of that id.
 */
export class PinFacade {
  readonly #pins: PinService
  readonly #router: ToolRouter
  readonly #policies: ToolPolicyProvider | undefined

  constructor (pins: PinService, router: ToolRouter, policies?: ToolPolicyProvider) {
    this.#pins = pins
    this.#router = router
    this.#policies = policies
  }

  async read (caller: Caller, requested: RegistryScope, serverId: string, signal: AbortSignal): Promise<ServerPinsView> {
    const scope = authorize(caller, requested)
    const live = await this.#offered(scope, serverId, signal)
    return await this.#view(scope, serverId, live)
  }

  async accept (
    caller: Caller, requested: RegistryScope, serverId: string, body: AcceptRequest, signal: AbortSignal
  ): Promise<ServerPinsView & { accepted: string[] }> {
    const scope = authorize(caller, requested)
    const live = await this.#offered(scope, serverId, signal)
    if (live.unavailable !== null || live.route === undefined) {
      throw new HttpError('GW_UPSTREAM_ERROR', `The server's tools cannot be read now, so there is nothing to accept: ${live.unavailable ?? 'no tools'}`)
    }
    const only = body.tools === undefined ? undefined : new Set(body.tools)
    const missing = [...only ?? []].filter((name) => !live.tools.has(name))
    if (missing.length > 0) throw new HttpError('GW_BAD_REQUEST', `Not offered by server '${serverId}': ${missing.slice(0, 20).join(', ')}`)
    for (const [name, digest] of Object.entries(body.digests ?? {})) {
      const now = live.tools.get(name)?.digested.digest
      if (now !== digest) {
        throw new HttpError('GW_DEFINITION_CHANGED', `Tool '${name}' is offered with ${now ?? 'no definition'} now, not ${digest}: read its pins again before accepting`)
      }
    }
    const offered = [...live.tools].map(([name, { digested }]) => ({ name, digested }))
    const replaced = await this.#pins.accept(scope, live.route, serverId, offered, only)
    return { ...await this.#view(scope, serverId, live), accepted: [...replaced.keys()] }
  }

  /** The tools the server offers the scope now (through the router: the same entries listings see). */
  async #offered (scope: RegistryScope, serverId: string, signal: AbortSignal): Promise<Live> {
    const userId = scope.kind === 'user' ? scope.userId : undefined
    const listing = await this.#router.list({ mcp: [serverId] }, { userId, signal })
    const tools: Offered = new Map()
    let route: PinnedRoute | undefined
    for (const { entry } of [...listing.tools, ...listing.withheld ?? []]) {
      if (!TIER_TRAITS[entry.route].pinned || entry.source !== serverId) continue
      route ??= entry.route as PinnedRoute
      if (entry.route === route) tools.set(entry.spec.name, { entry, digested: digestOf(entry.spec) })
    }
    const down = listing.unavailable.find((u) => u.serverId === serverId)
    if (route === undefined && down === undefined && listing.unresolved.length > 0) {
      throw new HttpError('GW_SERVER_NOT_FOUND', `No server '${serverId}' is registered for ${userId === undefined ? 'calls without a tenant' : 'the tenant or globally'}`)
    }
    return { route, tools, unavailable: down?.reason ?? null }
  }

  async #view (scope: RegistryScope, serverId: string, live: Live): Promise<ServerPinsView> {
    const userId = scope.kind === 'user' ? scope.userId : undefined
    let route = live.route
    let stored: ServerPins | undefined
    for (const r of route === undefined ? ['user_mcp', 'global_mcp'] as const : [route]) {
      stored = await this.#pins.serverPins(scope, r, serverId)
      if (stored !== undefined) {
        route = r
        break
      }
    }
    const policy = await this.#policies?.effective(userId)
    const tools: ToolPinView[] = []
    for (const [name, { entry, digested }] of live.tools) tools.push(toolView(name, stored?.tools.get(name), definitionOf(entry.spec), digested.digest))
    for (const [name, pin] of stored?.tools ?? []) {
      if (live.tools.has(name)) continue
      // Not offered: removed, or (the server being unreachable) the last definition seen.
      if (live.unavailable === null) tools.push({ ...toolView(name, pin, null, null), status: 'removed' })
      else tools.push(toolView(name, pin, parse(pin.pending?.definition ?? null), pin.pending?.digest ?? null))
    }
    route ??= userId === undefined ? 'global_mcp' : 'user_mcp'
    return { serverId, route, pinning: policy?.pinning ?? 'warn', unavailable: live.unavailable, tools }
  }
}

function toolView (name: string, pin: Pin | undefined, current: Definition | null, currentDigest: string | null): ToolPinView {
  const pinned = parse(pin?.definition ?? null)
  const status = pin === undefined ? 'unpinned' : currentDigest === null || currentDigest === pin.digest ? 'pinned' : 'changed'
  return {
    name,
    status,
    pinnedDigest: pin?.digest ?? null,
    currentDigest: currentDigest ?? pin?.digest ?? null,
    pinnedAt: pin?.pinnedAt ?? null,
    fields: status === 'changed' && pinned !== null && current !== null ? changedFields(pinned, current) : [],
    pinned,
    current
  }
}

function parse (json: string | null): Definition | null {
  return json === null ? null : JSON.parse(json) as Definition
}
