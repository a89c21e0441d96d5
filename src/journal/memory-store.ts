import { matches, parseId, SCAN_BUDGET } from './store.js'
import type { JournalPage, JournalQuery, JournalStore, PendingEntry } from './store.js'

interface Item {
  /** With `seq`, the entry's id (`{ms}-{seq}`, made only when a page needs it). */
  ms: number
  seq: number
  tenant: string
  callId: string
  name: string
  isError: boolean
  /** The entry's JSON as UTF-8, off the JS heap: entries that live until evicted were most of the
   * garbage collector's work on a busy gateway (each was copied twice and promoted), and a Buffer's
   * bytes are never copied. */
  json: Buffer
  /** False once evicted (by the tenant's cap or retention) while still queued in the global order. */
  live: boolean
}

/** A FIFO with O(1) push, shift and indexed reads (Array#shift is O(n) on large arrays). */
class Deque<T> {
  #items: T[] = []
  #head = 0
  get length (): number { return this.#items.length - this.#head }
  push (item: T): void { this.#items.push(item) }
  at (i: number): T { return this.#items[this.#head + i] as T }
  shift (): T | undefined {
    if (this.length === 0) return undefined
    const item = this.#items[this.#head] as T
    this.#items[this.#head++] = undefined as unknown as T
    if (this.#head > 1024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head)
      this.#head = 0
    }
    return item
  }

  /** Keeps only the items `keep` accepts, in order. */
  filter (keep: (item: T) => boolean): void {
    this.#items = this.#items.slice(this.#head).filter(keep)
    this.#head = 0
  }
}

interface Ring {
  items: Deque<Item>
  byCall: Map<string, Item>
  /** UTF-8 bytes of the live entries' JSON. */
  bytes: number
}

export interface MemoryJournalOptions {
  /** Entries kept per tenant (JOURNAL_MAX_ENTRIES); the oldest go first. */
  maxEntriesPerTenant: number
  /** Entries older than this are neither read nor kept (JOURNAL_RETENTION). */
  retentionMs: number
  /** UTF-8 bytes of entry JSON kept over all tenants (JOURNAL_MEMORY_BYTES): many tenants cannot grow memory without bound. */
  maxBytes: number
  /**
   * UTF-8 bytes of entry JSON kept per tenant (JOURNAL_TENANT_BYTES); past it the tenant's own oldest go (its newest
   * entry always stays). Without it one tenant writing large entries would take the whole of maxBytes, and the
   * shared budget's oldest-first eviction would push out every other tenant's journal. Default: no bound but maxBytes.
   */
  maxBytesPerTenant?: number
  now?: () => number
}

/**
 * The journal without Redis: a ring per tenant, plus one global order of every entry so that
 * past the total budget the oldest entries of all tenants go first. Per instance and lost on
 * restart (documented); Redis shares it between instances and keeps it.
 */
export class MemoryJournalStore implements JournalStore {
  readonly backend = 'memory' as const
  readonly #opts: MemoryJournalOptions
  readonly #maxTenantBytes: number
  readonly #now: () => number
  readonly #tenants = new Map<string, Ring>()
  readonly #global = new Deque<Item>()
  #live = 0
  #bytes = 0
  #lastMs = 0
  #seq = 0

  constructor (opts: MemoryJournalOptions) {
    this.#opts = opts
    this.#maxTenantBytes = opts.maxBytesPerTenant ?? Number.POSITIVE_INFINITY
    this.#now = opts.now ?? Date.now
  }

  /** Live entries and their JSON size (UTF-8 bytes), for tests and status. */
  get size (): { entries: number, bytes: number, tenants: number } {
    return { entries: this.#live, bytes: this.#bytes, tenants: this.#tenants.size }
  }

  async append (entries: PendingEntry[]): Promise<number> {
    for (const e of entries) this.#appendOne(e)
    return entries.length
  }

  #appendOne (e: PendingEntry): void {
    // Ids like a stream's: milliseconds, then a sequence within the millisecond, never going back.
    const now = this.#now()
    if (now > this.#lastMs) {
      this.#lastMs = now
      this.#seq = 0
    } else {
      this.#seq++
    }
    const item: Item = {
      ms: this.#lastMs,
      seq: this.#seq,
      tenant: e.tenant,
      callId: e.callId,
      name: e.name,
      isError: e.isError,
      json: ownBytes(e.json),
      live: true
    }
    let ring = this.#tenants.get(e.tenant)
    if (ring === undefined) {
      ring = { items: new Deque(), byCall: new Map(), bytes: 0 }
      this.#tenants.set(e.tenant, ring)
    }
    ring.items.push(item)
    ring.byCall.set(e.callId, item)
    this.#global.push(item)
    this.#live++
    this.#bytes += item.json.length
    ring.bytes += item.json.length

    const oldest = now - this.#opts.retentionMs
    while (ring.items.length > this.#opts.maxEntriesPerTenant || (ring.items.length > 0 && ring.items.at(0).ms < oldest) ||
      (ring.items.length > 1 && ring.bytes > this.#maxTenantBytes)) {
      this.#evict(ring, ring.items.shift() as Item)
    }
    while (this.#bytes > this.#opts.maxBytes && this.#global.length > 0) {
      const head = this.#global.shift() as Item
      if (!head.live) continue
      const owner = this.#tenants.get(head.tenant) as Ring
      // The globally oldest live entry is its tenant's oldest too: both orders are append order.
      owner.items.shift()
      this.#evict(owner, head)
    }
    // Entries a tenant evicted itself stay in the global order until they reach its head; past
    // as many of them as live entries, they are swept out, so the order stays O(live).
    if (this.#global.length > 2 * this.#live + 1024) this.#global.filter((i) => i.live)
  }

  #evict (ring: Ring, item: Item): void {
    item.live = false
    this.#live--
    this.#bytes -= item.json.length
    ring.bytes -= item.json.length
    if (ring.byCall.get(item.callId) === item) ring.byCall.delete(item.callId)
    if (ring.items.length === 0) this.#tenants.delete(item.tenant)
  }

  async page (tenant: string, query: JournalQuery): Promise<JournalPage> {
    const ring = this.#tenants.get(tenant)
    if (ring === undefined) return { entries: [], next: null }
    const lower = Math.max(query.since ?? 0, this.#now() - this.#opts.retentionMs)
    const items = ring.items
    // The newest entry at or before the upper bound: `before` (exclusive) and `until` (inclusive).
    let hi = items.length - 1
    if (query.before !== undefined) {
      const [bms, bseq] = parseId(query.before)
      hi = lastIndex(items, (it) => it.ms < bms || (it.ms === bms && it.seq < bseq))
    }
    if (query.until !== undefined) {
      const until = query.until
      hi = Math.min(hi, lastIndex(items, (it) => it.ms <= until))
    }
    const entries: string[] = []
    let scanned = 0
    for (let i = hi; i >= 0; i--) {
      const it = items.at(i)
      if (it.ms < lower) return { entries, next: null }
      scanned++
      if (matches(it.name, it.isError, query)) entries.push(it.json.toString())
      const more = i > 0 && items.at(i - 1).ms >= lower
      if (entries.length >= query.limit || scanned >= SCAN_BUDGET) return { entries, next: more ? `${it.ms}-${it.seq}` : null }
    }
    return { entries, next: null }
  }

  async get (tenant: string, callId: string): Promise<string | undefined> {
    const item = this.#tenants.get(tenant)?.byCall.get(callId)
    if (item === undefined || item.ms < this.#now() - this.#opts.retentionMs) return undefined
    return item.json.toString()
  }

  async close (): Promise<void> {
    this.#tenants.clear()
    this.#global.filter(() => false)
    this.#live = 0
    this.#bytes = 0
  }
}

/**
 * `text` as UTF-8 in memory of its own: Buffer.from would cut small entries out of shared 8 KiB
 * slabs, and one live entry would keep a whole slab of evicted ones alive (the byte budget would
 * no longer bound the memory).
 */
function ownBytes (text: string): Buffer {
  const bytes = Buffer.allocUnsafeSlow(Buffer.byteLength(text))
  bytes.write(text)
  return bytes
}

/** The last index whose item satisfies `before` (items are ordered, `before` true then false); -1 if none. */
function lastIndex (items: Deque<Item>, before: (item: Item) => boolean): number {
  let lo = 0
  let hi = items.length
  while (lo < hi) {
    const mid = (lo + hi) >>> 1
    if (before(items.at(mid))) lo = mid + 1
    else hi = mid
  }
  return lo - 1
}
