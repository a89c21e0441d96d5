import { META_TOOL_NAMES } from '../naming/builtin-names.js'
import type { ListedTool } from '../routing/router.js'
import type { CatalogEntry } from '../routing/source.js'
import { typescriptApi } from './typed-api.js'
import type { ApiTool } from './typed-api.js'

/** Code mode's tool (SPEC 19). Its name is reserved (META_TOOL_NAMES); `functions=@code` lists it. */
export const RUN_TOOLS_SCRIPT = META_TOOL_NAMES[1]

/** Longest script accepted (characters). */
const MAX_CODE_CHARS = 100_000
/** A script's deadline when it names none, and the most it may name (lowered further by the call's own deadline). */
export const DEFAULT_SCRIPT_TIMEOUT_MS = 60_000
const MAX_SCRIPT_TIMEOUT_MS = 600_000
/** Characters of each language's API in the description: a model reads it on every turn. */
const API_CHARS = 6000

const DESCRIPTION = 'Run a short JavaScript or Python program that calls your other tools as functions, and answer only what it prints ' +
  'and returns: use it to chain several tool calls (list, filter, read each, summarise) in one step. ' +
  'JavaScript: the code is the body of an async function; `await tools.<name>(args)` (one object of arguments; `tools["a-b"](args)` for other ' +
  'names) gives the tool\'s output, parsed when it is JSON; `return` the result. ' +
  'Python: `tools.<name>(**args)` (a name\'s other characters as `_`, or `tools.call("name", args)`); set `result`. ' +
  'A failed tool call raises an error (JS ToolError / Python ToolError with `.code`); console.log / print output is answered too. ' +
  'No network; files are the workspace\'s.'

export const RUN_TOOLS_SCRIPT_ENTRY: CatalogEntry = {
  route: 'builtin',
  source: 'gateway',
  name: RUN_TOOLS_SCRIPT,
  spec: {
    name: RUN_TOOLS_SCRIPT,
    title: 'Run a tools script',
    description: DESCRIPTION,
    inputSchema: {
      type: 'object',
      properties: {
        language: { type: 'string', enum: ['javascript', 'python'], description: 'The program\'s language' },
        code: { type: 'string', minLength: 1, maxLength: MAX_CODE_CHARS, description: 'The program (JavaScript: an async function\'s body; Python: a module)' },
        timeoutMs: { type: 'integer', minimum: 100, maximum: MAX_SCRIPT_TIMEOUT_MS, description: `Deadline in ms (default ${DEFAULT_SCRIPT_TIMEOUT_MS})` }
      },
      required: ['language', 'code'],
      additionalProperties: false
    },
    // It runs other tools, some of which may write: not read-only, and as open as the tools it calls.
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: false, openWorldHint: true }
  }
}

/** A listed tool as the typed API shows it: its listed name, description and input schema. */
export function apiTool (t: ListedTool): ApiTool {
  return { name: t.name, description: t.entry.spec.description ?? '', inputSchema: t.entry.spec.inputSchema }
}

/** The tools a script can call in a listing: every listed tool but the meta tools themselves. */
export function scriptableTools (tools: readonly ListedTool[]): ListedTool[] {
  return tools.filter((t) => !(META_TOOL_NAMES as readonly string[]).includes(t.entry.name) || t.entry.source !== 'gateway')
}

/**
 * `run_tools_script` as a listing shows it: its description carries the typed API of the tools
 * the same listing names (TypeScript declarations, names as listed; once, not once per language: a
 * model reads it every turn), so the model knows the functions its script can call.
 */
export function describeRunToolsScript (tools: readonly ListedTool[]): ListedTool {
  const api: ApiTool[] = scriptableTools(tools).map(apiTool)
  const description = api.length === 0
    ? `${DESCRIPTION}\n\nThis listing names no other tool: a script has nothing to call.`
    : `${DESCRIPTION}\n\nThe tools (Python takes the same arguments as keywords; \`print(tools)\` shows them as Python stubs):\n` +
      typescriptApi(api, { maxChars: API_CHARS })
  return { name: RUN_TOOLS_SCRIPT, entry: { ...RUN_TOOLS_SCRIPT_ENTRY, spec: { ...RUN_TOOLS_SCRIPT_ENTRY.spec, description } } }
}
