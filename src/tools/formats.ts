import type { ListedTool } from './router.js'
import type { JsonSchema } from './types.js'

export const FORMATS = ['openai', 'responses', 'anthropic', 'gemini', 'mcp'] as const
export type ToolFormat = typeof FORMATS[number]

/**
 * Renders listed tools in the shape a provider wants (docs/ARCHITECTURE.md#allow-list). Schemas pass through whole,
 * except for Gemini, which rejects parts of JSON Schema.
 */
export function renderTools (tools: readonly ListedTool[], format: ToolFormat): unknown[] {
  return tools.map(({ name, entry }) => {
    const description = entry.spec.description
    const schema = objectSchema(entry.spec.inputSchema)
    switch (format) {
      case 'openai':
        return { type: 'function', function: { name, description, parameters: schema } }
      case 'responses':
        return { type: 'function', name, description, parameters: schema }
      case 'anthropic':
        return { name, description, input_schema: schema }
      case 'gemini':
        return { name, description, parameters: toGeminiSchema(schema) }
      case 'mcp':
        return {
          name,
          ...(entry.spec.title ? { title: entry.spec.title } : {}),
          description,
          inputSchema: schema,
          ...(entry.spec.annotations ? { annotations: entry.spec.annotations } : {})
        }
      default:
        throw new Error(`unknown format ${String(format)}`)
    }
  })
}

/** Every provider wants an object schema at the top; a tool without one gets an empty object. */
function objectSchema (schema: JsonSchema | undefined): JsonSchema {
  if (!schema || typeof schema !== 'object') return { type: 'object', properties: {} }
  if (schema.type === undefined && schema.properties !== undefined) return { ...schema, type: 'object' }
  return schema
}

const GEMINI_DROPPED = new Set(['$schema', '$id', '$comment', 'additionalProperties', '$defs', 'definitions', '$anchor'])
const MAX_REF_DEPTH = 8

/**
 * Rewrites a JSON Schema into what Gemini's function declarations accept: `$ref`s inlined
 * from `$defs`/`definitions` (recursive ones cut at a depth, as an untyped object), `anyOf`
 * / `type` arrays with `null` turned into `nullable`, `const` into a one-value `enum`, and
 * `$schema`/`additionalProperties` removed.
 */
export function toGeminiSchema (schema: JsonSchema): JsonSchema {
  const defs = { ...(asObject(schema.definitions) ?? {}), ...(asObject(schema.$defs) ?? {}) }
  return convert(schema, defs, 0) as JsonSchema
}

function asObject (v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : undefined
}

function convert (node: unknown, defs: Record<string, unknown>, depth: number): unknown {
  if (Array.isArray(node)) return node.map((n) => convert(n, defs, depth))
  const obj = asObject(node)
  if (!obj) return node

  if (typeof obj.$ref === 'string') {
    const target = resolveRef(obj.$ref, defs)
    if (!target || depth >= MAX_REF_DEPTH) return { type: 'object', description: obj.description ?? `(recursive ${obj.$ref})` }
    const { $ref: _ref, ...siblings } = obj
    return convert({ ...target, ...siblings }, defs, depth + 1)
  }

  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(obj)) {
    if (GEMINI_DROPPED.has(key)) continue
    if (key === 'properties') {
      const props = asObject(value) ?? {}
      out.properties = Object.fromEntries(Object.entries(props).map(([k, v]) => [k, convert(v, defs, depth)]))
      continue
    }
    out[key] = convert(value, defs, depth)
  }

  if ('const' in out) {
    out.enum = [out.const]
    delete out.const
  }
  if (Array.isArray(out.type)) {
    const types = out.type.filter((t) => t !== 'null')
    if (types.length < out.type.length) out.nullable = true
    out.type = types.length === 1 ? types[0] : types
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const variants = out[key]
    if (!Array.isArray(variants)) continue
    const nonNull = variants.filter((v) => asObject(v)?.type !== 'null')
    if (nonNull.length < variants.length) {
      if (nonNull.length === 1) {
        delete out[key]
        Object.assign(out, asObject(nonNull[0]), { nullable: true })
      } else {
        out[key] = nonNull
        out.nullable = true
      }
    }
  }
  return out
}

function resolveRef (ref: string, defs: Record<string, unknown>): Record<string, unknown> | undefined {
  const match = /^#\/(?:\$defs|definitions)\/(.+)$/.exec(ref)
  if (!match?.[1]) return undefined
  return asObject(defs[decodeURIComponent(match[1]).replace(/~1/g, '/').replace(/~0/g, '~')])
}
