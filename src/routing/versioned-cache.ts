/** Options of {@link VersionedCache}. */
export interface VersionedCacheOptions<T> {
  maxEntries: number
  /** Budget for the sum of sizeOf over the entries; unbounded without sizeOf. */
  maxBytes?: number
  sizeOf?: (value: T) => number
}

/**
 * A bounded map whose entries are valid only for the exact version tokens they were stored
 * with. Least recently stored entries go first when the entry count or the byte budget is
 * exceeded; a single value larger than the whole budget is not kept.
 */
export class VersionedCache<T> {
  readonly #opts: VersionedCacheOptions<T>
  readonly #entries = new Map<string, { version: unknown[], value: T, bytes: number }>()
  #bytes = 0

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

  set (key: string, version: unknown[], value: T): void {
    this.#delete(key)
    const bytes = this.#opts.sizeOf?.(value) ?? 0
    const maxBytes = this.#opts.maxBytes ?? Infinity
    if (bytes > maxBytes) return
    this.#entries.set(key, { version, value, bytes })
    this.#bytes += bytes
    while (this.#entries.size > this.#opts.maxEntries || this.#bytes > maxBytes) {
      this.#delete(this.#entries.keys().next().value as string)
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
  }
}
