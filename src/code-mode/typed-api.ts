/**
 * Code mode's typed API (SPEC 19): the tools a request allow-lists, as the functions a `run_tools_script`
 * script calls, in TypeScript declarations or Python stubs generated from their input schemas. It is part of
 * a tool description a model reads on every turn, so it is short (a one-line doc and a signature per tool,
 * within `maxChars`) and exact (names as the listing shows them, nothing a schema does not say). Pure and
 * deterministic; it renders any input (listings come from tool servers) with bounded work.
 */
import type { ApiTool } from './api-tool.js'
import { assembleApi } from './listing-budget.js'
import { pythonApiShape } from './python-api.js'
import { typescriptApiShape } from './typescript-api.js'

export type { ApiTool } from './api-tool.js'

/** Options of both renderers: `maxChars` (default 6000) bounds the whole text, the footer line included. */
interface ApiOptions { maxChars?: number }

/** TypeScript declarations: `declare const tools: { ... }` with one member per tool. */
export function typescriptApi (tools: readonly ApiTool[], opts?: ApiOptions): string {
  const list = Array.isArray(tools) ? tools : []
  return assembleApi(list.length, opts?.maxChars, typescriptApiShape(list))
}

/** Python stubs: `class tools:` with one `def` per tool (keyword-only args). */
export function pythonApi (tools: readonly ApiTool[], opts?: ApiOptions): string {
  const list = Array.isArray(tools) ? tools : []
  return assembleApi(list.length, opts?.maxChars, pythonApiShape(list))
}
