import type { Redis } from 'ioredis'
import { createRedisClient, escapeGlob, migrateKeys, quitWithTimeout, taggedKey } from '../redis/index.js'
import type { MigrationResult, RedisClient, RedisTarget } from '../redis/index.js'
import { matches, SCAN_BUDGET } from './store.js'
import type { JournalPage, JournalQuery, JournalStore, PendingEntry } from './store.js'

/**
 * A batch of one tenant's entries in one call (one command to encode, one round trip): the keys
 * of one tenant share a hash slot, so a Redis Cluster runs it; a batch of several tenants is one
 * call per tenant (see append). Per entry: XADD with approximate MAXLEN (cheap: whole stream nodes
 * are dropped), the callId index key with the retention as TTL, the call's place and size in the
 * tenant's list of calls and its byte count, and an approximate MINID trim when the caller asks
 * for one. Then the list is cut to MAXLEN entries and to the tenant's byte budget (its newest entry
 * always stays), and the index key of each call cut from it goes too (unless a newer entry of the
 * same callId took it over): the index holds what the stream holds, not every call of the
 * retention. A cut for bytes trims the stream exactly to the list's oldest call (MAXLEN alone is
 * approximate, and would keep up to a stream node of large entries past the budget). Last, the
 * TTLs renewed (a tenant that stops calling loses its journal after the retention, without any
 * sweeper). The cut keys are named from the tenant's call-key prefix: they share the stream's hash
 * tag, so its slot. A list item is `<stream id>:<bytes> <callId>` (`<stream id> <callId>` before
 * the byte budget: counted as 0 bytes).
 * KEYS: stream, calls list, bytes counter, then the callId key of each entry; ARGV: MAXLEN, TTL (ms),
 * call-key prefix, byte budget, then json, name, isError, minId, callId per entry.
 */
const APPEND_SCRIPT = `
local stream = KEYS[1]
local calls = KEYS[2]
local bytesKey = KEYS[3]
local maxLen = tonumber(ARGV[1])
local maxBytes = tonumber(ARGV[4])
local ids = {}
for i = 0, #KEYS - 4 do
  local a = 5 + 5 * i
  local id = redis.call('XADD', stream, 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[a], 'n', ARGV[a + 1], 'x', ARGV[a + 2])
  redis.call('SET', KEYS[4 + i], id, 'PX', ARGV[2])
  redis.call('RPUSH', calls, id .. ':' .. #ARGV[a] .. ' ' .. ARGV[a + 4])
  redis.call('INCRBY', bytesKey, #ARGV[a])
  if ARGV[a + 3] ~= '' then redis.call('XTRIM', stream, 'MINID', '~', ARGV[a + 3]) end
  ids[#ids + 1] = id
end
local bytes = tonumber(redis.call('GET', bytesKey))
local length = redis.call('LLEN', calls)
local cutForBytes = false
while length > 1 and (length > maxLen or bytes > maxBytes) do
  if length <= maxLen then cutForBytes = true end
  local item = redis.call('LPOP', calls)
  length = length - 1
  local space = string.find(item, ' ', 1, true)
  local head = string.sub(item, 1, space - 1)
  local colon = string.find(head, ':', 1, true)
  local id = head
  if colon then
    id = string.sub(head, 1, colon - 1)
    bytes = bytes - tonumber(string.sub(head, colon + 1))
  end
  local key = ARGV[3] .. string.sub(item, space + 1)
  if redis.call('GET', key) == id then redis.call('DEL', key) end
end
if bytes < 0 then bytes = 0 end
redis.call('SET', bytesKey, bytes, 'PX', ARGV[2])
if cutForBytes then
  local first = redis.call('LINDEX', calls, 0)
  local space = string.find(first, ' ', 1, true)
  local colon = string.find(first, ':', 1, true)
  local id = string.sub(first, 1, (colon and colon < space and colon or space) - 1)
  redis.call('XTRIM', stream, 'MINID', id)
end
redis.call('PEXPIRE', stream, ARGV[2])
redis.call('PEXPIRE', calls, ARGV[2])
return ids
`

interface AppendCommand {
  /** numKeys, then the keys, then the arguments (see APPEND_SCRIPT). */
  tgJournalAppend: (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<string[]>
}

export interface RedisJournalOptions {
  /** Where Redis is: one server or a Redis Cluster. Either this or `url`. */
  target?: RedisTarget
  /** `redis://...`: the same as `target: { kind: 'single', url }`. */
  url?: string
  keyPrefix: string
  /** JOURNAL_MAX_ENTRIES: the approximate MAXLEN of each tenant's stream. */
  maxEntriesPerTenant: number
  /** JOURNAL_TENANT_BYTES: UTF-8 bytes of entry JSON kept per tenant (its newest entry always stays). Default: no bound but the count. */
  maxBytesPerTenant?: number
  /** JOURNAL_RETENTION in ms. */
  retentionMs: number
  /** Bound on every command. Default 2000. */
  commandTimeoutMs?: number
  onError?: (err: Error) => void
  now?: () => number
}

/** A MINID trim per tenant at most this often per instance (XADD's MAXLEN runs on every append). */
const TRIM_EVERY_MS = 60_000
/** Tenants whose last trim time is remembered; past it the memory is dropped (a few extra trims). */
const TRIM_MEMORY = 100_000

type StreamEntry = [id: string, fields: string[]]

/**
 * The journal in Redis Streams (docs/ARCHITECTURE.md#journal), one stream per tenant, shared by
 * every instance, on one Redis server or a Redis Cluster. Layout (docs/CLUSTER.md#redis-key-layout),
 * with `p` the key prefix, every key of a tenant under its hash tag `{journal:<tenant>}`:
 * - `p{journal:<tenant>}:stream`: the stream; fields `e` (the entry's JSON), `n` (tool name), `x` (1 when isError)
 * - `p{journal:<tenant>}:call:<callId>`: the stream id of the call's latest entry, expiring with the retention
 * - `p{journal:<tenant>}:calls`: a list of `<stream id>:<bytes> <callId>` of the newest JOURNAL_MAX_ENTRIES entries
 *   within JOURNAL_TENANT_BYTES, so that the index keys of the calls cut from it are deleted with them
 * - `p{journal:<tenant>}:bytes`: the sum of the list's entry sizes (UTF-8 bytes of their JSON)
 * Before the tags they were `pjournal:<tenant>` and `pjournal:<tenant>:call:<callId>`: a
 * single-Redis store renames them once after its first connect (see #migrate).
 *
 * Its own connection, which never queues while Redis is away (a write fails at once and the
 * journal counts the drop), so journal traffic never waits behind, or delays, registry commands.
 */
export class RedisJournalStore implements JournalStore {
  readonly backend = 'redis' as const
  readonly lingerMs = 20
  readonly #client: RedisClient & AppendCommand
  /** Settles when the start-up migration is done (undefined: none ran: a cluster, or it failed). */
  readonly migrated: Promise<MigrationResult | undefined>
  readonly #opts: RedisJournalOptions
  readonly #now: () => number
  readonly #trimmed = new Map<string, number>()

  constructor (opts: RedisJournalOptions) {
    this.#opts = opts
    this.#now = opts.now ?? Date.now
    const target = opts.target ?? (opts.url !== undefined ? { kind: 'single' as const, url: opts.url } : undefined)
    if (target === undefined) throw new Error('RedisJournalStore needs a target or a url')
    this.#client = createRedisClient(target, {
      lazyConnect: true,
      connectTimeoutMs: 2000,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      commandTimeoutMs: opts.commandTimeoutMs ?? 2000
    }) as RedisClient & AppendCommand
    this.#client.defineCommand('tgJournalAppend', { lua: APPEND_SCRIPT })
    this.#client.on('error', (err: Error) => opts.onError?.(err))
    // Not awaited: the gateway starts (and serves calls) whether or not the journal's Redis is up;
    // ioredis keeps reconnecting, and appends fail fast meanwhile.
    this.migrated = this.#client.connect().then(async () => await this.#migrate(target), (err: unknown) => {
      opts.onError?.(err instanceof Error ? err : new Error(String(err)))
      return undefined
    })
  }

  /**
   * Layout 1 (untagged) to layout 2, once per Redis. Appends may run meanwhile: a tenant's old
   * stream is then merged into the new one in id order, so no entry is lost; reads of that
   * tenant miss the old entries only until its key is moved.
   */
  async #migrate (target: RedisTarget): Promise<MigrationResult | undefined> {
    if (target.kind !== 'single') return undefined
    const p = this.#opts.keyPrefix
    try {
      return await migrateKeys(this.#client as Redis, {
        marker: taggedKey(p, 'meta', 'layout:journal'),
        patterns: [`${escapeGlob(p)}journal:*`],
        rename: (key) => {
          const m = /^journal:([A-Za-z0-9_.-]+)(?::call:([\s\S]*))?$/.exec(key.slice(p.length))
          if (m === null) return undefined
          const [, tenant, callId] = m as unknown as [string, string, string | undefined]
          return callId === undefined ? this.#stream(tenant) : this.#callKey(tenant, callId)
        }
      })
    } catch (err) {
      // Tried again on the next start (the marker is set only once the scan completed).
      this.#opts.onError?.(err instanceof Error ? err : new Error(String(err)))
      return undefined
    }
  }

  #stream (tenant: string): string {
    return taggedKey(this.#opts.keyPrefix, `journal:${tenant}`, 'stream')
  }

  #callKey (tenant: string, callId: string): string {
    return taggedKey(this.#opts.keyPrefix, `journal:${tenant}`, `call:${callId}`)
  }

  #callsList (tenant: string): string {
    return taggedKey(this.#opts.keyPrefix, `journal:${tenant}`, 'calls')
  }

  #bytesKey (tenant: string): string {
    return taggedKey(this.#opts.keyPrefix, `journal:${tenant}`, 'bytes')
  }

  async append (entries: PendingEntry[]): Promise<number> {
    if (entries.length === 0) return 0
    // One script call per tenant: a script may only touch one hash slot on a cluster. All sent at
    // once (one round trip on a single server); each tenant's part is all or nothing.
    const byTenant = new Map<string, PendingEntry[]>()
    for (const e of entries) {
      const list = byTenant.get(e.tenant)
      if (list === undefined) byTenant.set(e.tenant, [e])
      else list.push(e)
    }
    const outcomes = await Promise.allSettled([...byTenant.values()].map(async (list) => await this.#appendTenant(list)))
    let written = 0
    for (const o of outcomes) if (o.status === 'fulfilled') written += o.value
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected')
    // Nothing written: the batch fails as a whole (the journal counts it dropped, with the cause).
    if (written === 0 && failed !== undefined) throw failed.reason
    return written
  }

  /** One tenant's entries (append groups them so). */
  async #appendTenant (entries: PendingEntry[]): Promise<number> {
    const now = this.#now()
    const tenant = (entries[0] as PendingEntry).tenant
    const keys: string[] = [this.#stream(tenant), this.#callsList(tenant), this.#bytesKey(tenant)]
    const args: Array<string | number> = [
      this.#opts.maxEntriesPerTenant, this.#opts.retentionMs, this.#callKey(tenant, ''), this.#opts.maxBytesPerTenant ?? Number.MAX_SAFE_INTEGER
    ]
    for (const e of entries) {
      let minId = ''
      const last = this.#trimmed.get(tenant)
      if (last === undefined || now - last >= TRIM_EVERY_MS) {
        if (this.#trimmed.size >= TRIM_MEMORY) this.#trimmed.clear()
        this.#trimmed.set(tenant, now)
        minId = String(Math.max(0, now - this.#opts.retentionMs))
      }
      keys.push(this.#callKey(tenant, e.callId))
      args.push(e.json, e.name, e.isError ? '1' : '0', minId, e.callId)
    }
    // All or nothing: a script either runs whole or fails.
    const ids = await this.#client.tgJournalAppend(keys.length, ...keys, ...args)
    return ids.length
  }

  async page (tenant: string, query: JournalQuery): Promise<JournalPage> {
    const lower = Math.max(query.since ?? 0, this.#now() - this.#opts.retentionMs)
    const start = String(lower)
    let end = query.until !== undefined ? String(query.until) : '+'
    if (query.before !== undefined) {
      const beforeMs = Number(query.before.slice(0, query.before.indexOf('-')))
      if (query.until === undefined || query.until >= beforeMs) end = `(${query.before}`
    }
    const filtered = query.tool !== undefined || query.isError !== undefined
    const entries: string[] = []
    let scanned = 0
    for (;;) {
      // One more than a page shows whether another page exists; filtered pages read in larger steps.
      const count = Math.min(SCAN_BUDGET - scanned, filtered ? Math.max(200, query.limit + 1) : query.limit - entries.length + 1)
      const batch = await this.#client.xrevrange(this.#stream(tenant), end, start, 'COUNT', count) as StreamEntry[]
      for (let i = 0; i < batch.length; i++) {
        const [id, fields] = batch[i] as StreamEntry
        scanned++
        const f = fieldMap(fields)
        if (matches(f.n ?? '', f.x === '1', query) && f.e !== undefined) entries.push(f.e)
        const more = i < batch.length - 1 || batch.length === count
        if (entries.length >= query.limit || scanned >= SCAN_BUDGET) return { entries, next: more ? id : null }
      }
      if (batch.length < count) return { entries, next: null }
      end = `(${(batch[batch.length - 1] as StreamEntry)[0]}`
    }
  }

  async get (tenant: string, callId: string): Promise<string | undefined> {
    const id = await this.#client.get(this.#callKey(tenant, callId))
    if (id === null) return undefined
    if (Number(id.slice(0, id.indexOf('-'))) < this.#now() - this.#opts.retentionMs) return undefined
    const found = await this.#client.xrange(this.#stream(tenant), id, id) as StreamEntry[]
    const first = found[0]
    return first === undefined ? undefined : fieldMap(first[1]).e
  }

  /** Connection state, for tests: `ready` when appends can go through. */
  get status (): string {
    return this.#client.status
  }

  async close (): Promise<void> {
    await quitWithTimeout(this.#client, 1000)
  }
}

function fieldMap (fields: string[]): { e?: string, n?: string, x?: string } {
  const out: Record<string, string> = {}
  for (let i = 0; i + 1 < fields.length; i += 2) out[fields[i] as string] = fields[i + 1] as string
  return out
}
