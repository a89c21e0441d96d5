import { Redis } from 'ioredis'
import { quitWithTimeout } from '../redis/index.js'
import { matches, SCAN_BUDGET } from './store.js'
import type { JournalPage, JournalQuery, JournalStore, PendingEntry } from './store.js'

/**
 * A batch of entries in one call (one command to encode, one round trip). Per entry: XADD with
 * approximate MAXLEN (cheap: whole stream nodes are dropped), the callId index with the retention
 * as TTL, an approximate MINID trim when the caller asks for one, and the stream's own TTL renewed
 * (a tenant that stops calling loses its journal after the retention, without any sweeper).
 * KEYS: stream and callId key per entry; ARGV: MAXLEN, TTL (ms), then json, name, isError, minId per entry.
 */
const APPEND_SCRIPT = `
local ids = {}
for i = 0, #KEYS / 2 - 1 do
  local stream = KEYS[1 + 2 * i]
  local a = 3 + 4 * i
  local id = redis.call('XADD', stream, 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[a], 'n', ARGV[a + 1], 'x', ARGV[a + 2])
  redis.call('SET', KEYS[2 + 2 * i], id, 'PX', ARGV[2])
  if ARGV[a + 3] ~= '' then redis.call('XTRIM', stream, 'MINID', '~', ARGV[a + 3]) end
  redis.call('PEXPIRE', stream, ARGV[2])
  ids[#ids + 1] = id
end
return ids
`

interface AppendCommand {
  /** numKeys, then the keys, then the arguments (see APPEND_SCRIPT). */
  tgJournalAppend: (numKeys: number, ...keysAndArgs: Array<string | number>) => Promise<string[]>
}

export interface RedisJournalOptions {
  url: string
  keyPrefix: string
  /** JOURNAL_MAX_ENTRIES: the approximate MAXLEN of each tenant's stream. */
  maxEntriesPerTenant: number
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
 * every instance. Layout, with `{p}` the key prefix:
 * - `{p}journal:{tenant}`: the stream; fields `e` (the entry's JSON), `n` (tool name), `x` (1 when isError)
 * - `{p}journal:{tenant}:call:{callId}`: the stream id of the call's latest entry, expiring with the retention
 *
 * Its own connection, which never queues while Redis is away (a write fails at once and the
 * journal counts the drop), so journal traffic never waits behind, or delays, registry commands.
 */
export class RedisJournalStore implements JournalStore {
  readonly backend = 'redis' as const
  readonly lingerMs = 20
  readonly #client: Redis & AppendCommand
  readonly #opts: RedisJournalOptions
  readonly #now: () => number
  readonly #trimmed = new Map<string, number>()

  constructor (opts: RedisJournalOptions) {
    this.#opts = opts
    this.#now = opts.now ?? Date.now
    this.#client = new Redis(opts.url, {
      lazyConnect: true,
      connectTimeout: 2000,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      commandTimeout: opts.commandTimeoutMs ?? 2000,
      retryStrategy: (times: number) => Math.min(50 * 2 ** Math.min(times, 10), 2000)
    }) as Redis & AppendCommand
    this.#client.defineCommand('tgJournalAppend', { lua: APPEND_SCRIPT })
    this.#client.on('error', (err: Error) => opts.onError?.(err))
    // Not awaited: the gateway starts (and serves calls) whether or not the journal's Redis is up;
    // ioredis keeps reconnecting, and appends fail fast meanwhile.
    this.#client.connect().catch(() => {})
  }

  #stream (tenant: string): string {
    return `${this.#opts.keyPrefix}journal:${tenant}`
  }

  #callKey (tenant: string, callId: string): string {
    return `${this.#opts.keyPrefix}journal:${tenant}:call:${callId}`
  }

  async append (entries: PendingEntry[]): Promise<number> {
    if (entries.length === 0) return 0
    const now = this.#now()
    const keys: string[] = []
    const args: Array<string | number> = [this.#opts.maxEntriesPerTenant, this.#opts.retentionMs]
    for (const e of entries) {
      let minId = ''
      const last = this.#trimmed.get(e.tenant)
      if (last === undefined || now - last >= TRIM_EVERY_MS) {
        if (this.#trimmed.size >= TRIM_MEMORY) this.#trimmed.clear()
        this.#trimmed.set(e.tenant, now)
        minId = String(Math.max(0, now - this.#opts.retentionMs))
      }
      keys.push(this.#stream(e.tenant), this.#callKey(e.tenant, e.callId))
      args.push(e.json, e.name, e.isError ? '1' : '0', minId)
    }
    // All or nothing: a script either runs whole or fails (then the journal counts the batch as dropped).
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
