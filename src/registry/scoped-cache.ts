import type { RegistryScope } from './types.js'

/** The cache key of a registry scope: `g`, or `u:{userId}`. */
export function scopeKey (scope: RegistryScope): string {
  return scope.kind === 'global' ? 'g' : `u:${scope.userId}`
}

/** One scope's value, and whether it still is what the store holds. */
export interface ScopedSlot<T> {
  readonly scope: RegistryScope
  readonly value: T
  /** False once a change event (or a resync) made it stale: read again next time, kept as the fallback. */
  fresh: boolean
}

export interface ScopedCacheOptions {
  /** Scopes kept; beyond it the least recently used are dropped (unbounded without it). */
  maxScopes?: number
  /** Told of each scope the bound dropped. */
  onEvict?: (scope: RegistryScope) => void
}

/**
 * What a reader of the registry store keeps per scope, marked stale by the store's change events
 * (from every instance) rather than dropped: while the store is unreachable the last value read
 * keeps serving (stale-if-error). The owner subscribes to the events it cares about and decides
 * when a load may be stored as fresh (a change during the load must not be).
 */
export class ScopedCache<T> {
  readonly #slots = new Map<string, ScopedSlot<T>>()
  readonly #maxScopes: number
  readonly #onEvict: ((scope: RegistryScope) => void) | undefined

  constructor (opts: ScopedCacheOptions = {}) {
    this.#maxScopes = opts.maxScopes ?? Infinity
    this.#onEvict = opts.onEvict
  }

  /** The scope's slot, fresh or stale. A fresh one counts as used (the bound drops the scopes not used for longest). */
  get (scope: RegistryScope): ScopedSlot<T> | undefined {
    const key = scopeKey(scope)
    const slot = this.#slots.get(key)
    if (slot?.fresh === true && this.#maxScopes !== Infinity) {
      this.#slots.delete(key)
      this.#slots.set(key, slot)
    }
    return slot
  }

  /** The scope's slot, without counting as a use. */
  peek (scope: RegistryScope): ScopedSlot<T> | undefined {
    return this.#slots.get(scopeKey(scope))
  }

  /** Stores the scope's value as the most recently used, then drops the least recently used beyond the bound. */
  set (scope: RegistryScope, value: T, fresh = true): void {
    const key = scopeKey(scope)
    this.#slots.delete(key)
    this.#slots.set(key, { scope, value, fresh })
    while (this.#slots.size > this.#maxScopes) {
      const oldest = this.#slots.keys().next().value as string
      const dropped = this.#slots.get(oldest)
      this.#slots.delete(oldest)
      if (dropped !== undefined) this.#onEvict?.(dropped.scope)
    }
  }

  /** A change event for the scope: its value is read again next time. */
  markStale (scope: RegistryScope): void {
    const slot = this.#slots.get(scopeKey(scope))
    if (slot !== undefined) slot.fresh = false
  }

  /** A resync (changes may have been missed): every value is read again next time. */
  markAllStale (): void {
    for (const slot of this.#slots.values()) slot.fresh = false
  }

  clear (): void {
    this.#slots.clear()
  }
}
