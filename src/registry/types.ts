import type { ServerConfig } from './server-config.js'

/** Whose servers: the global (admin) set, or one tenant's. Keys are built from the exact userId. */
export type RegistryScope = { kind: 'global' } | { kind: 'user', userId: string }

/** One registered server as stored. `config` is as given to `put` (sealed secrets stay sealed). */
export interface StoredServer {
  serverId: string
  config: ServerConfig
  /** The scope's version right after this entry was written. */
  version?: number
  /** ISO 8601 time of the last write of this entry. */
  updatedAt: string
}

/**
 * A change to the registry, delivered to every subscriber of every instance.
 * - `put` / `delete`: `serverId` in `scope` changed; `version` is the scope's version after it.
 * - `resync`: this instance may have missed changes (its event connection dropped and came
 *   back): drop everything cached from the registry.
 */
export type RegistryChange =
  | { op: 'put' | 'delete', scope: RegistryScope, serverId: string, version: number }
  | { op: 'resync' }

export type RegistryListener = (change: RegistryChange) => void

/**
 * What can change a listing of tools: a registry change, or (`tools`) a registered server
 * telling its client that its own tool list changed (legacy `notifications/tools/list_changed`,
 * or one delivered on a 2026-07-28 `subscriptions/listen` stream). An upstream change is seen
 * by the instance that holds the server's client.
 */
export type ListingChange = RegistryChange | { op: 'tools', scope: RegistryScope, serverId: string }
export type ListingListener = (change: ListingChange) => void

/**
 * Small per-scope documents kept beside the servers, with the same versioning and invalidation:
 * `policy` is the tool policy (the global scope holds the default, a user scope the tenant's);
 * `pins` the tool definitions the scope trusts (src/pins/: a user scope the tenant's, the global
 * scope those of calls without a tenant).
 */
export type DocumentKind = 'policy' | 'pins'

/** `putDocument`'s `ifVersion` did not match: another write came first; read again and retry. */
export class DocumentConflictError extends Error {
  constructor (readonly kind: DocumentKind, readonly currentVersion: number) {
    super(`The ${kind} document changed meanwhile (now version ${currentVersion})`)
    this.name = 'DocumentConflictError'
  }
}

/** `put`'s `maxServers`: the scope holds that many servers and the write would create one more. Nothing was written. */
export class ServerLimitError extends Error {
  constructor (readonly maxServers: number) {
    super(`The scope already holds ${maxServers} servers`)
    this.name = 'ServerLimitError'
  }
}

/** One stored document. `version` is the (kind, scope) counter right after this write. */
export interface StoredDocument {
  value: unknown
  version: number
  /** ISO 8601 time of the write. */
  updatedAt: string
}

/**
 * A document changed (any instance), or `resync`: this instance may have missed changes, drop
 * every cached document.
 */
export type DocumentChange =
  | { op: 'document', kind: DocumentKind, scope: RegistryScope, version: number }
  | { op: 'resync' }

export type DocumentListener = (change: DocumentChange) => void

/** Inclusive range of host uids the sandbox may hand to tenants (SANDBOX_UID_RANGE). */
export interface UidRange {
  first: number
  last: number
}

/**
 * Storage of remote MCP server configs (docs/ARCHITECTURE.md#registry), one interface with an in-memory
 * implementation (the embedded default) and a Redis one (production, shared by instances).
 *
 * Every scope has a version counter that grows by one with every change to that scope
 * (never reset, not even when the scope becomes empty), so `(scope, version)` identifies one
 * state of the scope and is a safe cache key.
 *
 * Ids must match ID_PATTERN: callers validate them first, a store throws a RangeError on an
 * invalid id (a bug). The Redis store throws `RegistryUnavailableError` when Redis cannot be
 * reached; both throw it for calls after `close()` (a request racing shutdown gets a 503).
 */
export interface RegistryStore {
  /** Where it keeps its data (GET /status, GET /readyz): `redis-cluster` with REDIS_CLUSTER_NODES. */
  readonly backend: 'memory' | 'redis' | 'redis-cluster'
  /** All servers of the scope, sorted by serverId. */
  list (scope: RegistryScope): Promise<StoredServer[]>
  /** The scope's servers and its version, read atomically (a consistent cache fill). */
  snapshot (scope: RegistryScope): Promise<{ version: number, servers: StoredServer[] }>
  get (scope: RegistryScope, serverId: string): Promise<StoredServer | undefined>
  /**
   * Creates or replaces. Atomic with the version increment; concurrent writers never lose an increment.
   * With `maxServers`, a write that would create a server in a scope already holding that many is a
   * ServerLimitError, decided atomically with the write (racing instances never pass it together).
   */
  put (scope: RegistryScope, serverId: string, config: ServerConfig, opts?: { maxServers?: number }): Promise<{ version: number, created: boolean }>
  /** Deleting a missing server changes nothing: `deleted` false and the current version. */
  delete (scope: RegistryScope, serverId: string): Promise<{ version: number, deleted: boolean }>
  /** 0 for a scope that was never written. */
  version (scope: RegistryScope): Promise<number>
  /** userIds that have at least one server, sorted. */
  listUserIds (): Promise<string[]>
  /**
   * Calls `listener` for every change made by ANY instance sharing the store, including
   * this one (its own changes are delivered before `put`/`delete` resolve). Returns an
   * unsubscribe function. A throwing listener does not affect the write or other listeners.
   */
  subscribe (listener: RegistryListener): () => void
  /**
   * The host uid the tenant's sandboxed commands run as (docs/ARCHITECTURE.md#isolation): allocated once, atomically, and
   * then the same for every instance sharing the store and across restarts. Two tenants never get
   * the same uid. A tenant whose stored uid lies outside `range` (the range was changed) gets a new
   * one. Throws a RangeError when every uid of the range is taken.
   */
  allocateSandboxUid (tenant: string, range: UidRange): Promise<number>
  /** The scope's document of this kind, or undefined when none was written (or it was deleted). */
  getDocument (kind: DocumentKind, scope: RegistryScope): Promise<StoredDocument | undefined>
  /**
   * Creates or replaces; atomic with the version increment and the change event, like `put`. With
   * `ifVersion` only when the document is at that version (0: only when there is none), else a
   * DocumentConflictError: a read-modify-write that two instances run at once loses nothing.
   */
  putDocument (kind: DocumentKind, scope: RegistryScope, value: unknown, opts?: { ifVersion?: number }): Promise<{ version: number, created: boolean }>
  /** Deleting a missing document changes nothing: `deleted` false and the current version. */
  deleteDocument (kind: DocumentKind, scope: RegistryScope): Promise<{ version: number, deleted: boolean }>
  /**
   * Document changes from every instance sharing the store (its own before the write resolves),
   * and `resync` when the event connection came back. Returns an unsubscribe function.
   */
  subscribeDocuments (listener: DocumentListener): () => void
  /** Resolves when the backend answers; throws RegistryUnavailableError otherwise. */
  ping (): Promise<void>
  /** Releases connections within a bounded time; never throws; idempotent. */
  close (): Promise<void>
}
