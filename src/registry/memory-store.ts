import { assertScope, assertServerId, assertTenant, assertUidRange, RegistryUnavailableError } from './errors.js'
import type { ServerConfig } from './server-config.js'
import type {
  DocumentChange,
  DocumentKind,
  DocumentListener,
  RegistryChange,
  RegistryListener,
  RegistryScope,
  RegistryStore,
  StoredDocument,
  StoredServer,
  UidRange
} from './types.js'
import { DocumentConflictError, ServerLimitError } from './types.js'

interface ScopeState {
  version: number
  servers: Map<string, StoredServer>
}

/** Map key of a scope. `_` cannot occur in a userId, so `g` and `u_{userId}` never collide. */
function scopeKey (scope: RegistryScope): string {
  return scope.kind === 'global' ? 'g' : `u_${scope.userId}`
}

function copy (entry: StoredServer): StoredServer {
  return structuredClone(entry)
}

/**
 * The embedded registry (no REDIS_URL): one process, nothing persisted. Entries are copied
 * in and out so a caller mutating a returned config cannot change what is stored.
 */
export class MemoryRegistryStore implements RegistryStore {
  readonly backend = 'memory' as const
  #scopes = new Map<string, ScopeState>()
  #listeners = new Set<RegistryListener>()
  /** Documents and their version counters by `{kind}:{scopeKey}`; a counter outlives a delete. */
  #documents = new Map<string, { version: number, doc: StoredDocument | undefined }>()
  #documentListeners = new Set<DocumentListener>()
  #closed = false
  readonly #uidOfTenant = new Map<string, number>()
  readonly #tenantOfUid = new Map<number, string>()
  /**
   * Where the next uid search starts, as an offset into the range. Random: gateways with an
   * embedded store on one host do not all start at the range's first uid (they cannot see each
   * other's allocations; several instances need the Redis store).
   */
  readonly #uidCursor = Math.floor(Math.random() * 0x7fffffff)

  #state (scope: RegistryScope, create: boolean): ScopeState | undefined {
    assertScope(scope)
    const key = scopeKey(scope)
    let state = this.#scopes.get(key)
    if (state === undefined && create) {
      state = { version: 0, servers: new Map() }
      this.#scopes.set(key, state)
    }
    return state
  }

  #emit (change: RegistryChange): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(change)
      } catch {
        // A broken listener must not fail the write that already happened.
      }
    }
  }

  #checkOpen (): void {
    // During shutdown a late request gets a 503, as with the Redis store.
    if (this.#closed) throw new RegistryUnavailableError('registry unavailable: store is closed')
  }

  async list (scope: RegistryScope): Promise<StoredServer[]> {
    return (await this.snapshot(scope)).servers
  }

  async snapshot (scope: RegistryScope): Promise<{ version: number, servers: StoredServer[] }> {
    this.#checkOpen()
    const state = this.#state(scope, false)
    if (state === undefined) return { version: 0, servers: [] }
    const servers = [...state.servers.values()].map(copy).sort((a, b) => a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : 0)
    return { version: state.version, servers }
  }

  async get (scope: RegistryScope, serverId: string): Promise<StoredServer | undefined> {
    this.#checkOpen()
    assertServerId(serverId)
    const entry = this.#state(scope, false)?.servers.get(serverId)
    return entry === undefined ? undefined : copy(entry)
  }

  async put (scope: RegistryScope, serverId: string, config: ServerConfig, opts: { maxServers?: number } = {}): Promise<{ version: number, created: boolean }> {
    this.#checkOpen()
    assertServerId(serverId)
    const state = this.#state(scope, true) as ScopeState
    const created = !state.servers.has(serverId)
    if (created && opts.maxServers !== undefined && state.servers.size >= opts.maxServers) throw new ServerLimitError(opts.maxServers)
    state.version += 1
    const version = state.version
    state.servers.set(serverId, { serverId, config: structuredClone(config), version, updatedAt: new Date().toISOString() })
    this.#emit({ op: 'put', scope: { ...scope }, serverId, version })
    return { version, created }
  }

  async delete (scope: RegistryScope, serverId: string): Promise<{ version: number, deleted: boolean }> {
    this.#checkOpen()
    assertServerId(serverId)
    const state = this.#state(scope, false)
    if (state === undefined || !state.servers.has(serverId)) return { version: state?.version ?? 0, deleted: false }
    state.servers.delete(serverId)
    state.version += 1
    const version = state.version
    // The state (and its version counter) is kept even when empty: versions never go back.
    this.#emit({ op: 'delete', scope: { ...scope }, serverId, version })
    return { version, deleted: true }
  }

  async version (scope: RegistryScope): Promise<number> {
    this.#checkOpen()
    return this.#state(scope, false)?.version ?? 0
  }

  async listUserIds (): Promise<string[]> {
    this.#checkOpen()
    const ids: string[] = []
    for (const [key, state] of this.#scopes) {
      if (key.startsWith('u_') && state.servers.size > 0) ids.push(key.slice(2))
    }
    return ids.sort()
  }

  async allocateSandboxUid (tenant: string, range: UidRange): Promise<number> {
    this.#checkOpen()
    assertTenant(tenant)
    assertUidRange(range)
    const known = this.#uidOfTenant.get(tenant)
    if (known !== undefined && known >= range.first && known <= range.last) return known
    const size = range.last - range.first + 1
    for (let i = 0; i < size; i++) {
      const uid = range.first + (this.#uidCursor + this.#uidOfTenant.size + i) % size
      if (this.#tenantOfUid.has(uid)) continue
      if (known !== undefined) this.#tenantOfUid.delete(known)
      this.#uidOfTenant.set(tenant, uid)
      this.#tenantOfUid.set(uid, tenant)
      return uid
    }
    throw new RangeError(`every sandbox uid of ${range.first}-${range.last} is taken`)
  }

  subscribe (listener: RegistryListener): () => void {
    this.#listeners.add(listener)
    return () => { this.#listeners.delete(listener) }
  }

  #emitDocument (change: DocumentChange): void {
    for (const listener of [...this.#documentListeners]) {
      try {
        listener(change)
      } catch {
        // A broken listener must not fail the write that already happened.
      }
    }
  }

  async getDocument (kind: DocumentKind, scope: RegistryScope): Promise<StoredDocument | undefined> {
    this.#checkOpen()
    assertScope(scope)
    const doc = this.#documents.get(`${kind}:${scopeKey(scope)}`)?.doc
    return doc === undefined ? undefined : structuredClone(doc)
  }

  async putDocument (
    kind: DocumentKind, scope: RegistryScope, value: unknown, opts: { ifVersion?: number } = {}
  ): Promise<{ version: number, created: boolean }> {
    this.#checkOpen()
    assertScope(scope)
    const key = `${kind}:${scopeKey(scope)}`
    const slot = this.#documents.get(key) ?? { version: 0, doc: undefined }
    if (opts.ifVersion !== undefined && (slot.doc?.version ?? 0) !== opts.ifVersion) throw new DocumentConflictError(kind, slot.doc?.version ?? 0)
    const created = slot.doc === undefined
    slot.version += 1
    slot.doc = { value: structuredClone(value), version: slot.version, updatedAt: new Date().toISOString() }
    this.#documents.set(key, slot)
    this.#emitDocument({ op: 'document', kind, scope: { ...scope }, version: slot.version })
    return { version: slot.version, created }
  }

  async deleteDocument (kind: DocumentKind, scope: RegistryScope): Promise<{ version: number, deleted: boolean }> {
    this.#checkOpen()
    assertScope(scope)
    const slot = this.#documents.get(`${kind}:${scopeKey(scope)}`)
    if (slot?.doc === undefined) return { version: slot?.version ?? 0, deleted: false }
    slot.doc = undefined
    slot.version += 1
    this.#emitDocument({ op: 'document', kind, scope: { ...scope }, version: slot.version })
    return { version: slot.version, deleted: true }
  }

  subscribeDocuments (listener: DocumentListener): () => void {
    this.#documentListeners.add(listener)
    return () => { this.#documentListeners.delete(listener) }
  }

  async ping (): Promise<void> {
    this.#checkOpen()
  }

  async close (): Promise<void> {
    this.#closed = true
    this.#listeners.clear()
    this.#documentListeners.clear()
  }
}

export function createMemoryRegistryStore (): MemoryRegistryStore {
  return new MemoryRegistryStore()
}
