import type { ListedTool } from '../routing/router.js'

/** OpenAI's hosted tool search (`ToolSearchTool` of the `openai` package's Responses types): it searches the deferred tools itself. */
const OPENAI_TOOL_SEARCH = { type: 'tool_search' } as const
/** Anthropic's BM25 tool search tool (`ToolSearchToolBm25_20251119` of `@anthropic-ai/sdk`). */
const ANTHROPIC_TOOL_SEARCH = { type: 'tool_search_tool_bm25_20251119', name: 'tool_search_tool_bm25' } as const

/**
 * Provider-native deferral (`defer=true`, SPEC 17): the provider's own search tool first, then
 * every tool marked `defer_loading: true` (the provider loads a deferred tool's definition only
 * when its search finds it), except the pinned ones, which the model sees from the start.
 * `rendered[i]` is `listed[i]` in `format`.
 */
export function deferTools (
  rendered: readonly unknown[],
  listed: readonly ListedTool[],
  pinned: ReadonlySet<string>,
  format: 'responses' | 'anthropic'
): unknown[] {
  const tools = rendered.map((tool, i) => pinned.has((listed[i] as ListedTool).name) ? tool : { ...tool as object, defer_loading: true })
  return [format === 'responses' ? OPENAI_TOOL_SEARCH : ANTHROPIC_TOOL_SEARCH, ...tools]
}
