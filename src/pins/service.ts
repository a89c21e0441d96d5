import { HttpError } from '../errors.js'
import type { Logger } from '../logger.js'
import { DocumentCache } from '../registry/document-cache.js'
import { scopeKey } from '../registry/scoped-cache.js'
import { DocumentConflictError } from '../registry/types.js'
import type { RegistryScope, RegistryStore } from '../registry/types.js'
import type { CatalogEntry } from '../routing/source.js'
import type { Digested } from './digest.js'
import {
  definitionChars, keptDefinition, MAX_PINS_PER_SCOPE, MAX_SERVERS, MAX_TOOLS_PER_SERVER, parsePins, serializePins, serverKey
} from './document.js'
import type { Pin, PinnedRoute, PinSet, ServerPins } from './document.js'

/** What a scope's pins say of one offered tool. */
export type PinVerdict =
  | { kind: 'unpinned' }
  | { kind: 'same' }
  | { kind: 'changed', pin: Pin }

/** One scope's pins as read at one version: an immutable snapshot (a write makes a new one). */
export class PinView {
  /** `unreadable`: the store did not answer and this scope's pins were never read (nothing to compare with). */
  constructor (readonly version: number, readonly set: PinSet, readonly unreadable = false) {}

  verdict (entry: CatalogEntry, digested: Digested): PinVerdict {
    const pin = this.set.get(serverKey(entry.route as PinnedRoute, entry.source))?.tools.get(entry.spec.name)
    if (pin === undefined) return { kind: 'unpinned' }
    return pin.digest === digested.digest ? { kind: 'same' } : { kind: 'changed', pin }
  }
}

/** A definition change this instance recorded (it won the write): what the journal is told. */
export interface DefinitionChanged {
  userId: string | undefined
  route: PinnedRoute
  serverId: string
  /** The tool's own name at its server, and the name it is listed under. */
  tool: string
  name: string
  oldDigest: string
  newDigest: string
}

export interface PinServiceOptions {
  /** Told once per changed definition (per digest), by the instance that recorded it. */
  onChange?: (change: DefinitionChanged) => void
}

interface Observation {
  entry: CatalogEntry
  digested: Digested
}

/** Tenants whose pins stay cached, and observations waiting to be written, at most. */
const MAX_CACHED_SCOPES = 10_000
const MAX_QUEUED = 10_000
/** Attempts of a read-modify-write that keeps losing to other writers. */
const WRITE_ATTEMPTS = 8
const WARN_EVERY_MS = 10_000

/**
 * Definition pins (SPEC 18): per scope one `pins` document in the registry store, cached and
 * dropped on its change events (every instance), like the tool policy. Tools are pinned on first
 * sight (a listing or a call), a different definition is recorded once per digest (and the journal
 * told), in batches written with compare-and-set so that instances pinning at once lose nothing.
 */
export class PinService {
  readonly #store: RegistryStore
  readonly #logger: Logger
  readonly #onChange: ((change: DefinitionChanged) => void) | undefined
  readonly #documents: DocumentCache<PinView>
  /** Observations per scope key, waiting for the next write; the keys in flight are not queued twice. */
  readonly #queued = new Map<string, { scope: RegistryScope, userId: string | undefined, items: Map<string, Observation> }>()
  #queuedCount = 0
  #lastWarn = 0

  constructor (store: RegistryStore, logger: Logger, opts: PinServiceOptions = {}) {
    this.#store = store
    this.#logger = logger
    this.#onChange = opts.onChange
    this.#documents = new DocumentCache<PinView>(store, 'pins', {
      parse: (doc) => new PinView(doc?.version ?? 0, parsePins(doc?.value)),
      same: (cached, read) => cached.version === read.version,
      onStaleRead: (err) => { this.#warn(err, 'pins store unavailable: comparing with the last pins read') },
      maxScopes: MAX_CACHED_SCOPES
    })
  }

  /**
   * The pins every call of the tenant (or of no tenant) is compared with. A store that does not
   * answer for a scope never read gives an unreadable view (not cached): calls that reach no remote
   * tool go on, and PinnedPolicy holds remote tools under `hold` rather than call them unchecked.
   */
  async view (userId: string | undefined): Promise<PinView> {
    const known = this.viewNow(userId)
    if (known !== undefined) return known
    try {
      return await this.#documents.load(scopeOf(userId))
    } catch (err) {
      this.#warn(err, 'definition pins cannot be read: remote tools are not compared (held under pinning: hold)')
      return UNREADABLE
    }
  }

  /** The cached view when it is still fresh, else undefined: ask `view`. */
  viewNow (userId: string | undefined): PinView | undefined {
    const slot = this.#documents.get(scopeOf(userId))
    return slot?.fresh === true ? slot.value : undefined
  }

  /**
   * Queues a tool seen unpinned (to pin) or changed (to record, once per digest); written on a later
   * turn of the event loop, together with the other observations of the scope.
   */
  observe (userId: string | undefined, entry: CatalogEntry, digested: Digested): void {
    const scope = scopeOf(userId)
    const key = scopeKey(scope)
    let queue = this.#queued.get(key)
    const item = `${entry.route}:${entry.source}\n${entry.spec.name}\n${digested.digest}`
    if (queue?.items.has(item) === true || this.#queuedCount >= MAX_QUEUED) return
    if (queue === undefined) {
      queue = { scope, userId, items: new Map() }
      this.#queued.set(key, queue)
      setImmediate(() => { this.#flush(key).catch(() => undefined) })
    }
    queue.items.set(item, { entry, digested })
    this.#queuedCount++
  }

  async #flush (key: string): Promise<void> {
    const queue = this.#queued.get(key)
    if (queue === undefined) return
    // Kept queued during the write (a listing meanwhile queues nothing twice); what came meanwhile is the next write.
    const batch = [...queue.items]
    const changes: DefinitionChanged[] = []
    try {
      await this.#mutate(queue.scope, (set) => {
        changes.length = 0
        return applyObservations(set, batch.map(([, o]) => o), queue.userId, changes)
      })
      for (const change of changes) this.#onChange?.(change)
    } catch (err) {
      this.#warn(err, 'definition pins could not be written: they are written when the tools are next seen')
    } finally {
      for (const [item] of batch) queue.items.delete(item)
      this.#queuedCount -= batch.length
      if (queue.items.size === 0) this.#queued.delete(key)
      else setImmediate(() => { this.#flush(key).catch(() => undefined) })
    }
  }

  /** The pins of one server of a scope (POST .../pins answers with them). */
  async serverPins (scope: RegistryScope, route: PinnedRoute, serverId: string): Promise<ServerPins | undefined> {
    const userId = scope.kind === 'user' ? scope.userId : undefined
    return (await this.view(userId)).set.get(serverKey(route, serverId))
  }

  /**
   * Pins the definitions the server offers now: the named tools, or (without names) every tool, the
   * pins of tools it no longer offers dropped. Answers the pins replaced, by tool name.
   */
  async accept (
    scope: RegistryScope,
    route: PinnedRoute,
    serverId: string,
    offered: ReadonlyArray<{ name: string, digested: Digested }>,
    only: ReadonlySet<string> | undefined
  ): Promise<Map<string, Pin | undefined>> {
    const replaced = new Map<string, Pin | undefined>()
    await this.#mutate(scope, (set) => {
      replaced.clear()
      const key = serverKey(route, serverId)
      const server = set.get(key) ?? { route, serverId, tools: new Map<string, Pin>() }
      const tools = only === undefined ? new Map<string, Pin>() : server.tools
      const budget = { chars: definitionChars(set) }
      const now = new Date().toISOString()
      for (const { name, digested } of offered) {
        if (only !== undefined && !only.has(name)) continue
        replaced.set(name, server.tools.get(name))
        tools.set(name, { digest: digested.digest, definition: keptDefinition(digested.json, budget), pinnedAt: now, pending: null })
      }
      let others = 0
      for (const [k, pinnedServer] of set) if (k !== key) others += pinnedServer.tools.size
      if (others + tools.size > MAX_PINS_PER_SCOPE) {
        throw new HttpError('GW_TENANT_QUOTA_EXCEEDED', `Accepting would pin ${others + tools.size} tools in this scope; at most ${MAX_PINS_PER_SCOPE} are pinned: ` +
          'accept fewer tools (by name), or remove the servers no longer used')
      }
      set.delete(key)
      set.set(key, { route, serverId, tools })
      trimServers(set)
      return true
    })
    return replaced
  }

  /** Drops a server's pins (it was removed from the registry: a new server under its id starts unpinned). */
  async forget (scope: RegistryScope, route: PinnedRoute, serverId: string): Promise<void> {
    await this.#mutate(scope, (set) => set.delete(serverKey(route, serverId)))
  }

  /** Read, change, write if unchanged since the read; again on a conflict. `change` answers whether it changed anything. */
  async #mutate (scope: RegistryScope, change: (set: PinSet) => boolean): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      const doc = await this.#store.getDocument('pins', scope)
      const set = parsePins(doc?.value)
      if (!change(set)) return
      try {
        await this.#store.putDocument('pins', scope, serializePins(set), { ifVersion: doc?.version ?? 0 })
        return
      } catch (err) {
        if (!(err instanceof DocumentConflictError) || attempt >= WRITE_ATTEMPTS) throw err
      }
    }
  }

  #warn (err: unknown, message: string): void {
    const now = Date.now()
    if (now - this.#lastWarn < WARN_EVERY_MS) return
    this.#lastWarn = now
    this.#logger.warn({ err }, message)
  }

  close (): void {
    this.#documents.close()
  }
}

const UNREADABLE = new PinView(0, new Map(), true)

function scopeOf (userId: string | undefined): RegistryScope {
  return userId === undefined ? { kind: 'global' } : { kind: 'user', userId }
}

/** Pins the unpinned, records the changed (once per digest); answers whether the set changed. */
function applyObservations (set: PinSet, observations: readonly Observation[], userId: string | undefined, changes: DefinitionChanged[]): boolean {
  const budget = { chars: definitionChars(set) }
  const now = new Date().toISOString()
  let changed = false
  let pinned = 0
  for (const server of set.values()) pinned += server.tools.size
  for (const { entry, digested } of observations) {
    const route = entry.route as PinnedRoute
    const key = serverKey(route, entry.source)
    let server = set.get(key)
    const pin = server?.tools.get(entry.spec.name)
    if (pin === undefined) {
      if (server === undefined) {
        server = { route, serverId: entry.source, tools: new Map() }
        set.set(key, server)
      }
      if (server.tools.size >= MAX_TOOLS_PER_SERVER || pinned >= MAX_PINS_PER_SCOPE) continue
      server.tools.set(entry.spec.name, { digest: digested.digest, definition: keptDefinition(digested.json, budget), pinnedAt: now, pending: null })
      pinned++
      changed = true
    } else if (pin.digest !== digested.digest && pin.pending?.digest !== digested.digest) {
      // Another instance may have recorded it meanwhile: then the digest matches and nothing is reported twice.
      budget.chars -= pin.pending?.definition?.length ?? 0
      pin.pending = { digest: digested.digest, definition: keptDefinition(digested.json, budget), seenAt: now }
      changes.push({ userId, route, serverId: entry.source, tool: entry.spec.name, name: entry.name, oldDigest: pin.digest, newDigest: digested.digest })
      changed = true
    }
  }
  if (changed) trimServers(set)
  return changed
}

/** The document bound: the servers pinned longest ago go first. */
function trimServers (set: PinSet): void {
  for (const key of set.keys()) {
    if (set.size <= MAX_SERVERS) return
    set.delete(key)
  }
}
