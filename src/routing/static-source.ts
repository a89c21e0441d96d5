import type { CatalogEntry, Selection, SourceListing, SourceScope, ToolSource } from './source.js'
import { StaticCatalog } from './static-catalog.js'
import type { CallContext, Tier, ToolOutcome } from './types.js'

/**
 * A source whose tools are fixed at start-up (built-ins, functions, local MCP services): it lists
 * and resolves from a StaticCatalog of the entries it was built with, and the tier writes only
 * `call`. `resolve` answers at once (no promise), so the router resolves a call without waiting.
 */
export abstract class StaticSource implements ToolSource {
  abstract readonly tier: Tier
  readonly #catalog = new StaticCatalog()

  constructor (entries: Iterable<CatalogEntry>) {
    for (const entry of entries) this.#catalog.add(entry)
  }

  /** How many tools the source offers. */
  get size (): number {
    return this.#catalog.size
  }

  /** The exposed names of its tools, in the order they were given. */
  get names (): string[] {
    return this.#catalog.names
  }

  async list (selection: Selection | 'all'): Promise<SourceListing> {
    return this.#catalog.list(selection)
  }

  resolve (name: string, _scope: SourceScope): CatalogEntry | undefined {
    return this.#catalog.get(name)
  }

  abstract call (entry: CatalogEntry, args: Record<string, unknown>, ctx: CallContext): Promise<ToolOutcome>
}
