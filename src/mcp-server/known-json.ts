/**
 * JSON the gateway writes again and again without serialising it again: the tools of a cached
 * listing. A tools/list answer on /mcp was `JSON.stringify` of the whole listing per request (a
 * 4 MB listing: a new 4 MB string per answer, 100 concurrent answers 400 MB in flight, an audit);
 * the lean transport now writes the listing's bytes, one Buffer per cached listing shared by every
 * answer (GET /tools keeps the same per listing: listings.ts listingJson).
 */
const known = new WeakMap<object, Buffer>()

/** The JSON bytes of `value` (a cached listing's tools), made once per object. */
export function jsonOnce (value: readonly unknown[]): Buffer {
  let bytes = known.get(value)
  if (bytes === undefined) {
    bytes = Buffer.from(JSON.stringify(value))
    known.set(value, bytes)
  }
  return bytes
}

/**
 * The JSON text of a JSON-RPC response as chunks, the bytes jsonOnce made for a field of its
 * result written as they are; undefined when no field of its result has them (the caller
 * stringifies it whole). Byte for byte `JSON.stringify(message)`: the same keys in the same order.
 */
export function responseChunks (message: object): Array<string | Buffer> | undefined {
  const result = (message as { result?: unknown }).result
  if (result === null || typeof result !== 'object' || Array.isArray(result)) return undefined
  if (!holdsKnown(result as Record<string, unknown>)) return undefined
  const chunks: Array<string | Buffer> = []
  let text = '{'
  /** Appends `"key":` and the value's JSON (a known one as its bytes); false when JSON leaves the value out. */
  const member = (key: string, value: unknown, comma: boolean): boolean => {
    const bytes = value !== null && typeof value === 'object' ? known.get(value) : undefined
    if (bytes !== undefined) {
      chunks.push(`${text}${comma ? ',' : ''}${JSON.stringify(key)}:`, bytes)
      text = ''
      return true
    }
    const json = JSON.stringify(value) as string | undefined
    if (json === undefined) return false
    text += `${comma ? ',' : ''}${JSON.stringify(key)}:${json}`
    return true
  }
  let comma = false
  for (const [key, value] of Object.entries(message)) {
    if (key !== 'result') {
      comma = member(key, value, comma) || comma
      continue
    }
    text += `${comma ? ',' : ''}"result":{`
    let inner = false
    for (const [field, v] of Object.entries(result)) inner = member(field, v, inner) || inner
    text += '}'
    comma = true
  }
  chunks.push(`${text}}`)
  return chunks
}

/** Whether a field of `result` has bytes jsonOnce made (every lean answer is asked: no array of its values made). */
function holdsKnown (result: Record<string, unknown>): boolean {
  for (const key in result) {
    const value = result[key]
    if (value !== null && typeof value === 'object' && known.has(value)) return true
  }
  return false
}
