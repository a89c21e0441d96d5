/**
 * What the journal does to a call's data before it stores it: secrets masked by key name at any
 * depth, and each field capped to a byte budget with a marker a reader can recognise. Pure
 * functions; no I/O.
 */

/** The value a secret is replaced with. */
export const MASK = '****'

/** Deeper than this, a subtree is replaced by a marker: a walk must stay bounded, and a hidden secret must not leak through the cut. */
export const MAX_DEPTH = 32
export const TOO_DEEP = '[nested too deep]'

// Key names are compared lowercased with `-`, `_`, `.` and spaces removed, so `X-Api-Key`,
// `api_key`, `apiKey` and `API KEY` are one name.
const SECRET_PARTS = [
  'password', 'passwd', 'passphrase', 'secret', 'authorization', 'apikey', 'accesskey', 'privatekey',
  'signingkey', 'encryptionkey', 'cookie', 'credential', 'sessionid', 'bearer', 'xauth'
]
const SECRET_EXACT = new Set(['auth', 'pass', 'pwd', 'pin', 'otp', 'jwt', 'sig', 'signature', 'proxyauthorization'])

/**
 * Whether a key or header name looks like it holds a secret: it contains password, secret,
 * authorization, api_key, access_key, private_key, cookie, credential, session_id, ..., or ends
 * with `token` (access_token, refreshToken, id-token; not max_tokens) or `auth` (basic_auth).
 */
export function isSecretKey (key: string): boolean {
  let known = keyVerdicts.get(key)
  if (known === undefined) {
    known = classifyKey(key)
    // Argument keys repeat from call to call: remembered, within a bound.
    if (keyVerdicts.size >= 4096) keyVerdicts.clear()
    keyVerdicts.set(key, known)
  }
  return known
}

const keyVerdicts = new Map<string, boolean>()

function classifyKey (key: string): boolean {
  const k = key.toLowerCase().replace(/[-_. ]/g, '')
  if (k.endsWith('token') || k.endsWith('auth') || SECRET_EXACT.has(k)) return true
  for (const part of SECRET_PARTS) if (k.includes(part)) return true
  return false
}

// `Bearer <token>` and `Basic <credentials>` inside any string (a curl command in a bash call, a
// header line in an output), and `key=value` pairs whose key looks secret (a query string, a CLI flag).
const BEARER = /\b(Bearer)\s+[A-Za-z0-9._~+/=-]+|\b(Basic)\s+[A-Za-z0-9+/=]{8,}/g
// The value may not be a scheme already masked above (`Authorization: Bearer ****` stays readable).
const PAIR = /\b([A-Za-z][A-Za-z0-9_-]{0,40})(["']?\s*[:=]\s*["']?)(?!(?:Bearer|Basic)\s+\*{4})([^\s"'&,;]{4,})/g

/** A string with credentials it carries in the two common inline forms masked. */
export function maskString (text: string): string {
  // Both forms need one of these; most strings have none, and skip the regexes.
  if (!(text.includes(':') || text.includes('=') || text.includes('Bearer') || text.includes('Basic'))) return text
  let out = text.replace(BEARER, (_m, bearer: string | undefined, basic: string | undefined) => `${bearer ?? basic ?? ''} ${MASK}`)
  out = out.replace(PAIR, (m, key: string, sep: string) => (isSecretKey(key) ? `${key}${sep}${MASK}` : m))
  return out
}

/**
 * The value with every value under a secret-looking key replaced by MASK, at any depth; with
 * `strings`, credentials inside strings are masked too (maskString). Headers as `[name, value]`
 * pairs are masked by name like object keys. The input is never modified: a part that changes is
 * copied, and a part with nothing to mask is returned as is (the common case costs no allocation).
 */
export function maskValue (value: unknown, opts: { strings: boolean }, depth = 0): unknown {
  if (typeof value === 'string') return opts.strings ? maskString(value) : value
  if (value === null || typeof value !== 'object') return value
  if (depth >= MAX_DEPTH) return TOO_DEEP
  if (Array.isArray(value)) {
    if (value.length === 2 && typeof value[0] === 'string' && isSecretKey(value[0]) && value[1] !== null && value[1] !== '') return [value[0], MASK]
    let out: unknown[] | undefined
    for (let i = 0; i < value.length; i++) {
      const v: unknown = value[i]
      const m = maskValue(v, opts, depth + 1)
      if (out === undefined && m !== v) out = value.slice(0, i)
      out?.push(m)
    }
    return out ?? value
  }
  const obj = value as Record<string, unknown>
  const keys = Object.keys(obj)
  let out: Record<string, unknown> | undefined
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i] as string
    const v = obj[k]
    const m = isSecretKey(k) && v !== null && v !== undefined && v !== '' ? MASK : maskValue(v, opts, depth + 1)
    if (out === undefined && m !== v) {
      out = {}
      for (let j = 0; j < i; j++) out[keys[j] as string] = obj[keys[j] as string]
    }
    if (out !== undefined) out[k] = m
  }
  return out ?? value
}

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
export function safeJson (value: unknown): string {
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
 */
export function prepareField (value: unknown, limit: number): { stored: unknown, json: string } {
  const keyMasked = maskValue(value, { strings: false })
  const json = safeJson(keyMasked)
  const capped = capField(keyMasked, limit, json)
  if (capped !== keyMasked && capped !== null) {
    const c = capped as CappedField
    return { stored: { ...c, head: maskString(c.head) }, json }
  }
  return { stored: maskValue(keyMasked, { strings: true }), json }
}

/** An output string ready to store: capped to `limit` bytes, then its inline credentials masked. */
export function prepareText (text: string | null | undefined, limit: number): unknown {
  if (text === null || text === undefined) return null
  const capped = capField(text, limit)
  if (typeof capped === 'string') return maskString(capped)
  const c = capped as CappedField
  return { ...c, head: maskString(c.head) }
}
