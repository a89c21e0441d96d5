/**
 * The `Mcp-Param-*` headers of a 2026-07-28 tools/call (SEP-2243): a tool's input schema
 * may mark a parameter with `x-mcp-header: "Name"`, and a client then repeats that
 * argument in the `Mcp-Param-Name` header, so that proxies can route on it without reading
 * the body. A server must check that the header is there and says what the body says.
 */

/** One parameter a tool mirrors in a header: where it sits in the arguments, the header's suffix, its JSON type. */
export interface ParamHeader {
  path: string[]
  header: string
  type: string | undefined
}

/** How deep in nested object properties an `x-mcp-header` is looked for (schemas come from upstream servers). */
const MAX_DEPTH = 8
/** A header's name is a token (RFC 9110): a schema's odd value is ignored, never sent into a header lookup. */
const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/
const SENTINEL = /^=\?base64\?(.*)\?=$/
const CANONICAL_BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
const DECIMAL = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/

/** The parameters of `inputSchema` (a tool's, as listed) that carry `x-mcp-header`, nested objects included. */
export function paramHeadersOf (inputSchema: unknown): ParamHeader[] {
  const found: ParamHeader[] = []
  const walk = (schema: unknown, path: string[]): void => {
    if (path.length > MAX_DEPTH || schema === null || typeof schema !== 'object') return
    const properties = (schema as { properties?: unknown }).properties
    if (properties === null || typeof properties !== 'object') return
    for (const [name, property] of Object.entries(properties)) {
      if (property === null || typeof property !== 'object') continue
      const header = (property as Record<string, unknown>)['x-mcp-header']
      const type = (property as { type?: unknown }).type
      if (typeof header === 'string' && TOKEN.test(header)) {
        found.push({ path: [...path, name], header, type: typeof type === 'string' ? type : undefined })
      }
      walk(property, [...path, name])
    }
  }
  walk(inputSchema, [])
  return found
}

/** Why the headers and the body disagree, for a -32020 answer; undefined when they agree. */
export interface ParamHeaderMismatch {
  header: string
  message: string
}

/**
 * Checks the `Mcp-Param-*` headers of a call against its arguments: for every declared
 * parameter whose argument is a string, number or boolean, the header must be present and,
 * decoded (the `=?base64?...?=` form is Base64 of UTF-8 and must be canonical; anything else
 * is literal), equal the argument (numbers compared as numbers). A header without an argument
 * is ignored. `header(name)` reads a request header (trimmed of surrounding whitespace).
 */
export function checkParamHeaders (
  declared: readonly ParamHeader[],
  args: unknown,
  header: (name: string) => string | undefined
): ParamHeaderMismatch | undefined {
  for (const d of declared) {
    const value = valueAt(args, d.path)
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') continue
    const name = `Mcp-Param-${d.header}`
    const raw = header(name.toLowerCase())
    const where = d.path.join('.')
    if (raw === undefined) return { header: name, message: `the body carries ${where}=${JSON.stringify(value)} but the ${name} header is absent` }
    const decoded = decode(raw.trim())
    if (decoded === undefined) return { header: name, message: `the ${name} header carries an invalid Base64 value` }
    const equal = typeof value === 'number' && DECIMAL.test(decoded) ? Number(decoded) === value : decoded === String(value)
    if (!equal) return { header: name, message: `the ${name} header says ${JSON.stringify(decoded)} but the body carries ${where}=${JSON.stringify(value)}` }
  }
  return undefined
}

function decode (value: string): string | undefined {
  const sentinel = SENTINEL.exec(value)
  if (sentinel === null) return value
  const b64 = sentinel[1]!
  if (!CANONICAL_BASE64.test(b64)) return undefined
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(b64, 'base64'))
  } catch {
    return undefined
  }
}

function valueAt (root: unknown, path: readonly string[]): unknown {
  let node = root
  for (const key of path) {
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, key)) return undefined
    node = (node as Record<string, unknown>)[key]
  }
  return node
}
