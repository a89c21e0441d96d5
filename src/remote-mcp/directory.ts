import type { Logger } from '../logger.js'
import { ScopedCache, scopeKey } from '../registry/scoped-cache.js'
import { secretContext } from '../registry/secrets.js'
import type { SecretBox } from '../registry/secrets.js'
import type { RegistryChange, RegistryScope, RegistryStore } from '../registry/types.js'
import type { RemoteServer, ServerDirectory } from './source.js'

export interface DirectoryOptions {
  /** Called when a server's registry entry changed or was removed (any instance): drop its client. */
  onServerChanged: (scope: RegistryScope, serverId: string) => void
  /** Called when this instance may have missed changes: drop every client. */
  onResync: () => void
  logger: Logger
}

/**
 * The registry as the remote sources read it: decrypted configs, cached per scope and
 * invalidated by the store's change events (from every instance, over pub/sub). When the
 * store is unreachable, the last known servers of a scope keep serving (stale-if-error), so
 * a Redis outage does not take down tools that were already known.
 */
export class RegistryDirectory implements ServerDirectory {
  readonly #store: RegistryStore
  readonly #box: SecretBox
  readonly #opts: DirectoryOptions
  readonly #cache = new ScopedCache<RemoteServer[]>()
  readonly #inflight = new Map<string, Promise<RemoteServer[]>>()
  readonly #unsubscribe: () => void

  constructor (store: RegistryStore, box: SecretBox, opts: DirectoryOptions) {
    this.#store = store
    this.#box = box
    this.#opts = opts
    this.#unsubscribe = store.subscribe((change) => this.#onChange(change))
  }

  #onChange (change: RegistryChange): void {
    if (change.op === 'resync') {
      this.#cache.markAllStale()
      this.#inflight.clear()
      this.#opts.onResync()
      return
    }
    this.#cache.markStale(change.scope)
    this.#inflight.delete(scopeKey(change.scope))
    this.#opts.onServerChanged(change.scope, change.serverId)
  }

  async list (scope: RegistryScope): Promise<RemoteServer[]> {
    const key = scopeKey(scope)
    const cached = this.#cache.get(scope)
    if (cached?.fresh === true) return cached.value
    let pending = this.#inflight.get(key)
    if (!pending) {
      pending = this.#load(scope)
      this.#inflight.set(key, pending)
      // Only the load that is still current may fill the cache; a change during the load
      // removed it from #inflight, so its (possibly stale) result is not kept.
      pending.then((servers) => {
        if (this.#inflight.get(key) === pending) {
          this.#cache.set(scope, servers)
          this.#inflight.delete(key)
        }
      }, () => {
        if (this.#inflight.get(key) === pending) this.#inflight.delete(key)
      })
    }
    try {
      return await pending
    } catch (err) {
      if (cached) {
        this.#opts.logger.warn({ err, scope: key }, 'registry unreachable: serving the last known servers')
        return cached.value
      }
      throw err
    }
  }

  async #load (scope: RegistryScope): Promise<RemoteServer[]> {
    const stored = await this.#store.list(scope)
    return stored.map((s) => {
      const opened = this.#box.openConfig(s.config, secretContext(scope, s.serverId))
      if (!opened.ok) {
        this.#opts.logger.error({ scope: scopeKey(scope), serverId: s.serverId, reason: opened.reason }, 'cannot decrypt a server config')
        return { serverId: s.serverId, config: s.config, scope, error: `Its stored secrets cannot be decrypted (${opened.reason}); re-register it` }
      }
      return { serverId: s.serverId, config: opened.config, scope }
    })
  }

  close (): void {
    this.#unsubscribe()
    this.#cache.clear()
    this.#inflight.clear()
  }
}
