import type { CatalogEntry, Selection, SourceListing } from './source.js'

/**
 * The entries of a source whose tools are fixed at start-up (built-ins, functions, local MCP
 * services), by exposed name: listing an allow-list and resolving a name are map lookups.
 */
export class StaticCatalog {
  readonly #entries = new Map<string, CatalogEntry>()

  add (entry: CatalogEntry): void {
    this.#entries.set(entry.name, entry)
  }

  get size (): number {
    return this.#entries.size
  }

  get names (): string[] {
    return [...this.#entries.keys()]
  }

  get (name: string): CatalogEntry | undefined {
    return this.#entries.get(name)
  }

  /** The selected names this catalog has, in the selection's order ('all': every entry). */
  list (selection: Selection | 'all'): SourceListing {
    const names = selection === 'all' ? this.names : (selection.names ?? [])
    const tools = names.flatMap((n) => this.#entries.get(n) ?? [])
    return { tools, matched: tools.map((t) => t.name), unavailable: [] }
  }
}
