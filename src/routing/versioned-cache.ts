/** Options of {@link VersionedCache}. */
export interface VersionedCacheOptions<T> {
  maxEntries: number
  /** Budget for the sum of sizeOf over the entries; unbounded without sizeOf. */
  maxBytes?: number
  sizeOf?: (value: T) => number
  /**
   * What one owner's entries (set's `owner`: a tenant) may hold together, as a fraction of maxEntries and maxBytes:
   * past it that owner's own oldest entries go first (its newest is kept, however large), so one owner's many listings
   * cannot push out everyone else's.
   */
  ownerShare?: number
}

/**
 * A bounded map whose entries are valid only for the exact version tokens they were stored
 * with. Least recently stored entries go first when the entry count or the byte budget is
 * exceeded; a single value larger than the whole budget is not kept.
 */
export class VersionedCache<T> {
  readonly #opts: VersionedCacheOptions<T>
  readonly #entries = new Map<string, { version: unknown[], value: T, bytes: number, owner: string | undefined }>()
  #bytes = 0
  /** Per owner: its entries and their bytes. */
  readonly #owners = new Map<string, { entries: number, bytes: number }>()

  constructor (opts: VersionedCacheOptions<T>) {
    this.#opts = opts
  }

  get (key: string, version: unknown[]): T | undefined {
    const hit = this.#entries.get(key)
    if (!hit) return undefined
    if (hit.version.length !== version.length || hit.version.some((v, i) => v !== version[i])) {
      this.#delete(key)
      return undefined
    }
    return hit.value
  }

  set (key: string, version: unknown[], value: T, owner?: string): void {
    this.#delete(key)
    const bytes = this.#opts.sizeOf?.(value) ?? 0
    const maxBytes = this.#opts.maxBytes ?? Infinity
    if (bytes > maxBytes) return
    this.#entries.set(key, { version, value, bytes, owner })
    this.#bytes += bytes
    if (owner !== undefined) {
      const held = this.#owners.get(owner) ?? { entries: 0, bytes: 0 }
      held.entries++
      held.bytes += bytes
      this.#owners.set(owner, held)
      const share = this.#opts.ownerShare ?? 1
      const [ownerBytes, ownerEntries] = [maxBytes * share, this.#opts.maxEntries * share]
      if (held.entries > ownerEntries || held.bytes > ownerBytes) this.#trimOwner(owner, key, held, ownerBytes, ownerEntries)
    }
    while (this.#entries.size > this.#opts.maxEntries || this.#bytes > maxBytes) {
      this.#delete(this.#entries.keys().next().value as string)
    }
  }

  /** Drops `owner`'s oldest entries until it holds at most its share, or only its newest (`kept`: one listing may be larger). */
  #trimOwner (owner: string, kept: string, held: { entries: number, bytes: number }, maxBytes: number, maxEntries: number): void {
    for (const [key, entry] of this.#entries) {
      if (held.entries <= maxEntries && held.bytes <= maxBytes) return
      if (entry.owner === owner && key !== kept) this.#delete(key)
    }
  }

  /** Entries and the sum of their sizes. */
  stats (): { entries: number, bytes: number } {
    return { entries: this.#entries.size, bytes: this.#bytes }
  }

  #delete (key: string): void {
    const hit = this.#entries.get(key)
    if (hit === undefined) return
    this.#entries.delete(key)
    this.#bytes -= hit.bytes
    if (hit.owner === undefined) return
    const held = this.#owners.get(hit.owner)
    if (held === undefined) return
    held.entries--
    held.bytes -= hit.bytes
    if (held.entries === 0) this.#owners.delete(hit.owner)
  }
}
