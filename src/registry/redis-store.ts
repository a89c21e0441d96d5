import { randomUUID } from 'node:crypto'
import { ReplyError } from 'ioredis'
import type { Redis } from 'ioredis'
import { assertScope, assertServerId, assertTenant, assertUidRange, RegistryUnavailableError } from './errors.js'
import { createRedisClient, escapeGlob, migrateKeys, quitWithTimeout, taggedKey } from '../redis/index.js'
import type { MigrationResult, RedisClient, RedisTarget } from '../redis/index.js'
import type { ServerConfig } from './server-config.js'
import { DocumentConflictError, ServerLimitError } from './types.js'
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

/**
 * Redis registry (docs/ARCHITECTURE.md#registry), shared by every gateway instance, on one Redis
 * server or a Redis Cluster. Layout (docs/CLUSTER.md#redis-key-layout), with `p` the key prefix
 * and `<tag>` the scope's hash tag, `reg:g` or `reg:u:<userId>`:
 * - `p{<tag>}:srv`: hash per scope, field = serverId, value = JSON `{ version, updatedAt, config }`
 * - `p{<tag>}:ver`: version counter per scope (INCR, never reset)
 * - `p{<tag>}:doc:<kind>`: one document (a tool policy), JSON `{ version, updatedAt, value }`,
 *   with its counter `p{<tag>}:docver:<kind>`; changes go out on `pevents` too, as
 *   `{ op: 'document', kind, scope, version }`
 * - `p{reg}:users`: set of userIds that have (or had) a server (see put: never shrinks)
 * - `p{sandbox}:uids`: the host uid of each tenant's sandbox (see ALLOCATE_UID_SCRIPT)
 * - `pevents`: pub/sub channel, one JSON message per change (a cluster broadcasts it to every node)
 * Every script touches the keys of one scope only, so one hash slot: a Redis Cluster runs it.
 * Before the tags (layout 1) the keys were `psrv:g`, `psrv:u:<userId>`, `pver:...`,
 * `psrv:users`, `psandbox:uids`, `pdoc:<kind>:...`, `pdocver:<kind>:...`: a single-Redis store
 * renames them once on start-up (see #migrate).
 *
 * Writes run as Lua scripts rather than MULTI/EXEC: a script is just as atomic, and it can
 * also embed the new version in the entry and in the event, skip the increment when a delete
 * finds nothing, and publish in the same atomic step (with MULTI the publish would either lack
 * the version or follow the EXEC, and a crash in between would lose the invalidation).
 */

export interface RedisRegistryStoreOptions {
  /** Where Redis is: one server or a Redis Cluster. Either this or `url`. */
  target?: RedisTarget
  /** `redis://host:port/db`: the same as `target: { kind: 'single', url }`. */
  url?: string
  /** Prefix of every key and of the channel. Default `tg:`. */
  keyPrefix?: string
  /** Bound on every command; past it the call fails with RegistryUnavailableError. Default 2000. */
  commandTimeoutMs?: number
  /** Bound on establishing a TCP connection. Default 2000. */
  connectTimeoutMs?: number
  /** Upper bound of the reconnect back-off. Default 2000. */
  maxReconnectDelayMs?: number
  /** Bound on `close()` per connection (QUIT, then a hard disconnect). Default 1000. */
  closeTimeoutMs?: number
  /** Connection errors (ioredis emits them while reconnecting). Messages may name the host. */
  onError?: (err: Error) => void
}

const PUT_SCRIPT = `
-- ARGV[5]: the most servers the scope may hold ('' = no bound); a write creating one more returns {-1, count}.
if ARGV[5] ~= '' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then
  local count = redis.call('HLEN', KEYS[1])
  if count >= tonumber(ARGV[5]) then return {-1, count} end
end
local v = redis.call('INCR', KEYS[2])
local created = redis.call('HSET', KEYS[1], ARGV[1], '{"version":' .. v .. ',' .. string.sub(ARGV[2], 2))
redis.call('PUBLISH', ARGV[3], '{"version":' .. v .. ',' .. string.sub(ARGV[4], 2))
return {v, created}
`

const DELETE_SCRIPT = `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return {tonumber(redis.call('GET', KEYS[2])) or 0, 0}
end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[2], '{"version":' .. v .. ',' .. string.sub(ARGV[3], 2))
return {v, 1}
`

/**
 * Sandbox uid per tenant (docs/ARCHITECTURE.md#isolation), in one hash `p{sandbox}:uids`: `t:{tenant}` -> uid,
 * `u:{uid}` -> tenant (so no uid is handed out twice, whatever the range was when it was taken),
 * and `cursor`, where the next search starts. The whole allocation is one script: atomic across
 * instances. Returns -1 when the range is full.
 */
const ALLOCATE_UID_SCRIPT = `
local first = tonumber(ARGV[2])
local last = tonumber(ARGV[3])
local known = redis.call('HGET', KEYS[1], 't:' .. ARGV[1])
if known then
  local k = tonumber(known)
  if k >= first and k <= last then return k end
end
local size = last - first + 1
local cursor = tonumber(redis.call('HGET', KEYS[1], 'cursor') or '0') or 0
for i = 0, size - 1 do
  local uid = first + (cursor + i) % size
  local name = string.format('%d', uid)
  if redis.call('HEXISTS', KEYS[1], 'u:' .. name) == 0 then
    if known then redis.call('HDEL', KEYS[1], 'u:' .. known) end
    redis.call('HSET', KEYS[1], 't:' .. ARGV[1], name)
    redis.call('HSET', KEYS[1], 'u:' .. name, ARGV[1])
    redis.call('HSET', KEYS[1], 'cursor', string.format('%d', (uid - first + 1) % size))
    return uid
  end
end
return -1
`

// ARGV[4]: the version the document must be at ('' for any; '0' for none), else {-1, current}.
const DOC_PUT_SCRIPT = `
-- A stored document's version is the counter's value at its write (every later write or delete moves the counter).
if ARGV[4] ~= '' then
  local current = 0
  if redis.call('EXISTS', KEYS[1]) == 1 then current = tonumber(redis.call('GET', KEYS[2])) or 0 end
  if current ~= tonumber(ARGV[4]) then return {-1, current} end
end
local v = redis.call('INCR', KEYS[2])
local existed = redis.call('EXISTS', KEYS[1])
redis.call('SET', KEYS[1], '{"version":' .. v .. ',' .. string.sub(ARGV[1], 2))
redis.call('PUBLISH', ARGV[2], '{"version":' .. v .. ',' .. string.sub(ARGV[3], 2))
return {v, 1 - existed}
`

const DOC_DELETE_SCRIPT = `
if redis.call('DEL', KEYS[1]) == 0 then
  return {tonumber(redis.call('GET', KEYS[2])) or 0, 0}
end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[1], '{"version":' .. v .. ',' .. string.sub(ARGV[2], 2))
return {v, 1}
`

const DOCUMENT_KINDS: ReadonlySet<string> = new Set<DocumentKind>(['policy', 'pins'])

/** A document change from the channel, or undefined when the message is not one. */
function parseDocumentEvent (message: string): (DocumentChange & { op: 'document', origin: string }) | undefined {
  let e: Record<string, unknown>
  try {
    e = JSON.parse(message) as Record<string, unknown>
  } catch {
    return undefined
  }
  if (typeof e !== 'object' || e === null || e.op !== 'document') return undefined
  if (typeof e.version !== 'number' || typeof e.kind !== 'string' || !DOCUMENT_KINDS.has(e.kind) || typeof e.origin !== 'string') return undefined
  const scope = e.scope as Record<string, unknown> | null | undefined
  const kind = e.kind as DocumentKind
  if (typeof scope !== 'object' || scope === null) return undefined
  if (scope.kind === 'global') return { op: 'document', kind, scope: { kind: 'global' }, version: e.version, origin: e.origin }
  if (scope.kind === 'user' && typeof scope.userId === 'string') {
    return { op: 'document', kind, scope: { kind: 'user', userId: scope.userId }, version: e.version, origin: e.origin }
  }
  return undefined
}

interface ScriptCommands {
  tgDocPut (docKey: string, versionKey: string, entryJson: string, channel: string, eventJson: string, ifVersion: string): Promise<[number, number]>
  tgDocDelete (docKey: string, versionKey: string, channel: string, eventJson: string): Promise<[number, number]>
  tgAllocateUid (uidsKey: string, tenant: string, first: string, last: string): Promise<number>
  tgRegistryPut (
    hashKey: string, versionKey: string, serverId: string, entryJson: string, channel: string, eventJson: string, maxServers: string
  ): Promise<[number, number]>
  tgRegistryDelete (hashKey: string, versionKey: string, serverId: string, channel: string, eventJson: string): Promise<[number, number]>
}

interface WireEvent {
  version: number
  op: 'put' | 'delete'
  scope: RegistryScope
  serverId: string
  origin: string
}

function parseEvent (message: string): WireEvent | undefined {
  let value: unknown
  try {
    value = JSON.parse(message)
  } catch {
    return undefined
  }
  if (typeof value !== 'object' || value === null) return undefined
  const e = value as Record<string, unknown>
  const scope = e.scope as Record<string, unknown> | null | undefined
  if (typeof e.version !== 'number' || (e.op !== 'put' && e.op !== 'delete') || typeof e.serverId !== 'string' || typeof e.origin !== 'string') return undefined
  if (typeof scope !== 'object' || scope === null) return undefined
  if (scope.kind === 'global') return { version: e.version, op: e.op, serverId: e.serverId, origin: e.origin, scope: { kind: 'global' } }
  if (scope.kind === 'user' && typeof scope.userId === 'string') {
    return { version: e.version, op: e.op, serverId: e.serverId, origin: e.origin, scope: { kind: 'user', userId: scope.userId } }
  }
  return undefined
}

/** The hash tag of a scope's keys: all of them in one slot, so its scripts run on a cluster. */
function scopeTag (scope: RegistryScope): string {
  return scope.kind === 'global' ? 'reg:g' : `reg:u:${scope.userId}`
}

function compareIds (a: StoredServer, b: StoredServer): number {
  return a.serverId < b.serverId ? -1 : a.serverId > b.serverId ? 1 : 0
}

export class RedisRegistryStore implements RegistryStore {
  readonly backend: 'redis' | 'redis-cluster'
  readonly keyPrefix: string
  /** Tags this instance's events so its own echo from pub/sub is not delivered twice. */
  readonly instanceId = randomUUID()
  readonly #target: RedisTarget
  #client: RedisClient & ScriptCommands
  #subscriber: RedisClient
  /** What the start-up migration did (undefined on a cluster, or before connect). */
  migration: MigrationResult | undefined
  #listeners = new Set<RegistryListener>()
  #documentListeners = new Set<DocumentListener>()
  #subscriberWasReady = false
  #closeTimeoutMs: number
  #readyTimeoutMs: number
  #closed = false
  #onError: (err: Error) => void

  constructor (options: RedisRegistryStoreOptions) {
    this.keyPrefix = options.keyPrefix ?? 'tg:'
    const target = options.target ?? (options.url !== undefined ? { kind: 'single' as const, url: options.url } : undefined)
    if (target === undefined) throw new Error('RedisRegistryStore needs a target or a url')
    this.#target = target
    this.backend = target.kind === 'cluster' ? 'redis-cluster' : 'redis'
    this.#closeTimeoutMs = options.closeTimeoutMs ?? 1000
    this.#onError = options.onError ?? (() => {})
    this.#readyTimeoutMs = 2 * (options.connectTimeoutMs ?? 2000) + (options.commandTimeoutMs ?? 2000)
    const common = {
      lazyConnect: true,
      connectTimeoutMs: options.connectTimeoutMs ?? 2000,
      // Reconnect forever with a capped back-off: a Redis restart must heal without a gateway restart.
      maxReconnectDelayMs: options.maxReconnectDelayMs ?? 2000
    }
    this.#client = createRedisClient(target, {
      ...common,
      // Fail fast instead of queueing while disconnected: a request gets a 503 now, never hangs.
      enableOfflineQueue: false,
      // A write in flight when the connection drops is not replayed: the script is not idempotent
      // (it increments the version), so the caller gets a 503 and decides.
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      commandTimeoutMs: options.commandTimeoutMs ?? 2000
    }) as RedisClient & ScriptCommands
    this.#client.defineCommand('tgRegistryPut', { numberOfKeys: 2, lua: PUT_SCRIPT })
    this.#client.defineCommand('tgRegistryDelete', { numberOfKeys: 2, lua: DELETE_SCRIPT })
    this.#client.defineCommand('tgAllocateUid', { numberOfKeys: 1, lua: ALLOCATE_UID_SCRIPT })
    this.#client.defineCommand('tgDocPut', { numberOfKeys: 2, lua: DOC_PUT_SCRIPT })
    this.#client.defineCommand('tgDocDelete', { numberOfKeys: 2, lua: DOC_DELETE_SCRIPT })
    this.#client.on('error', (err: Error) => this.#onError(err))

    this.#subscriber = createRedisClient(target, {
      ...common,
      // Subscribed by hand on every 'ready' so a resync is announced only once the
      // subscription is live again (see #onSubscriberReady).
      autoResubscribe: false
    })
    this.#subscriber.on('error', (err: Error) => this.#onError(err))
    this.#subscriber.on('ready', () => { this.#onSubscriberReady() })
    this.#subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.#channel) this.#onMessage(message)
    })
  }

  get #channel (): string {
    return `${this.keyPrefix}events`
  }

  /**
   * Starts both connections; resolves once commands can run and the event subscription is
   * live, so no change made after it resolves can be missed.
   */
  async connect (): Promise<void> {
    let timer: NodeJS.Timeout | undefined
    // connectTimeout only bounds the TCP handshake; a peer that accepts and never answers
    // would stall the ready check, so the whole start is bounded too.
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error('timed out waiting for Redis')), this.#readyTimeoutMs)
    })
    try {
      await Promise.race([this.#start(), deadline])
    } catch (err) {
      throw new RegistryUnavailableError('registry unavailable: cannot connect to Redis', { cause: err })
    } finally {
      clearTimeout(timer)
    }
    // Outside the deadline: a first start over a large layout-1 Redis scans it whole.
    try {
      await this.#migrate()
    } catch (err) {
      if (err instanceof ReplyError) throw err
      throw new RegistryUnavailableError('registry unavailable: the key migration failed', { cause: err })
    }
  }

  async #start (): Promise<void> {
    await Promise.all([this.#client.connect(), this.#subscriber.connect()])
    await this.#subscriber.subscribe(this.#channel)
    this.#subscriberWasReady = true
  }

  /**
   * Layout 1 (untagged names) to layout 2, once per Redis (docs/CLUSTER.md#redis-key-layout).
   * Only a single Redis can hold layout 1: the cluster support came with the tags.
   */
  async #migrate (): Promise<void> {
    if (this.#target.kind !== 'single') return
    const p = this.keyPrefix
    const e = escapeGlob(p)
    this.migration = await migrateKeys(this.#client as Redis, {
      marker: taggedKey(p, 'meta', 'layout:registry'),
      patterns: [`${e}srv:*`, `${e}ver:*`, `${e}doc:*`, `${e}docver:*`, `${e}sandbox:uids`],
      rename: (key) => {
        const rest = key.slice(p.length)
        if (rest === 'srv:users') return this.#usersKey
        if (rest === 'sandbox:uids') return this.#uidsKey
        const m = /^(srv|ver|doc|docver):(?:([a-z]+):)?(g|u:([A-Za-z0-9-]+))$/.exec(rest)
        if (m === null) return undefined
        const [, what, kind, , userId] = m
        const scope: RegistryScope = userId === undefined ? { kind: 'global' } : { kind: 'user', userId }
        if (what === 'srv' || what === 'ver') return kind === undefined ? taggedKey(p, scopeTag(scope), what) : undefined
        return kind === undefined ? undefined : taggedKey(p, scopeTag(scope), `${what}:${kind}`)
      }
    })
  }

  #onSubscriberReady (): void {
    // The first connection is subscribed by connect(); this handles reconnections.
    if (!this.#subscriberWasReady || this.#closed) return
    this.#subscriber.subscribe(this.#channel).then(() => {
      // Messages published while this connection was down are gone: tell listeners to drop
      // what they cached, now that no further change can be missed.
      this.#emit({ op: 'resync' })
      this.#emitDocument({ op: 'resync' })
    }, (err: unknown) => {
      this.#onError(err instanceof Error ? err : new Error(String(err)))
    })
  }

  #onMessage (message: string): void {
    const doc = parseDocumentEvent(message)
    if (doc !== undefined) {
      if (doc.origin !== this.instanceId) this.#emitDocument({ op: 'document', kind: doc.kind, scope: doc.scope, version: doc.version })
      return
    }
    const event = parseEvent(message)
    if (event === undefined || event.origin === this.instanceId) return
    this.#emit({ op: event.op, scope: event.scope, serverId: event.serverId, version: event.version })
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

  #emitDocument (change: DocumentChange): void {
    for (const listener of [...this.#documentListeners]) {
      try {
        listener(change)
      } catch {
        // A broken listener must not fail the write that already happened.
      }
    }
  }

  #docKeys (kind: DocumentKind, scope: RegistryScope): [string, string] {
    const tag = scopeTag(scope)
    return [taggedKey(this.keyPrefix, tag, `doc:${kind}`), taggedKey(this.keyPrefix, tag, `docver:${kind}`)]
  }

  async getDocument (kind: DocumentKind, scope: RegistryScope): Promise<StoredDocument | undefined> {
    assertScope(scope)
    const raw = await this.#run(() => this.#client.get(this.#docKeys(kind, scope)[0]))
    if (raw === null) return undefined
    let e: { version?: unknown, updatedAt?: unknown, value?: unknown } | undefined
    try {
      e = JSON.parse(raw) as typeof e
    } catch {
      e = undefined
    }
    if (typeof e !== 'object' || e === null || typeof e.version !== 'number' || typeof e.updatedAt !== 'string' || !('value' in e)) {
      throw new Error(`corrupt ${kind} document ${scope.kind === 'global' ? 'global' : `user ${scope.userId}`}`)
    }
    return { value: e.value, version: e.version, updatedAt: e.updatedAt }
  }

  async putDocument (
    kind: DocumentKind, scope: RegistryScope, value: unknown, opts: { ifVersion?: number } = {}
  ): Promise<{ version: number, created: boolean }> {
    assertScope(scope)
    const [docKey, versionKey] = this.#docKeys(kind, scope)
    const entryJson = JSON.stringify({ updatedAt: new Date().toISOString(), value })
    const eventJson = JSON.stringify({ op: 'document', kind, scope, origin: this.instanceId })
    const ifVersion = opts.ifVersion === undefined ? '' : String(opts.ifVersion)
    const [version, created] = await this.#run(() => this.#client.tgDocPut(docKey, versionKey, entryJson, this.#channel, eventJson, ifVersion))
    if (version === -1) throw new DocumentConflictError(kind, created)
    this.#emitDocument({ op: 'document', kind, scope: { ...scope }, version })
    return { version, created: created === 1 }
  }

  async deleteDocument (kind: DocumentKind, scope: RegistryScope): Promise<{ version: number, deleted: boolean }> {
    assertScope(scope)
    const [docKey, versionKey] = this.#docKeys(kind, scope)
    const eventJson = JSON.stringify({ op: 'document', kind, scope, origin: this.instanceId })
    const [version, deleted] = await this.#run(() => this.#client.tgDocDelete(docKey, versionKey, this.#channel, eventJson))
    if (deleted === 1) this.#emitDocument({ op: 'document', kind, scope: { ...scope }, version })
    return { version, deleted: deleted === 1 }
  }

  subscribeDocuments (listener: DocumentListener): () => void {
    this.#documentListeners.add(listener)
    return () => { this.#documentListeners.delete(listener) }
  }

  #hashKey (scope: RegistryScope): string {
    return taggedKey(this.keyPrefix, scopeTag(scope), 'srv')
  }

  #versionKey (scope: RegistryScope): string {
    return taggedKey(this.keyPrefix, scopeTag(scope), 'ver')
  }

  get #usersKey (): string {
    return taggedKey(this.keyPrefix, 'reg', 'users')
  }

  get #uidsKey (): string {
    return taggedKey(this.keyPrefix, 'sandbox', 'uids')
  }

  /** Runs a command, turning every connection-level failure into RegistryUnavailableError. */
  async #run<T> (fn: () => Promise<T>): Promise<T> {
    // During shutdown a late request gets a 503 like any other unreachable registry.
    if (this.#closed) throw new RegistryUnavailableError('registry unavailable: store is closed')
    try {
      return await fn()
    } catch (err) {
      // A reply error is Redis rejecting the command itself: a bug, not an outage.
      if (err instanceof ReplyError) throw err
      throw new RegistryUnavailableError('registry unavailable: Redis is not reachable', { cause: err })
    }
  }

  #parseEntry (scope: RegistryScope, serverId: string, raw: string): StoredServer {
    let value: unknown
    try {
      value = JSON.parse(raw)
    } catch {
      value = undefined
    }
    const e = value as { version?: unknown, updatedAt?: unknown, config?: unknown } | undefined
    if (typeof e !== 'object' || e === null || typeof e.config !== 'object' || e.config === null || typeof e.updatedAt !== 'string') {
      const where = scope.kind === 'global' ? 'global' : `user ${scope.userId}`
      throw new Error(`corrupt registry entry ${where}/${serverId}`)
    }
    const entry: StoredServer = { serverId, config: e.config as ServerConfig, updatedAt: e.updatedAt }
    if (typeof e.version === 'number') entry.version = e.version
    return entry
  }

  async list (scope: RegistryScope): Promise<StoredServer[]> {
    return (await this.snapshot(scope)).servers
  }

  async snapshot (scope: RegistryScope): Promise<{ version: number, servers: StoredServer[] }> {
    assertScope(scope)
    const results = await this.#run(() => this.#client.multi().hgetall(this.#hashKey(scope)).get(this.#versionKey(scope)).exec())
    if (results === null) throw new RegistryUnavailableError('registry unavailable: transaction aborted')
    const [hashResult, versionResult] = results
    if (hashResult?.[0] != null) throw hashResult[0]
    if (versionResult?.[0] != null) throw versionResult[0]
    const hash = (hashResult?.[1] ?? {}) as Record<string, string>
    const servers = Object.entries(hash).map(([id, raw]) => this.#parseEntry(scope, id, raw)).sort(compareIds)
    return { version: Number(versionResult?.[1] ?? 0), servers }
  }

  async get (scope: RegistryScope, serverId: string): Promise<StoredServer | undefined> {
    assertScope(scope)
    assertServerId(serverId)
    const raw = await this.#run(() => this.#client.hget(this.#hashKey(scope), serverId))
    return raw === null ? undefined : this.#parseEntry(scope, serverId, raw)
  }

  async put (scope: RegistryScope, serverId: string, config: ServerConfig, opts: { maxServers?: number } = {}): Promise<{ version: number, created: boolean }> {
    assertScope(scope)
    assertServerId(serverId)
    // Serialised here; the script splices `"version":N,` in after the opening brace.
    const entryJson = JSON.stringify({ updatedAt: new Date().toISOString(), config })
    const eventJson = JSON.stringify({ op: 'put', scope, serverId, origin: this.instanceId })
    // The set of userIds is in another slot than the scope's keys, so a cluster cannot update it
    // in the put script. Added first, and never removed (not even when a delete empties the
    // hash): a member without servers only costs listUserIds a lookup, while a removal could race
    // with a concurrent put of the same user (SREM after its SADD) and lose a tenant that has servers.
    if (scope.kind === 'user') await this.#run(() => this.#client.sadd(this.#usersKey, scope.userId))
    const [version, created] = await this.#run(() => this.#client.tgRegistryPut(
      this.#hashKey(scope), this.#versionKey(scope), serverId, entryJson, this.#channel, eventJson, String(opts.maxServers ?? '')))
    if (version === -1) throw new ServerLimitError(opts.maxServers ?? 0)
    this.#emit({ op: 'put', scope: { ...scope }, serverId, version })
    return { version, created: created === 1 }
  }

  async delete (scope: RegistryScope, serverId: string): Promise<{ version: number, deleted: boolean }> {
    assertScope(scope)
    assertServerId(serverId)
    const eventJson = JSON.stringify({ op: 'delete', scope, serverId, origin: this.instanceId })
    const [version, deleted] = await this.#run(() => this.#client.tgRegistryDelete(
      this.#hashKey(scope), this.#versionKey(scope), serverId, this.#channel, eventJson))
    if (deleted === 1) this.#emit({ op: 'delete', scope: { ...scope }, serverId, version })
    return { version, deleted: deleted === 1 }
  }

  async version (scope: RegistryScope): Promise<number> {
    assertScope(scope)
    const raw = await this.#run(() => this.#client.get(this.#versionKey(scope)))
    return raw === null ? 0 : Number(raw)
  }

  async listUserIds (): Promise<string[]> {
    const ids = await this.#run(() => this.#client.smembers(this.#usersKey))
    // The set never shrinks (see put): users whose hash is empty have no servers now.
    const sizes = await this.#run(async () => await Promise.all(ids.map(async (id) => await this.#client.hlen(this.#hashKey({ kind: 'user', userId: id })))))
    return ids.filter((_id, i) => (sizes[i] ?? 0) > 0).sort()
  }

  async allocateSandboxUid (tenant: string, range: UidRange): Promise<number> {
    assertTenant(tenant)
    assertUidRange(range)
    const uid = await this.#run(() => this.#client.tgAllocateUid(this.#uidsKey, tenant, String(range.first), String(range.last)))
    if (uid < 0) throw new RangeError(`every sandbox uid of ${range.first}-${range.last} is taken`)
    return uid
  }

  subscribe (listener: RegistryListener): () => void {
    this.#listeners.add(listener)
    return () => { this.#listeners.delete(listener) }
  }

  async ping (): Promise<void> {
    await this.#run(() => this.#client.ping())
  }

  /** True while the command connection is up (for /readyz without a round trip). */
  get connected (): boolean {
    return this.#client.status === 'ready'
  }

  async close (): Promise<void> {
    if (this.#closed) return
    this.#closed = true
    this.#listeners.clear()
    this.#documentListeners.clear()
    await Promise.all([
      quitWithTimeout(this.#client, this.#closeTimeoutMs),
      quitWithTimeout(this.#subscriber, this.#closeTimeoutMs)
    ])
  }
}

/**
 * Creates the store and waits for its first connection. Redis not answering within the
 * connect timeout rejects with RegistryUnavailableError (and the connections are closed);
 * after that, outages make individual calls fail fast and the store reconnects by itself.
 */
export async function createRedisRegistryStore (options: RedisRegistryStoreOptions): Promise<RedisRegistryStore> {
  const store = new RedisRegistryStore(options)
  try {
    await store.connect()
  } catch (err) {
    await store.close()
    throw err
  }
  return store
}
