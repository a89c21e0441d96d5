import { maskText, maskValue } from '../secrets/detector.js'

/**
 * What the journal does to a call's data before it stores it: each field capped to a byte budget
 * with a marker a reader can recognise, and its secrets masked by the one detector
 * (src/secrets/detector.ts). Pure functions; no I/O.
 */

/** A field that was over its budget: its JSON text's first bytes, and how big it was. */
export interface CappedField {
  $capped: true
  /** UTF-8 bytes of the whole field (as JSON for objects; the string itself for strings). */
  bytes: number
  /** The budget it was cut to. */
  limit: number
  /** The first `limit` bytes (never a split character), as text. */
  head: string
}

const encoder = new TextEncoder()

/** The longest prefix of `text` whose UTF-8 encoding fits `limit` bytes (never splits a character). */
export function utf8Head (text: string, limit: number): string {
  const { read } = encoder.encodeInto(text, new Uint8Array(limit))
  return text.slice(0, read)
}

/**
 * `value` when its size fits `limit` bytes, else a CappedField. Strings are measured as text,
 * anything else as its JSON. `json` may pass the JSON text when the caller already has it.
 */
export function capField (value: unknown, limit: number, json?: string): unknown {
  if (value === null || value === undefined) return null
  const text = typeof value === 'string' ? value : (json ?? safeJson(value))
  // Fast path: a text of at most limit/3 UTF-16 units fits whatever its characters.
  if (text.length * 3 <= limit) return value
  const bytes = Buffer.byteLength(text, 'utf8')
  if (bytes <= limit) return value
  return { $capped: true, bytes, limit, head: utf8Head(text, limit) } satisfies CappedField
}

/** JSON text of a value that may not be serialisable (cycles, BigInt): a description instead of a throw. */
function safeJson (value: unknown): string {
  try {
    return JSON.stringify(value) ?? 'null'
  } catch (err) {
    return JSON.stringify(`[not serialisable: ${(err as Error).message}]`)
  }
}

/**
 * A structured field (arguments, trace) ready to store: keys masked at any depth, then either the
 * whole value with credentials in its strings masked too, or, over `limit` bytes, a CappedField
 * whose head is masked the same way. `json` is the key-masked JSON text (what argumentsSha256 hashes):
 * string masking runs only on what is kept, so a 10 MB string costs one serialisation, not a regex pass.
 * `storedJson` is the JSON text of `stored`: `json` itself when masking the strings changed nothing.
 */
export function prepareField (value: unknown, limit: number): { stored: unknown, json: string, storedJson: string } {
  const keyMasked = maskValue(value, { strings: false })
  const json = safeJson(keyMasked)
  const capped = capField(keyMasked, limit, json)
  if (capped !== keyMasked && capped !== null) {
    const c = capped as CappedField
    const stored = { ...c, head: maskText(c.head) }
    return { stored, json, storedJson: JSON.stringify(stored) }
  }
  const stored = maskValue(keyMasked, { strings: true })
  return { stored, json, storedJson: stored === keyMasked ? json : safeJson(stored) }
}

/** An output string ready to store: capped to `limit` bytes, then its credentials masked. */
export function prepareText (text: string | null | undefined, limit: number): unknown {
  if (text === null || text === undefined) return null
  const capped = capField(text, limit)
  if (typeof capped === 'string') return maskOutput(capped)
  const c = capped as CappedField
  return { ...c, head: maskOutput(c.head) }
}

// The marker capOutput (src/routing/output.ts) puts in the middle of an output over the workspace's cap.
const CUT_MARKER = /\n\[\.\.\. truncated \d+ chars \.\.\.\]\n/

/**
 * An output masked. An output cut in the middle by capOutput is two pieces of one text: when it
 * was JSON, the tail may start inside a string literal (an odd number of unescaped quotes follows),
 * and is masked as such so its lines are read as lines, not as escaped text.
 */
function maskOutput (text: string): string {
  const cut = CUT_MARKER.exec(text)
  if (cut === null) return maskText(text)
  const head = text.slice(0, cut.index)
  const tail = text.slice(cut.index + cut[0].length)
  return maskText(head) + cut[0] + maskText(tail, { inString: unescapedQuotes(tail) % 2 === 1 })
}

function unescapedQuotes (text: string): number {
  let count = 0
  let backslashes = 0
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c === 34 && backslashes % 2 === 0) count++
    backslashes = c === 92 ? backslashes + 1 : 0
  }
  return count
}
