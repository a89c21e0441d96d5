import type { JsonSchema } from './types.js'

/**
 * Decides whether a tool's input schema can be sent to OpenAI with `strict: true` without
 * changing what the tool accepts, and produces that schema.
 *
 * Strict mode (Structured Outputs) takes a subset of JSON Schema: every object closed with
 * `additionalProperties: false` and every property listed in `required`, a short list of
 * keywords, and size limits. OpenAI's own helper makes optional properties required and
 * nullable; that is not done here, because a tool that receives `null` for an argument it
 * expected to be absent may behave differently. So a schema qualifies only when every
 * property is already required, every object is closed or can be closed, and it uses
 * nothing outside the subset. Closing an object that declares no `additionalProperties`
 * only stops the model from inventing undeclared arguments.
 */

/** Keywords strict mode accepts on any subschema (others make the schema non-strict). */
const ALLOWED = new Set([
  'type', 'description', 'title', 'enum', 'const', 'anyOf', '$ref', '$defs', 'definitions',
  'properties', 'required', 'additionalProperties', 'items',
  'pattern', 'format',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf',
  'minItems', 'maxItems'
])
/** Root-only metadata that carries no validation; dropped when the schema is rewritten. */
const ROOT_METADATA = new Set(['$schema', '$id', '$comment'])
const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'object', 'array', 'null'])
const FORMATS = new Set(['date-time', 'time', 'date', 'duration', 'email', 'hostname', 'ipv4', 'ipv6', 'uuid'])
const NUMERIC = ['minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'multipleOf'] as const
const COUNTS = ['minItems', 'maxItems'] as const
/** OpenAI's documented limits for a strict schema. */
const MAX_OBJECT_DEPTH = 10
const MAX_PROPERTIES = 5000
const MAX_ENUM_VALUES = 1000

/**
 * `as-is`: the schema qualifies exactly as given (returned unchanged, same object).
 * `close`: objects without `additionalProperties` are closed and root metadata is dropped
 * (a new object is returned; the input is not modified).
 */
export type StrictMode = 'as-is' | 'close'

/** The schema to send with `strict: true`, or undefined when strict mode would change its meaning. */
export function strictParameters (schema: JsonSchema, mode: StrictMode): JsonSchema | undefined {
  if (!isRecord(schema) || schema.type !== 'object' || schema.anyOf !== undefined) return undefined
  const state: WalkState = { mode, root: schema, properties: 0, enumValues: 0 }
  const body: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(schema)) {
    if (ROOT_METADATA.has(key)) {
      if (mode === 'as-is') return undefined
      continue
    }
    body[key] = value
  }
  const out = walk(body, state, 0)
  if (out === undefined) return undefined
  return mode === 'as-is' ? schema : out
}

interface WalkState {
  mode: StrictMode
  root: JsonSchema
  properties: number
  enumValues: number
}

/** Checks one subschema; returns it (closed, in `close` mode) or undefined when it does not qualify. */
function walk (node: unknown, state: WalkState, depth: number): Record<string, unknown> | undefined {
  if (!isRecord(node)) return undefined
  for (const key of Object.keys(node)) if (!ALLOWED.has(key)) return undefined
  const out: Record<string, unknown> = { ...node }

  for (const key of ['description', 'title', 'pattern'] as const) {
    if (key in node && typeof node[key] !== 'string') return undefined
  }
  if ('format' in node && !(typeof node.format === 'string' && FORMATS.has(node.format))) return undefined
  for (const key of NUMERIC) if (key in node && typeof node[key] !== 'number') return undefined
  for (const key of COUNTS) if (key in node && !(Number.isInteger(node[key]) && (node[key] as number) >= 0)) return undefined

  const types = typeList(node.type)
  if (types === undefined) return undefined
  if (types.length === 0 && node.anyOf === undefined && node.$ref === undefined) return undefined

  if ('enum' in node) {
    if (!Array.isArray(node.enum) || node.enum.length === 0) return undefined
    state.enumValues += node.enum.length
    if (state.enumValues > MAX_ENUM_VALUES) return undefined
  }

  if ('$ref' in node) {
    if (typeof node.$ref !== 'string' || !isRecord(resolvePointer(state.root, node.$ref))) return undefined
    // A $ref's siblings must not constrain anything: strict mode would apply them differently.
    for (const key of Object.keys(node)) if (!['$ref', 'description', 'title'].includes(key)) return undefined
    return out
  }

  for (const key of ['$defs', 'definitions'] as const) {
    if (!(key in node)) continue
    if (!isRecord(node[key])) return undefined
    const defs: Record<string, unknown> = {}
    for (const [name, def] of Object.entries(node[key])) {
      const checked = walk(def, state, depth)
      if (checked === undefined) return undefined
      defs[name] = checked
    }
    out[key] = defs
  }

  if (types.includes('object') || 'properties' in node || 'required' in node || 'additionalProperties' in node) {
    if (depth >= MAX_OBJECT_DEPTH) return undefined
    const properties = node.properties ?? {}
    if (!isRecord(properties)) return undefined
    const names = Object.keys(properties)
    const required = node.required ?? []
    if (!Array.isArray(required) || required.length !== names.length || new Set(required).size !== required.length) return undefined
    if (!required.every((r) => typeof r === 'string' && Object.hasOwn(properties, r))) return undefined
    if (!('additionalProperties' in node)) {
      if (state.mode === 'as-is') return undefined
      out.additionalProperties = false
    } else if (node.additionalProperties !== false) {
      return undefined
    }
    state.properties += names.length
    if (state.properties > MAX_PROPERTIES) return undefined
    const props: Record<string, unknown> = {}
    for (const name of names) {
      const checked = walk(properties[name], state, depth + 1)
      if (checked === undefined) return undefined
      props[name] = checked
    }
    if ('properties' in node) out.properties = props
  }

  if (types.includes('array') && !('items' in node)) return undefined
  if ('items' in node) {
    const checked = walk(node.items, state, depth)
    if (checked === undefined) return undefined
    out.items = checked
  }

  if ('anyOf' in node) {
    if (!Array.isArray(node.anyOf) || node.anyOf.length === 0) return undefined
    const variants: Record<string, unknown>[] = []
    for (const variant of node.anyOf) {
      const checked = walk(variant, state, depth)
      if (checked === undefined) return undefined
      variants.push(checked)
    }
    // Strict mode refuses object variants that start with the same property name.
    const firstKeys = variants.map((v) => isRecord(v.properties) ? Object.keys(v.properties)[0] : undefined).filter((k) => k !== undefined)
    if (new Set(firstKeys).size !== firstKeys.length) return undefined
    out.anyOf = variants
  }
  return out
}

/** The declared types as a list ([] when absent), or undefined when `type` is malformed. */
function typeList (type: unknown): string[] | undefined {
  if (type === undefined) return []
  const list = Array.isArray(type) ? type : [type]
  if (list.length === 0 || new Set(list).size !== list.length) return undefined
  return list.every((t) => typeof t === 'string' && TYPES.has(t)) ? list as string[] : undefined
}

function isRecord (v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v)
}

/** Resolves a local `#/...` JSON pointer inside the root schema. */
function resolvePointer (root: JsonSchema, ref: string): unknown {
  if (ref === '#') return root
  if (!ref.startsWith('#/')) return undefined
  let current: unknown = root
  for (const raw of ref.slice(2).split('/')) {
    let part: string
    try {
      part = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~')
    } catch {
      return undefined
    }
    if (!isRecord(current) || !Object.hasOwn(current, part)) return undefined
    current = current[part]
  }
  return current
}
