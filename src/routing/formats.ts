import { toGeminiSchema } from './gemini-schema.js'
import type { GeminiSchema } from './gemini-schema.js'
import { strictParameters } from './openai-strict.js'
import type { ListedTool } from './router.js'
import type { JsonSchema } from './types.js'

export { toGeminiSchema } from './gemini-schema.js'
export type { GeminiSchema, GeminiType } from './gemini-schema.js'

export const FORMATS = ['openai', 'responses', 'anthropic', 'gemini', 'mcp'] as const
export type ToolFormat = typeof FORMATS[number]

/** A tool's input schema after {@link objectSchema}: always an object at the top. */
export type ObjectSchema = JsonSchema & { type: 'object' }

/** `format=openai`: a Chat Completions function tool (`ChatCompletionFunctionTool` in the `openai` package). */
export interface OpenAIChatTool {
  type: 'function'
  function: { name: string, description: string, parameters: ObjectSchema, strict: boolean }
}

/** `format=responses`: a Responses API function tool (`FunctionTool` in the `openai` package). */
export interface ResponsesTool {
  type: 'function'
  name: string
  description: string
  parameters: ObjectSchema
  strict: boolean
}

/** `format=anthropic`: a Messages API tool (`Tool` in `@anthropic-ai/sdk`). */
export interface AnthropicTool {
  name: string
  description: string
  input_schema: ObjectSchema
}

/**
 * `format=gemini`: a `FunctionDeclaration` of `@google/genai`, to be wrapped by the caller as
 * `tools: [{ functionDeclarations: [...] }]`. `parameters` is absent for a tool that takes none.
 */
export interface GeminiFunctionDeclaration {
  name: string
  description: string
  parameters?: GeminiSchema & { type: 'OBJECT' }
}

/** `format=mcp`: an MCP `Tool` as `tools/list` returns it. */
export interface McpTool {
  name: string
  title?: string
  description: string
  inputSchema: ObjectSchema
  /** Always an object schema: MCP clients (and the SDK's ToolSchema) refuse any other. */
  outputSchema?: ObjectSchema
  annotations?: Record<string, unknown>
}

export interface RenderedTools {
  openai: OpenAIChatTool
  responses: ResponsesTool
  anthropic: AnthropicTool
  gemini: GeminiFunctionDeclaration
  mcp: McpTool
}

/**
 * Renders listed tools in the shape a provider wants (docs/ARCHITECTURE.md#allow-list).
 * Schemas pass through whole, with two exceptions: Gemini takes an OpenAPI subset, so its
 * schema is rewritten; and the Responses API treats a tool as strict unless told otherwise,
 * so each tool says `strict` explicitly, with its schema closed (`additionalProperties:
 * false`) when that is all strict mode needs. Chat Completions tools also say `strict`, true
 * only when the schema already qualifies exactly as given.
 */
export function renderTools<F extends ToolFormat> (tools: readonly ListedTool[], format: F): Array<RenderedTools[F]> {
  return tools.map((tool) => renderTool(tool, format))
}

function renderTool<F extends ToolFormat> (tool: ListedTool, format: F): RenderedTools[F] {
  const rendered: RenderedTools[ToolFormat] = render(tool, format)
  return rendered as RenderedTools[F]
}

function render ({ name, entry }: ListedTool, format: ToolFormat): RenderedTools[ToolFormat] {
  const description = entry.spec.description ?? ''
  const schema = objectSchema(entry.spec.inputSchema)
  switch (format) {
    case 'openai':
      return { type: 'function', function: { name, description, parameters: schema, strict: strictParameters(schema, 'as-is') !== undefined } }
    case 'responses': {
      const strict = strictParameters(schema, 'close') as ObjectSchema | undefined
      return { type: 'function', name, description, parameters: strict ?? schema, strict: strict !== undefined }
    }
    case 'anthropic':
      return { name, description, input_schema: schema }
    case 'gemini': {
      const parameters = toGeminiSchema(schema)
      // Gemini refuses an OBJECT without properties; a tool without parameters leaves the field out.
      if (!parameters.properties || Object.keys(parameters.properties).length === 0) return { name, description }
      return { name, description, parameters: { ...parameters, type: 'OBJECT' } }
    }
    case 'mcp':
      return {
        name,
        ...(entry.spec.title ? { title: entry.spec.title } : {}),
        description,
        inputSchema: schema,
        // MCP clients check structuredContent against it; /mcp passes both through.
        ...(entry.spec.outputSchema ? { outputSchema: entry.spec.outputSchema as ObjectSchema } : {}),
        ...(entry.spec.annotations ? { annotations: entry.spec.annotations } : {}),
        // As the server listed it (SPEC 15: carried whole). A legacy client may use 2025-11-25 task
        // augmentation only when the server declares `capabilities.tasks`, which /mcp does not; the
        // 2026-07-28 codec drops `taskSupport` (SEP-2663 tasks are server-directed). A "required" tool
        // is not offered at all (router.ts).
        ...(entry.spec.execution ? { execution: entry.spec.execution } : {})
      }
    default:
      throw new Error(`unknown format ${String(format)}`)
  }
}

/**
 * Every provider wants an object schema at the top (tool arguments are always an object). A
 * tool without one gets an empty object; one that omits `type`, or allows `null` beside
 * `object`, is given `type: "object"`. Anything else passes through untouched.
 */
function objectSchema (schema: JsonSchema | undefined): ObjectSchema {
  if (!schema || typeof schema !== 'object' || Array.isArray(schema)) return { type: 'object', properties: {} }
  if (schema.type === 'object') return schema as ObjectSchema
  if (schema.type === undefined || (Array.isArray(schema.type) && schema.type.includes('object'))) return { ...schema, type: 'object' }
  // Unreachable from the tiers (function loading and the MCP client both refuse a non-object
  // input schema); passed on as is rather than hiding the tool's mistake.
  return schema as ObjectSchema
}
