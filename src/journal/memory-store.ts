import { fillHash } from './entry.js'
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
  /** The entry's JSON as UTF-8: `size` bytes at `at` in its tenant's `slab`. */
  slab: Slab
  at: number
  size: number
  /** Where its argumentsSha256 is still to be written (entry.ts DeferredHash); hashAt -1: written. */
  hashFrom: number
  hashTo: number
  hashAt: number
  /** False once evicted (by the tenant's cap or retention) while still queued in the global order. */
  live: boolean
}

/**
 * Where a tenant's entries' JSON is kept: UTF-8 off the JS heap (entries that live until evicted were most of the
 * garbage collector's work on a busy gateway: each was copied twice and promoted; a Buffer's bytes are never copied),
 * in buffers each tenant fills in append order rather than one buffer per entry (an allocation, an ArrayBuffer and
 * its backing store per call: 12-20% of the memory journal's CPU per entry, bench row 16.1). A tenant's entries go
 * oldest first (its cap, retention, and the shared budget's oldest-first order all take its oldest), so its buffers
 * empty in the order they were filled and each is let go when its last entry goes; no buffer is shared between
 * tenants, so no tenant's entries keep another's memory alive.
 */
interface Slab {
  bytes: Buffer
  used: number
  /** Live entries in it. */
  live: number
  /** In its tenant's `slabs` (false: the buffer of one large entry, let go with it). */
  shared: boolean
}

/**
 * A tenant's next buffer holds a quarter of its live bytes, at most SLAB_MAX and at least the entry: a tenant with one
 * entry has a buffer of that entry's size, and a busy one a buffer per SLAB_MAX of entries.
 */
const SLAB_MAX = 64 * 1024
/**
 * An entry larger than this that does not fit the free end of its tenant's buffer has a buffer of its own: what a
 * buffer's end cannot hold of the next entry stays unused, so this bounds the waste of a full SLAB_MAX buffer to an
 * eighth. What a tenant's buffers hold beyond its live entries' bytes (`size.held`): that, the newest buffer's free
 * end and the oldest one's evicted head; at most its live bytes again plus twice SLAB_MAX (sizes chosen to waste
 * them peaked at 0.62x of the live bytes while a tenant grew), 10-20% of them for a tenant at its cap (the test's
 * patterns). A buffer per entry held ~300 bytes more per entry than its JSON (the Buffer, its ArrayBuffer and backing store).
 */
const SLAB_ENTRY_MAX = SLAB_MAX / 8

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
  /** Oldest first; the last is the one being filled. */
  slabs: Deque<Slab>
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
  readonly fillsHash = true
  readonly #opts: MemoryJournalOptions
  readonly #maxTenantBytes: number
  readonly #now: () => number
  readonly #tenants = new Map<string, Ring>()
  readonly #global = new Deque<Item>()
  #live = 0
  #bytes = 0
  /** Bytes of the buffers the entries are in. */
  #held = 0
  #lastMs = 0
  #seq = 0

  constructor (opts: MemoryJournalOptions) {
    this.#opts = opts
    this.#maxTenantBytes = opts.maxBytesPerTenant ?? Number.POSITIVE_INFINITY
    this.#now = opts.now ?? Date.now
  }

  /** Live entries, their JSON size (UTF-8 bytes) and the bytes of the buffers that hold them, for tests and status. */
  get size (): { entries: number, bytes: number, tenants: number, held: number } {
    return { entries: this.#live, bytes: this.#bytes, tenants: this.#tenants.size, held: this.#held }
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
      slab: NO_SLAB,
      at: 0,
      size: 0,
      hashFrom: e.hashLater?.from ?? 0,
      hashTo: e.hashLater?.to ?? 0,
      hashAt: e.hashLater?.at ?? -1,
      live: true
    }
    let ring = this.#tenants.get(e.tenant)
    if (ring === undefined) {
      ring = { items: new Deque(), slabs: new Deque(), byCall: new Map(), bytes: 0 }
      this.#tenants.set(e.tenant, ring)
    }
    this.#held += place(ring, item, e.json)
    ring.items.push(item)
    ring.byCall.set(e.callId, item)
    this.#global.push(item)
    this.#live++
    this.#bytes += item.size
    ring.bytes += item.size

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
    this.#bytes -= item.size
    ring.bytes -= item.size
    const slab = item.slab
    slab.live--
    if (!slab.shared && slab.live === 0) this.#held -= slab.bytes.length
    // The tenant's oldest buffers whose entries all went (its newest stays for the next entry, unless the tenant goes).
    while (ring.slabs.length > (ring.items.length === 0 ? 0 : 1) && ring.slabs.at(0).live === 0) this.#held -= (ring.slabs.shift() as Slab).bytes.length
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
      if (matches(it.name, it.isError, query)) entries.push(textOf(it))
      const more = i > 0 && items.at(i - 1).ms >= lower
      if (entries.length >= query.limit || scanned >= SCAN_BUDGET) return { entries, next: more ? `${it.ms}-${it.seq}` : null }
    }
    return { entries, next: null }
  }

  async get (tenant: string, callId: string): Promise<string | undefined> {
    const item = this.#tenants.get(tenant)?.byCall.get(callId)
    if (item === undefined || item.ms < this.#now() - this.#opts.retentionMs) return undefined
    return textOf(item)
  }

  async close (): Promise<void> {
    this.#tenants.clear()
    this.#global.filter(() => false)
    this.#live = 0
    this.#bytes = 0
    this.#held = 0
  }
}

const NO_SLAB: Slab = { bytes: Buffer.alloc(0), used: 0, live: 0, shared: false }

/**
 * Writes `text` as UTF-8 at the free end of the tenant's newest buffer, or in a new one when it does not fit there;
 * the bytes of the buffer it made (0: none).
 */
function place (ring: Ring, item: Item, text: string): number {
  let slab = ring.slabs.length > 0 ? ring.slabs.at(ring.slabs.length - 1) : undefined
  let made = 0
  // A text of n UTF-16 units is at most 3n bytes of UTF-8: written unmeasured where that much is free.
  if (slab === undefined || slab.bytes.length - slab.used < text.length * 3) {
    const size = Buffer.byteLength(text)
    if (slab === undefined || slab.bytes.length - slab.used < size) {
      const shared = size <= SLAB_ENTRY_MAX
      // Memory of its own: Buffer.from and Buffer.allocUnsafe cut small buffers out of Node's shared 8 KiB pool, which any of them keeps alive.
      slab = { bytes: Buffer.allocUnsafeSlow(shared ? Math.max(size, Math.min(SLAB_MAX, Math.floor(ring.bytes / 4))) : size), used: 0, live: 0, shared }
      if (shared) ring.slabs.push(slab)
      made = slab.bytes.length
    }
  }
  item.slab = slab
  item.at = slab.used
  item.size = slab.bytes.write(text, slab.used)
  slab.used += item.size
  slab.live++
  return made
}

/** An entry's JSON as it was appended, its argumentsSha256 written if it was left for the reader. */
function textOf (item: Item): string {
  const json = item.slab.bytes.toString('utf8', item.at, item.at + item.size)
  return item.hashAt < 0 ? json : fillHash(json, { from: item.hashFrom, to: item.hashTo, at: item.hashAt })
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
