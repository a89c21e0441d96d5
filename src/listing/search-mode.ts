import { META_TOOL_NAMES } from '../naming/builtin-names.js'
import type { ListedTool } from '../routing/router.js'
import type { CatalogEntry } from '../routing/source.js'
import { MAX_QUERY_CHARS } from '../search/index.js'

/** The meta tool of search mode (SPEC 17). Its name is reserved (META_TOOL_NAMES). */
export const TOOL_SEARCH = META_TOOL_NAMES[0]

export const DEFAULT_LIMIT = 5
const MAX_LIMIT = 20
/** Sources named in the tool's description, at most. */
const MAX_SOURCES_NAMED = 12

const DESCRIPTION = 'Search the tools you can use by what you want to do; answers the best matches with their names, descriptions ' +
  'and parameters (JSON Schema). Then call a found tool by its exact name. Search again with other words when nothing fits.'

export const TOOL_SEARCH_ENTRY: CatalogEntry = {
  route: 'builtin',
  source: 'gateway',
  name: TOOL_SEARCH,
  spec: {
    name: TOOL_SEARCH,
    title: 'Tool search',
    description: DESCRIPTION,
    inputSchema: {
      type: 'object',
      properties: {
        query: {
          type: 'string',
          minLength: 1,
          maxLength: MAX_QUERY_CHARS,
          description: 'What you want to do, in a few words (e.g. "create an issue", "read a file")'
        },
        limit: { type: 'integer', minimum: 1, maximum: MAX_LIMIT, default: DEFAULT_LIMIT, description: 'How many tools to answer' }
      },
      required: ['query'],
      additionalProperties: false
    },
    annotations: { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false }
  }
}

/**
 * `tool_search` as a listing shows it: its description names how many tools it searches and
 * where they come from, so a model knows what it can find.
 */
export function describeToolSearch (tools: readonly ListedTool[]): ListedTool {
  const sources = [...new Set(tools.map((t) => t.entry.source))]
  const named = sources.slice(0, MAX_SOURCES_NAMED).join(', ') + (sources.length > MAX_SOURCES_NAMED ? `, and ${sources.length - MAX_SOURCES_NAMED} more` : '')
  const description = `${DESCRIPTION} Searches ${tools.length} tool${tools.length === 1 ? '' : 's'}${sources.length > 0 ? ` from ${named}` : ''}.`
  return { name: TOOL_SEARCH, entry: { ...TOOL_SEARCH_ENTRY, spec: { ...TOOL_SEARCH_ENTRY.spec, description } } }
}

/**
 * The listed tools `names` name (a wire name, natural name or qualified name, as /invoke resolves
 * it, or the tool's own name when it is unique in the listing), and the names that name none.
 */
export function findListed (tools: readonly ListedTool[], names: readonly string[]): { found: ListedTool[], missing: string[] } {
  const found: ListedTool[] = []
  const missing: string[] = []
  for (const name of names) {
    const own = tools.filter((t) => t.entry.spec.name === name)
    // A tool's own name (`search_issues` for `user_acme_tool_search_issues`) when one listed tool alone has it.
    const hit = tools.find((t) => t.name === name) ?? tools.find((t) => t.entry.name === name || t.entry.qualifiedName === name) ??
      (own.length === 1 ? own[0] : undefined)
    if (hit === undefined) missing.push(name)
    else if (!found.includes(hit)) found.push(hit)
  }
  return { found, missing }
}
