import type { JsonSchema } from './types.js'

/**
 * Gemini's `FunctionDeclaration.parameters` is an OpenAPI 3.0 subset, not JSON Schema: types
 * are the upper-case `Type` enum, int64 fields (`minLength`, `maxItems`, ...) are decimal
 * strings, `enum` holds strings only, and an unknown keyword fails the whole request
 * ("Invalid JSON payload received. Unknown name ..."). The converter keeps only the fields
 * of Gemini's `Schema` and rewrites the rest where a faithful form exists.
 */

export type GeminiType = 'STRING' | 'NUMBER' | 'INTEGER' | 'BOOLEAN' | 'ARRAY' | 'OBJECT' | 'NULL'

/** The fields of Gemini's `Schema` this gateway emits. */
export interface GeminiSchema {
  type?: GeminiType
  format?: string
  title?: string
  description?: string
  nullable?: boolean
  enum?: string[]
  items?: GeminiSchema
  properties?: Record<string, GeminiSchema>
  required?: string[]
  anyOf?: GeminiSchema[]
  minItems?: string
  maxItems?: string
  minLength?: string
  maxLength?: string
  minProperties?: string
  maxProperties?: string
  minimum?: number
  maximum?: number
  pattern?: string
  default?: unknown
  example?: unknown
}

const TYPES: ReadonlyMap<string, GeminiType> = new Map([
  ['string', 'STRING'], ['number', 'NUMBER'], ['integer', 'INTEGER'], ['boolean', 'BOOLEAN'], ['array', 'ARRAY'], ['object', 'OBJECT']
])
/** Formats Gemini accepts, per type; any other is moved into the description. */
const FORMATS: Partial<Record<GeminiType, readonly string[]>> = {
  STRING: ['enum', 'date-time'],
  INTEGER: ['int32', 'int64'],
  NUMBER: ['float', 'double']
}
const INT64_FIELDS = ['minItems', 'maxItems', 'minLength', 'maxLength', 'minProperties', 'maxProperties'] as const
/** How deep `$ref`s are followed before a recursive definition is cut to an untyped object. */
const MAX_REF_DEPTH = 8

/**
 * Rewrites a JSON Schema into a Gemini `Schema`: `$ref`s inlined from `$defs`/`definitions`
 * (a recursive one cut at a depth, as an object described by its reference), `allOf`
 * merged, `oneOf` read as `anyOf`, `null` in `type`/`anyOf`/`enum` turned into `nullable`,
 * `const` into a one-value `enum`, a non-string `enum` listed in the description, exclusive
 * bounds made inclusive, unsupported formats moved into the description, and every keyword
 * Gemini does not know (`$schema`, `additionalProperties`, `not`, `if`, ...) removed.
 */
export function toGeminiSchema (schema: JsonSchema): GeminiSchema {
  const defs = { ...(asRecord(schema.definitions) ?? {}), ...(asRecord(schema.$defs) ?? {}) }
  return convert(schema, defs, 0)
}

function asRecord (v: unknown): Record<string, unknown> | undefined {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Record<string, unknown> : undefined
}

function isNullSchema (v: unknown): boolean {
  const r = asRecord(v)
  if (!r) return false
  return r.type === 'null' || ('const' in r && r.const === null) || (Array.isArray(r.enum) && r.enum.length > 0 && r.enum.every((e) => e === null))
}

function appendDescription (out: GeminiSchema, text: string): void {
  out.description = out.description ? `${out.description} (${text})` : text
}

function convert (input: unknown, defs: Record<string, unknown>, depth: number): GeminiSchema {
  let node = asRecord(input)
  if (!node) return {}

  if (typeof node.$ref === 'string') {
    const target = resolveRef(node.$ref, defs)
    const { $ref: ref, ...siblings } = node
    if (!target || depth >= MAX_REF_DEPTH) {
      const description = typeof siblings.description === 'string' ? siblings.description : `(recursive ${String(ref)})`
      return { type: 'OBJECT', description }
    }
    return convert({ ...target, ...siblings }, defs, depth + 1)
  }

  if (Array.isArray(node.allOf)) node = mergeAllOf(node, defs, depth)

  const out: GeminiSchema = {}
  if (typeof node.title === 'string') out.title = node.title
  if (typeof node.description === 'string') out.description = node.description
  if (typeof node.pattern === 'string') out.pattern = node.pattern
  if ('default' in node) out.default = node.default
  if ('example' in node) out.example = node.example
  else if (Array.isArray(node.examples) && node.examples.length > 0) out.example = node.examples[0]

  let nullable = false
  const rawTypes = node.type === undefined ? [] : Array.isArray(node.type) ? node.type : [node.type]
  if (rawTypes.includes('null')) nullable = true
  const types = [...new Set(rawTypes.map((t) => typeof t === 'string' ? TYPES.get(t) : undefined).filter((t): t is GeminiType => t !== undefined))]

  let values: unknown[] | undefined
  if ('const' in node) values = [node.const]
  else if (Array.isArray(node.enum)) values = node.enum
  if (values) {
    if (values.includes(null)) nullable = true
    const kept = values.filter((v) => v !== null)
    if (kept.length > 0 && kept.every((v) => typeof v === 'string')) {
      out.enum = kept as string[]
      if (types.length === 0) types.push('STRING')
    } else if (kept.length > 0) {
      appendDescription(out, `one of: ${kept.map((v) => JSON.stringify(v)).join(', ')}`)
      if (types.length === 0) {
        for (const v of kept) {
          const t = typeof v === 'number'
            ? (Number.isInteger(v) ? 'INTEGER' : 'NUMBER')
            : typeof v === 'boolean' ? 'BOOLEAN' : typeof v === 'string' ? 'STRING' : Array.isArray(v) ? 'ARRAY' : 'OBJECT'
          if (!types.includes(t)) types.push(t)
        }
        if (types.includes('INTEGER') && types.includes('NUMBER')) types.splice(types.indexOf('INTEGER'), 1)
      }
    }
  }

  const properties = asRecord(node.properties)
  if (properties) {
    out.properties = Object.fromEntries(Object.entries(properties).map(([k, v]) => [k, convert(v, defs, depth)]))
    if (Array.isArray(node.required)) {
      const required = node.required.filter((r): r is string => typeof r === 'string' && Object.hasOwn(properties, r))
      if (required.length > 0) out.required = [...new Set(required)]
    }
    if (types.length === 0) types.push('OBJECT')
  }

  const items = Array.isArray(node.prefixItems) ? node.prefixItems : node.items
  if (Array.isArray(items)) {
    // A tuple has no Gemini form: each position may be any of the listed schemas.
    const variants = items.map((i) => convert(i, defs, depth))
    if (variants.length === 1 && variants[0]) out.items = variants[0]
    else if (variants.length > 1) out.items = { anyOf: variants }
  } else if (asRecord(items)) {
    out.items = convert(items, defs, depth)
  }
  if (out.items && types.length === 0) types.push('ARRAY')

  for (const key of INT64_FIELDS) {
    const v = node[key]
    if (typeof v === 'number' && Number.isInteger(v) && v >= 0) out[key] = String(v)
  }
  if (typeof node.minimum === 'number') out.minimum = node.minimum
  if (typeof node.maximum === 'number') out.maximum = node.maximum
  // Gemini has no exclusive bounds; the inclusive one is the closest (the gateway still validates).
  if (typeof node.exclusiveMinimum === 'number' && (out.minimum === undefined || node.exclusiveMinimum >= out.minimum)) out.minimum = node.exclusiveMinimum
  if (typeof node.exclusiveMaximum === 'number' && (out.maximum === undefined || node.exclusiveMaximum <= out.maximum)) out.maximum = node.exclusiveMaximum

  const union = Array.isArray(node.anyOf) ? node.anyOf : Array.isArray(node.oneOf) ? node.oneOf : undefined
  let variants: GeminiSchema[] = []
  if (union) {
    if (union.some(isNullSchema)) nullable = true
    variants = union.filter((v) => !isNullSchema(v)).map((v) => convert(v, defs, depth))
  }

  if (variants.length === 1 && variants[0]) {
    // `anyOf [T, null]` and the like: T itself, with this node's own fields winning.
    const inner = variants[0]
    if (inner.nullable) nullable = true
    const own = { ...out }
    Object.assign(out, inner, own)
    if (types.length === 0 && inner.type) types.push(inner.type)
  } else if (variants.length > 1) {
    out.anyOf = variants
  }

  if (out.anyOf) {
    // Gemini refuses `type` beside `anyOf`: a single type goes into the variants that have none.
    const only = types.length === 1 ? types[0] : undefined
    if (only) out.anyOf = out.anyOf.map((v) => v.type ? v : { ...v, type: only })
    delete out.type
  } else if (types.length === 1) {
    out.type = types[0]
  } else if (types.length > 1) {
    out.anyOf = types.map((t) => ({ type: t }))
  }

  if (typeof node.format === 'string') {
    const supported = out.type === undefined ? undefined : FORMATS[out.type]
    if (supported?.includes(node.format)) out.format = node.format
    else appendDescription(out, `format: ${node.format}`)
  }
  if (nullable) out.nullable = true
  // `type` first: the order a person (or a model) reads the schema in.
  return out.type ? { type: out.type, ...out } : out
}

/** Folds `allOf` branches into the node: properties and required are unioned, other fields fill gaps. */
function mergeAllOf (node: Record<string, unknown>, defs: Record<string, unknown>, depth: number): Record<string, unknown> {
  const { allOf, ...rest } = node
  const merged: Record<string, unknown> = { ...rest }
  for (const raw of allOf as unknown[]) {
    let branch = asRecord(raw)
    if (!branch) continue
    if (typeof branch.$ref === 'string' && depth < MAX_REF_DEPTH) branch = asRecord(resolveRef(branch.$ref, defs)) ?? branch
    if (Array.isArray(branch.allOf)) branch = mergeAllOf(branch, defs, depth + 1)
    for (const [key, value] of Object.entries(branch)) {
      if (key === 'properties' && asRecord(value)) merged.properties = { ...(asRecord(merged.properties) ?? {}), ...asRecord(value) }
      else if (key === 'required' && Array.isArray(value)) merged.required = [...(Array.isArray(merged.required) ? merged.required : []), ...value]
      else if (!(key in merged)) merged[key] = value
    }
  }
  return merged
}

function resolveRef (ref: string, defs: Record<string, unknown>): Record<string, unknown> | undefined {
  const match = /^#\/(?:\$defs|definitions)\/(.+)$/.exec(ref)
  if (!match?.[1]) return undefined
  return asRecord(defs[decodeURIComponent(match[1]).replace(/~1/g, '/').replace(/~0/g, '~')])
}
