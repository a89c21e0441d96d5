/**
 * A tool's JSON Schema read into the small type tree code mode's typed API renders (SPEC 19), with every
 * size capped: schemas come from tool servers, so their depth, width and text are unbounded. One reading
 * visits at most {@link MAX_NODES} schema nodes, looks at most {@link MAX_KEYS} property keys per object,
 * and prints no enum of more than {@link MAX_ENUM} values nor a literal of more than {@link MAX_LITERAL}
 * characters; what is past a cap reads as `any` (or the enum's base type). `$ref`, `allOf`, `not` and
 * anything malformed read as `any` too: a typed API that is less precise is still right, a wrong one is not.
 */

/** A JSON value an `enum` or `const` allows, short enough to print. */
export type Literal = string | number | boolean | null

/** What one argument (or a part of one) may be. `object` with `props: null` is an object not shown inline. */
export type SchemaType =
  | { kind: 'any' }
  | { kind: 'string' | 'number' | 'integer' | 'boolean' | 'null' }
  | { kind: 'literal', value: Literal }
  | { kind: 'array', items: SchemaType }
  | { kind: 'object', props: Prop[] | null, open: boolean }
  | { kind: 'union', members: SchemaType[] }

/** One property of an object, in the schema's order. */
export interface Prop { name: string, required: boolean, type: SchemaType }

/** A tool's arguments: the properties shown, and `open` when more keys are accepted than are shown. */
export interface Args { props: Prop[], open: boolean }

/**
 * How much of a schema a reading shows, most first; a renderer takes the first whose text fits its per-tool
 * cap. n >= 0: objects shown inline down to n levels below the arguments (deeper ones are `object`);
 * NAMES_ONLY: the arguments' names, every type `any`; NO_ARGS: not even the names.
 */
const NAMES_ONLY = -1
export const NO_ARGS = -2
export const DETAILS = [2, 1, 0, NAMES_ONLY, NO_ARGS] as const

const MAX_PROPS = 12
const MAX_KEYS = 100
const MAX_NAME = 64
const MAX_ENUM = 8
const MAX_UNION = 8
const MAX_LITERAL = 64
const MAX_NEST = 6
const MAX_NODES = 300

const ANY: SchemaType = { kind: 'any' }
const COMPOSED = ['anyOf', 'oneOf', 'allOf', '$ref']
const NAMED = new Set(['string', 'number', 'integer', 'boolean', 'null'])

interface Reading { detail: number, nodes: number }

function isRecord (v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

/** The arguments of a tool whose input schema is `schema` (a schema without properties has none). */
export function readArgs (schema: unknown, detail: number): Args {
  if (!isRecord(schema)) return { props: [], open: false }
  // Arguments described only by a combination or a reference: some keys are accepted, which ones is not said.
  if (!isRecord(schema.properties) && COMPOSED.some((k) => k in schema)) return { props: [], open: true }
  const object = readObject(schema, 0, 0, { detail, nodes: MAX_NODES })
  return { props: object.props ?? [], open: object.open }
}

function readObject (s: Record<string, unknown>, level: number, nest: number, r: Reading): SchemaType & { kind: 'object' } {
  const extra = s.additionalProperties
  let open = extra === true || isRecord(extra)
  const properties = s.properties
  if (!isRecord(properties)) return { kind: 'object', props: level === 0 || open ? [] : null, open }
  if (level > Math.max(r.detail, 0)) return { kind: 'object', props: null, open }
  const required = Array.isArray(s.required) ? s.required.slice(0, 1000) : []
  const props: Prop[] = []
  let keys = 0
  // for-in and not Object.keys: stop after MAX_KEYS without listing a million properties.
  for (const name in properties) {
    if (!Object.hasOwn(properties, name)) continue
    if (++keys > MAX_KEYS || props.length === MAX_PROPS) { open = true; break }
    if (name.length > MAX_NAME) { open = true; continue }
    const type = r.detail < 0 ? ANY : readType(properties[name], level + 1, nest + 1, r)
    props.push({ name, required: required.includes(name), type })
  }
  return { kind: 'object', props, open }
}

function readType (s: unknown, level: number, nest: number, r: Reading): SchemaType {
  if (--r.nodes < 0 || nest > MAX_NEST || !isRecord(s) || '$ref' in s) return ANY
  if ('const' in s) {
    const value = literal(s.const)
    return value === undefined ? ANY : { kind: 'literal', value }
  }
  if (Array.isArray(s.enum) && s.enum.length > 0 && s.enum.length <= MAX_ENUM) {
    const values = s.enum.map(literal)
    if (values.every((v) => v !== undefined)) return union(values.map((value) => ({ kind: 'literal', value: value as Literal })))
  }
  return readBase(s, level, nest, r)
}

/** The type of `s` from its `anyOf`/`oneOf`, `type`, `properties` or `items` (not its enum). */
function readBase (s: Record<string, unknown>, level: number, nest: number, r: Reading): SchemaType {
  const alternatives = Array.isArray(s.anyOf) ? s.anyOf : Array.isArray(s.oneOf) ? s.oneOf : undefined
  if (alternatives !== undefined) {
    if (alternatives.length === 0 || alternatives.length > MAX_UNION) return ANY
    return union(alternatives.map((a) => readType(a, level, nest + 1, r)))
  }
  const type = s.type
  if (typeof type === 'string') return readNamed(type, s, level, nest, r)
  if (Array.isArray(type)) {
    if (type.length === 0 || type.length > MAX_UNION) return ANY
    return union(type.map((t) => typeof t === 'string' ? readNamed(t, s, level, nest, r) : ANY))
  }
  if (isRecord(s.properties)) return readObject(s, level, nest, r)
  if ('items' in s) return readNamed('array', s, level, nest, r)
  return ANY
}

function readNamed (type: string, s: Record<string, unknown>, level: number, nest: number, r: Reading): SchemaType {
  if (NAMED.has(type)) return { kind: type as 'string' }
  if (type === 'object') return readObject(s, level, nest, r)
  if (type === 'array') return { kind: 'array', items: isRecord(s.items) ? readType(s.items, level, nest + 1, r) : ANY }
  return ANY
}

function literal (v: unknown): Literal | undefined {
  if (v === null || typeof v === 'boolean') return v
  if (typeof v === 'number') return Number.isFinite(v) ? v : undefined
  if (typeof v === 'string') return v.length <= MAX_LITERAL ? v : undefined
  return undefined
}

/** A union of `members`, flattened; `any` when one member is. */
function union (members: SchemaType[]): SchemaType {
  const flat = members.flatMap((m) => m.kind === 'union' ? m.members : [m])
  if (flat.some((m) => m.kind === 'any')) return ANY
  return flat.length === 1 ? flat[0] as SchemaType : { kind: 'union', members: flat }
}
