import { ScopedCache } from './scoped-cache.js'
import type { ScopedSlot } from './scoped-cache.js'
import type { DocumentKind, RegistryScope, RegistryStore, StoredDocument } from './types.js'

export interface DocumentCacheOptions<T> {
  /** The scope's value from its stored document (undefined: none stored). */
  parse: (doc: StoredDocument | undefined) => T
  /** Whether a value just read is the one cached (the same version): the cached object is then kept. */
  same: (cached: T, read: T) => boolean
  /** Told when the store failed and the last value read answers instead (stale-if-error). */
  onStaleRead: (err: unknown, scope: RegistryScope) => void
  /** Scopes kept; beyond it the least recently used are dropped and read again. */
  maxScopes: number
  onEvict?: (scope: RegistryScope) => void
}

/**
 * One document kind of the registry store (a tenant's policy, its definition pins) read per scope
 * and cached against the store's change events from every instance: a change marks its scope
 * stale, a resync every scope; a read that started before a change is not cached as fresh; while
 * the store is unreachable, the last value read keeps answering. A value read at the version
 * already cached keeps the cached object, so what callers built on it stays valid.
 */
export class DocumentCache<T> {
  readonly #store: RegistryStore
  readonly #kind: DocumentKind
  readonly #opts: DocumentCacheOptions<T>
  readonly #slots: ScopedCache<T>
  /** Grows with every change event: a read that started before a change is not cached as fresh. */
  #epoch = 0
  readonly #unsubscribe: () => void

  constructor (store: RegistryStore, kind: DocumentKind, opts: DocumentCacheOptions<T>) {
    this.#store = store
    this.#kind = kind
    this.#opts = opts
    this.#slots = new ScopedCache<T>({ maxScopes: opts.maxScopes, ...(opts.onEvict !== undefined ? { onEvict: opts.onEvict } : {}) })
    this.#unsubscribe = store.subscribeDocuments((change) => {
      this.#epoch++
      if (change.op === 'resync') this.#slots.markAllStale()
      else if (change.kind === kind) this.#slots.markStale(change.scope)
    })
  }

  /** The scope's slot, fresh or stale; a fresh one counts as used for the bound. */
  get (scope: RegistryScope): ScopedSlot<T> | undefined {
    return this.#slots.get(scope)
  }

  /** The scope's slot, without counting as a use. */
  peek (scope: RegistryScope): ScopedSlot<T> | undefined {
    return this.#slots.peek(scope)
  }

  /** The scope's value: the cached one while fresh, else read from the store (the stale one when the store fails). */
  async load (scope: RegistryScope): Promise<T> {
    const slot = this.#slots.get(scope)
    if (slot?.fresh === true) return slot.value
    const epoch = this.#epoch
    let read: T
    try {
      read = this.#opts.parse(await this.#store.getDocument(this.#kind, scope))
    } catch (err) {
      if (slot !== undefined) {
        this.#opts.onStaleRead(err, scope)
        return slot.value
      }
      throw err
    }
    const value = slot !== undefined && this.#opts.same(slot.value, read) ? slot.value : read
    this.#slots.set(scope, value, epoch === this.#epoch)
    return value
  }

  close (): void {
    this.#unsubscribe()
  }
}
