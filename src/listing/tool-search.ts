import type { MetaCall, MetaTools } from '../routing/meta.js'
import type { CatalogEntry } from '../routing/source.js'
import type { ToolOutcome } from '../routing/types.js'
import type { Listings, SearchMatch } from './listings.js'
import { DEFAULT_LIMIT, TOOL_SEARCH, TOOL_SEARCH_ENTRY } from './search-mode.js'

export { TOOL_SEARCH } from './search-mode.js'

/** A found tool's schema is cut past this (its name and description still say what it is). */
const MAX_SCHEMA_CHARS = 6000

/**
 * `tool_search` answered over the call's own allow-list and tenant (routing/meta.ts): the same
 * listing, policy and index as GET /tools/search, so it never finds a tool the call could not make.
 */
export class ToolSearchTool implements MetaTools {
  readonly #listings: () => Listings

  /** `listings` is read at call time: the router that asks this tool is built before the listings. */
  constructor (listings: () => Listings) {
    this.#listings = listings
  }

  resolve (name: string): CatalogEntry | undefined {
    return name === TOOL_SEARCH ? TOOL_SEARCH_ENTRY : undefined
  }

  async call (_entry: CatalogEntry, args: Record<string, unknown>, req: MetaCall): Promise<ToolOutcome> {
    if (req.allow === undefined) {
      const message = 'tool_search searches the request\'s allow-list: call it with `allow` (the functions and mcp of the listing)'
      return { ok: false, reason: 'tool-error', message }
    }
    const query = String(args.query)
    const limit = typeof args.limit === 'number' ? args.limit : DEFAULT_LIMIT
    const { matches, listing } = await this.#listings().search(query, limit, req.allow, { userId: req.userId, policy: req.policy, signal: req.signal })
    const trace = { query, matches: matches.map((m) => ({ name: m.tool.name, score: roundScore(m.score) })) }
    return { ok: true, value: matchesText(query, matches, listing.tools.length), trace }
  }
}

/** The model's text of a search: one block per tool, name first, then its description and schema. */
function matchesText (query: string, matches: readonly SearchMatch[], total: number): string {
  if (matches.length === 0) return `No tool of the ${total} available matches "${query}". Search again with other words.`
  const blocks = matches.map(({ tool }) => {
    const schema = JSON.stringify(tool.entry.spec.inputSchema ?? { type: 'object', properties: {} })
    const parameters = schema.length > MAX_SCHEMA_CHARS ? `${schema.slice(0, MAX_SCHEMA_CHARS)}... (cut at ${MAX_SCHEMA_CHARS} characters)` : schema
    const title = tool.entry.spec.title !== undefined && tool.entry.spec.title !== '' ? ` (${tool.entry.spec.title})` : ''
    return `## ${tool.name}${title}\n${tool.entry.spec.description}\nParameters: ${parameters}`
  })
  return `${matches.length} of ${total} tools match "${query}", best first. Call one by its name.\n\n${blocks.join('\n\n')}`
}

/** The names a `tool_search` result's trace lists (ToolSearchTool.call), best first. */
export function foundByToolSearch (trace: unknown): string[] {
  const matches = (trace as { matches?: unknown } | null)?.matches
  if (!Array.isArray(matches)) return []
  return matches.map((m: { name?: unknown }) => m?.name).filter((n): n is string => typeof n === 'string')
}

/** Scores as the API shows them: 4 significant digits. */
export function roundScore (score: number): number {
  return Number(score.toPrecision(4))
}
