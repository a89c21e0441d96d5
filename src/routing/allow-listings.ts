import type { AllowList } from './allow-list.js'
import type { SourceScope } from './source.js'
import { VersionedCache } from './versioned-cache.js'

/**
 * The listings an invoke with an allow-list resolves its name in (ToolRouter.invoke), per tenant
 * and allow-list, valid for the catalog version they were built at: the basis of GET /tools' own
 * cache (listing/listings.ts), so a registry or upstream tool-list change is seen at the next call.
 * Building one resolves every listed name, and /mcp sends an allow-list with every call.
 */
export class AllowListings<L extends { unavailable: readonly unknown[] }> {
  readonly #cache = new VersionedCache<L>({ maxEntries: 1000 })

  /** The cached listing, or `build`'s; one with an unavailable server is not kept (the next call tries it again). */
  async get (allow: AllowList, scope: SourceScope, version: () => Promise<unknown[]>, build: () => Promise<L>): Promise<L> {
    const key = JSON.stringify([scope.userId ?? null, (allow.functions ?? []).join(','), (allow.mcp ?? []).join(',')])
    const current = await version()
    let listing = this.#cache.get(key, current)
    if (listing === undefined) {
      listing = await build()
      if (listing.unavailable.length === 0) this.#cache.set(key, current, listing)
    }
    return listing
  }
}
