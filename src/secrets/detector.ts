/**
 * The one secret detector (docs/ARCHITECTURE.md#secrets): what the journal, the approvals view,
 * the request log and upstream error messages mask. Pure functions, no I/O, no dependency.
 *
 * It finds
 * - values under credential-like names, with any prefix or suffix (`DB_PASSWORD=`, `apiKey:`,
 *   `"client_secret": "..."`, `--password=...`, `--token ...`, `x-api-key: ...`), in parsed
 *   objects by key and in text as assignments (names.ts judges the names);
 * - well-known token formats (OpenAI and Anthropic `sk-...`, GitHub `ghp_...`/`github_pat_...`,
 *   GitLab, AWS access key ids, Slack `xox*-`, Google `AIza...`/`ya29.`, Stripe, npm, PyPI,
 *   Hugging Face, SendGrid, JWTs) and PEM private key blocks;
 * - `Bearer`/`Basic` credentials, URL userinfo (`https://u:pw@`, `postgres://u:pw@`), credential
 *   query parameters, `curl -u user:pw`, `mysql -pPW`;
 * - high-entropy tokens right after a credential word ("your API token is 9fQ...").
 *
 * Text is masked on its parsed values, never on escaped JSON text: JSON string literals inside a
 * text (a bash result serialised as JSON, a JSON string holding more JSON) are decoded, masked and
 * encoded again, so a line after the first is seen at a real line start and a stored JSON text
 * stays valid. Every pattern runs in linear time (no nested quantifier, every run of a class
 * bounded or followed by a character outside it), and a string is scanned at most MAX_NESTING + 1
 * times: the work per string is bounded by its length.
 */

import { isQueryCredentialName, isSecretName } from './names.js'
import { replaceMatches } from './scan-near.js'
import { COMMAND_AT_START, COMMAND_NAMES, COMMAND_WORDS, commandWords, hasTokenRun, mayHoldMixedRun } from './starts.js'
import { isNameChar, maskTokenFormats, TOKEN_FORMATS, TOKEN_FORMATS_AT } from './tokens.js'
import { tokenUserMatches, URL_PATTERNS, userinfoMatches } from './urls.js'

/** What a secret is replaced with in the journal and the approvals view (documented in the README). */
export const MASK = '****'

/** Deeper than this, a subtree is replaced by a marker: a walk must stay bounded, and a hidden secret must not leak through the cut. */
export const MAX_DEPTH = 32
export const TOO_DEEP = '[nested too deep]'

/** Levels of JSON text held in JSON strings that are decoded and scanned in turn (a tool's JSON in a bash result's JSON). */
const MAX_NESTING = 4

export interface MaskOptions {
  /** The replacement: MASK by default; the logs use `[redacted]`. */
  mask?: string
}

// --- values ------------------------------------------------------------------------------------

// What stands where a value goes without being one: references, placeholders, types, booleans.
const NOT_A_VALUE = /^(?:true|false|null|none|nil|undefined|yes|no|on|off|string|number|boolean|bool|str|int|bytes|any|object|required|optional|\*+|x{3,}|\.{3}|…|\[redacted\]|\[masked\])$/i
const REFERENCE = /^(?:\$|%[A-Za-z_]|\{\{|<[^>]*>$)/
const CALL = /^[A-Za-z_$][\w$.]*[([]/
const MEMBER_PATH = /^[A-Za-z_$][A-Za-z_$]*(?:\.[A-Za-z_$][A-Za-z_$]*)+!?$/

/** Whether a text value after a credential name is something else than a secret (`$DB_PASSWORD`, `getKey()`, `string`, `process.env.X`, `****`). */
function isNotSecretValue (value: string, mask: string): boolean {
  if (value === '' || value.includes(mask) || value.includes(MASK)) return true
  return NOT_A_VALUE.test(value) || REFERENCE.test(value) || CALL.test(value) || MEMBER_PATH.test(value)
}

/** `PWD=/home/me` is the working directory, not a password. */
function isWorkingDirectory (name: string, value: string): boolean {
  return /^(?:old)?pwd$/i.test(name) && (value.startsWith('/') || value.startsWith('~'))
}

/** Shannon entropy in bits per character. */
function entropy (text: string): number {
  const counts = new Map<string, number>()
  for (const c of text) counts.set(c, (counts.get(c) ?? 0) + 1)
  let bits = 0
  for (const n of counts.values()) {
    const p = n / text.length
    bits -= p * Math.log2(p)
  }
  return bits
}

/** Whether a run of token characters looks like a generated credential rather than a word, a path or a number. */
function looksRandom (token: string): boolean {
  if (token.length < 16 || token.length > 1024) return false
  if (/^[./~]/.test(token) || !/[0-9]/.test(token) || !/[A-Za-z]/.test(token)) return false
  return entropy(token) >= 3.3
}

/** A Bearer credential, unless it is a word of prose ("Bearer tokens"). */
function looksLikeCredential (token: string): boolean {
  if (token.length >= 16) return true
  return token.length >= 6 && (/[0-9._~+/=-]/.test(token) || (/[a-z]/.test(token) && /[A-Z]/.test(token.slice(1))))
}

// --- text patterns -----------------------------------------------------------------------------

// A name or token starts after something that is not part of it, or right after an escaped
// newline or tab (`\n` as two characters, where text was escaped before it came here).
const START = String.raw`(?:(?<=\\[nrt])|(?<![A-Za-z0-9_.-]))`

const BEARER = new RegExp(START + String.raw`(Bearer[ \t]+)([A-Za-z0-9._~+/-]{1,4096}=*)`, 'gi')
const BASIC = new RegExp(START + String.raw`(Basic[ \t]+)([A-Za-z0-9+/]{8,4096}={0,2})(?![A-Za-z0-9+/=])`, 'gi')
// Whether BEARER and BASIC can match: the scheme names in any case (`bEARer` too), in one pass each
// (cheaper than the two or three `includes` of fixed cases they replaced).
const BEARER_GATE = /earer/i
const BASIC_GATE = /asic/i
// Either scheme name: most texts have neither, and one pass tells (each gate then runs only where one is).
const SCHEME_GATE = /earer|asic/i

const QUERY_PARAM = /([?&])([^\s=&#?'"\\]{1,128})=([^\s&#'"\\]{1,4096})/g

// NAME<sep>VALUE: `KEY=v`, `key: v`, `key := v`, `"key": "v"` in non-JSON text, `--key=v`, with
// an optional auth scheme kept (`Authorization: Bearer ****`) and a quoted value masked whole.
// Found from the separators (maskAssignments): names are read backwards from each `:` or `=`,
// and the value is parsed only after a credential name.
const SCHEMES = '(?:Bearer|Basic|Token|Digest|Bot|ApiKey|SSWS|JWT|OAuth|Negotiate)'
const UNQUOTED = String.raw`(?:[^\s'"&,;\\]|\\(?![nrt"'\\])){1,4096}`
const ASSIGNED_VALUE = new RegExp(String.raw`[ \t]*((?:` + SCHEMES + String.raw`[ \t]+)?)(?:'([^'\n]{1,256})'|"([^"\n]{1,256})"|(\\?['"]?)((?!=)` + UNQUOTED + '))', 'iy')
// --name value (a long flag and its value as the next argument).
const FLAG_VALUE = /(?<![A-Za-z0-9_-])(--[A-Za-z][A-Za-z0-9_-]{0,63})([ \t]+)(['"]?)([^\s'"-][^\s'"]{0,255})/g
// mysql -pPASSWORD, on a line that runs a MySQL client.
const MYSQL_LINE = /(?<![A-Za-z0-9_-])(?:mysql|mysqldump|mysqladmin|mysqlsh|mysqlimport|mariadb|mariadb-dump)(?![A-Za-z0-9_-])/
const MYSQL_P = /(?<=[ \t])-p(['"]?)([^\s'"]{1,256})/g
// curl -u user:password / --user user:password, on a line that runs curl.
const CURL_LINE = /(?<![A-Za-z0-9_-])curl(?![A-Za-z0-9_-])/
const MYSQL_LINES = new RegExp(MYSQL_LINE.source, 'g') // this and CURL_LINES as onLines scans them
const CURL_LINES = new RegExp(CURL_LINE.source, 'g')
const CURL_USER = /(?<=[ \t])(-u|-U|--user|--proxy-user)([ \t]*|=)(['"]?)([^\s:'"]{0,256}):([^\s'"]{1,256})/g
// A credential word, after which a random-looking token is masked (api key(s), access key(s), auth, authorization, secret,
// secret key(s), secrets, token(s), password(s), passwd, passphrase, credential(s), bearer). Grouped by first letter (the
// engine then tries one group at a position, in the words' order): a tenth to a quarter faster than the words side by side.
// Its lookbehind (no letter or digit before the word) is checked in code (nextCredentialWord): a
// pattern that opens with a lookbehind is tried at every position, and cost half again as much.
const CREDENTIAL_WORD = /(?:a(?:pi[ _-]?keys?|ccess[ _-]?keys?|uth|uthorization)|s(?:ecret(?:[ _-]?keys?)?|ecrets)|tokens?|pass(?:words?|wd|phrase)|credentials?|bearer)(?![A-Za-z0-9])/gi

/** CREDENTIAL_WORD's next match in `text` from its lastIndex, where no letter or digit comes before it. */
function nextCredentialWord (text: string): RegExpExecArray | null {
  for (let m = CREDENTIAL_WORD.exec(text); m !== null; m = CREDENTIAL_WORD.exec(text)) {
    const before = text.charCodeAt(m.index - 1)
    if (!((before >= 97 && before <= 122) || (before >= 65 && before <= 90) || (before >= 48 && before <= 57))) return m
    CREDENTIAL_WORD.lastIndex = m.index + 1
  }
  return null
}
const TOKEN_RUN = /[A-Za-z0-9+/_~.=-]{16,1024}/y
const TOKEN_CHAR = /[A-Za-z0-9+/_~.=-]/
const SEPARATOR = /[\s:=>'"`(),]/
const FILLER_WORD = /^([A-Za-z]{1,12})(?![A-Za-z0-9_])/
// Words that may stand between a credential word and its value ("the token is", "key for prod:").
const FILLER = new Set([
  'is', 'was', 'are', 'be', 'my', 'your', 'our', 'the', 'a', 'an', 'new', 'value', 'set', 'to', 'for', 'of', 'here', 'prod', 'production', 'id'
])

/** Characters handed to a pattern pass or a literal decode so far (the bounded-work test reads it). */
let work = 0
export function detectorWork (): number {
  return work
}

/** `-----BEGIN ... PRIVATE KEY-----` blocks: the body masked, to the END line or the end of the text (a cut head). */
function maskPem (text: string, mask: string): string {
  let out = ''
  let from = 0
  for (;;) {
    const begin = text.indexOf('-----BEGIN ', from)
    if (begin < 0) break
    const headerEnd = text.indexOf('-----', begin + 11)
    if (headerEnd < 0 || headerEnd - begin > 80) {
      out += text.slice(from, begin + 11)
      from = begin + 11
      continue
    }
    const label = text.slice(begin + 11, headerEnd)
    if (!label.includes('PRIVATE KEY')) {
      out += text.slice(from, headerEnd + 5)
      from = headerEnd + 5
      continue
    }
    const endMarker = `-----END ${label}-----`
    const end = text.indexOf(endMarker, headerEnd + 5)
    out += text.slice(from, headerEnd + 5) + mask
    if (end < 0) return out
    out += endMarker
    from = end + endMarker.length
  }
  return out + text.slice(from)
}

/**
 * `fn` applied to each line of `text` that `marker` (global) finds (a curl or mysql command line), the rest kept. One
 * scan of the text: its look-arounds see a newline where a line's own see its ends, so it hits the lines a test of each would.
 */
function onLines (text: string, marker: RegExp, fn: (line: string) => string): string {
  let out = ''
  let from = 0
  marker.lastIndex = 0
  // `test` (no match array): the match's last character, before lastIndex, is on its line.
  while (marker.test(text)) {
    const inLine = marker.lastIndex - 1
    const start = text.lastIndexOf('\n', inLine) + 1
    const newline = text.indexOf('\n', inLine)
    const end = newline < 0 ? text.length : newline
    out += text.slice(from, start) + fn(text.slice(start, end))
    from = end
    marker.lastIndex = end
  }
  return from === 0 ? text : out + text.slice(from)
}

/** Random-looking tokens within a few filler words after a credential word ("the API token is 9fQ..."). */
function maskNearWords (text: string, mask: string): string {
  CREDENTIAL_WORD.lastIndex = 0
  let out = ''
  let from = 0
  for (let m = nextCredentialWord(text); m !== null; m = nextCredentialWord(text)) {
    const after = m.index + m[0].length
    let pos = after
    // Separators and up to three filler words, within 60 characters.
    for (let fillers = 0; ; fillers++) {
      while (pos < text.length && pos - after < 60 && SEPARATOR.test(text[pos] as string)) pos++
      const word = FILLER_WORD.exec(text.slice(pos, pos + 13))?.[1]
      if (word === undefined || fillers >= 3 || !FILLER.has(word.toLowerCase())) break
      pos += word.length
    }
    TOKEN_RUN.lastIndex = pos
    const token = TOKEN_RUN.exec(text)?.[0]
    if (token === undefined || !looksRandom(token) || token.includes(mask)) continue
    // A run longer than the pattern's bound is not masked by halves: it is no token a person pastes.
    if (TOKEN_CHAR.test(text[pos + token.length] ?? '')) continue
    out += text.slice(from, pos) + mask
    from = pos + token.length
    CREDENTIAL_WORD.lastIndex = from
  }
  return from === 0 ? text : out + text.slice(from)
}

/**
 * `NAME<sep>VALUE` pairs whose name is a credential's, value masked. Each `:` or `=` is looked at
 * once: the name before it read backwards (at most 64 characters, then spaces, a quote, a
 * backslash), the value after it parsed only when the name is a credential's. A value that is no
 * secret (`$VAR`, `getKey()`) is skipped whole; after any other name the search goes on inside
 * its value (`'stdout': 'ok\npassword: x'`).
 */
function maskAssignments (text: string, mask: string): string {
  let out = ''
  let from = 0
  // The next `:` and `=` from `at` (indexOf each, not a pattern tried at every position).
  let colon = text.indexOf(':')
  let equals = text.indexOf('=')
  for (let at = 0; ;) {
    if (colon >= 0 && colon < at) colon = text.indexOf(':', at)
    if (equals >= 0 && equals < at) equals = text.indexOf('=', at)
    const s = colon < 0 || (equals >= 0 && equals < colon) ? equals : colon
    if (s < 0) break
    at = s + 1
    const next = text.charCodeAt(s + 1)
    const before = text.charCodeAt(s - 1)
    let sepEnd = s + 1
    if (s === colon) {
      if (next === 61 /* = */) sepEnd = s + 2
      else if (next === 58 /* : */ || (next === 47 /* / */ && text.charCodeAt(s + 2) === 47) || before === 58) continue
    } else if (next === 61 || next === 62 || next === 126 || s === 0 || before === 61 || before === 33 || before === 60 || before === 62) {
      // ==, =>, =~, !=, <=, >=: comparisons and arrows (= > ~ after it, = ! < > before it), and a text that starts with `=`
      at = s + 2
      continue
    }
    at = sepEnd
    let i = s - 1
    while (i >= 0 && s - i <= 16 && (text.charCodeAt(i) === 32 || text.charCodeAt(i) === 9)) i--
    if (text.charCodeAt(i) === 34 /* " */ || text.charCodeAt(i) === 39 /* ' */) i--
    if (text.charCodeAt(i) === 92 /* \\ */) i--
    const nameEnd = i + 1
    // A name that ends in a digit names no secret (names.ts): most separators are in times and numbers (`09:07`).
    const last = text.charCodeAt(i)
    if (last >= 48 && last <= 57) continue
    while (i >= 0 && nameEnd - i <= 66 && isNameChar(text.charCodeAt(i))) i--
    if (i >= 0 && isNameChar(text.charCodeAt(i))) continue
    let nameStart = i + 1
    // `\npassword=`: the n of an escaped newline is no part of the name.
    if (text[i] === '\\' && 'nrt'.includes(text[nameStart] ?? '') && nameStart + 1 < nameEnd) nameStart++
    // A name starts with a letter or `_` after at most two dashes (`--password`): checked before it is sliced, most separators have none (`09:07`).
    let first = nameStart
    while (first < nameEnd && first - nameStart < 2 && text.charCodeAt(first) === 45) first++
    const c = first < nameEnd ? text.charCodeAt(first) : 0
    if (!((c >= 97 && c <= 122) || (c >= 65 && c <= 90) || c === 95)) continue
    const name = text.slice(nameStart, nameEnd)
    if (!isSecretName(name)) continue
    ASSIGNED_VALUE.lastIndex = sepEnd
    const v = ASSIGNED_VALUE.exec(text)
    if (v === null) continue
    const [whole, , single, double, quote = '', bare] = v
    const valueEnd = sepEnd + whole.length
    at = valueEnd
    const value = single ?? double ?? bare ?? ''
    if (isNotSecretValue(value, mask) || isWorkingDirectory(name, value)) continue
    const valueText = single !== undefined ? `'${single}'` : double !== undefined ? `"${double}"` : quote + value
    out += text.slice(from, valueEnd - valueText.length) + (single !== undefined ? `'${mask}'` : double !== undefined ? `"${mask}"` : quote + mask)
    from = valueEnd
  }
  return from === 0 ? text : out + text.slice(from)
}

/** The credentials in plain text (no JSON string literal in it) masked. */
function maskPlain (text: string, mask: string): string {
  if (text.length < 4) return text
  work += text.length
  let out = text
  // `BEGIN ` first: indexOf stops at each occurrence of a literal's first character, and `-` is common.
  if (out.includes('BEGIN ') && out.includes('-----BEGIN ')) out = maskPem(out, mask)
  // Every token format and random-looking token is a run of 16+ token characters (most strings have none); a random-looking one holds a digit (few runs do).
  const longRun = hasTokenRun(out, 16)
  if (longRun) out = maskTokenFormats(out, mask)
  if (out.includes('://')) {
    out = replaceMatches(out, userinfoMatches(out), ([m, scheme, user, pw]) =>
      (isNotSecretValue(pw as string, mask) ? m : `${scheme as string}${user as string}:${mask}@`))
    out = replaceMatches(out, tokenUserMatches(out), ([m, scheme, user]) => (looksRandom(user as string) ? `${scheme as string}${mask}@` : m))
  }
  if (out.includes('=') && (out.includes('?') || out.includes('&'))) {
    out = out.replace(QUERY_PARAM, (m, sep: string, name: string, value: string) => (isQueryCredentialName(name) && !isNotSecretValue(value, mask) ? `${sep}${name}=${mask}` : m))
  }
  const schemeName = SCHEME_GATE.test(out)
  if (schemeName && BEARER_GATE.test(out)) out = out.replace(BEARER, (m, scheme: string, token: string) => (looksLikeCredential(token) ? `${scheme}${mask}` : m))
  if (schemeName && BASIC_GATE.test(out)) out = out.replace(BASIC, (m, scheme: string, b64: string) => (/^[\x20-\x7e]+:/.test(Buffer.from(b64, 'base64').toString('latin1')) ? `${scheme}${mask}` : m))
  if (out.includes(':') || out.includes('=')) {
    out = maskAssignments(out, mask)
  }
  // Which of the next three passes can match, in one pass (read again when one of them changed the text).
  let commands = commandWords(out)
  if (commands.flag) {
    const before = out
    out = out.replace(FLAG_VALUE, (m, flag: string, space: string, quote: string, value: string) => (isSecretName(flag) && !isNotSecretValue(value, mask) ? `${flag}${space}${quote}${mask}` : m))
    if (out !== before) commands = commandWords(out)
  }
  if (commands.mysql) {
    const before = out
    out = onLines(out, MYSQL_LINES, (line) => line.replace(MYSQL_P, (m, quote: string, pw: string) => (isNotSecretValue(pw, mask) ? m : `-p${quote}${mask}`)))
    if (out !== before) commands = commandWords(out)
  }
  if (commands.curl) {
    out = onLines(out, CURL_LINES, (line) => line.replace(CURL_USER, (m, flag: string, sep: string, quote: string, user: string, pw: string) => {
      if (isNotSecretValue(pw, mask) || (/^\d+$/.test(user) && /^\d+$/.test(pw))) return m
      return `${flag}${sep}${quote}${user}:${mask}`
    }))
  }
  return longRun && mayHoldMixedRun(out, 16) ? maskNearWords(out, mask) : out
}

// --- JSON string literals in text --------------------------------------------------------------

const SIMPLE_ESCAPES = new Set([34, 92, 47, 98, 102, 110, 114, 116]) // " \ / b f n r t
// eslint-disable-next-line no-control-regex -- a JSON string literal's characters up to its next quote, backslash or control character
const LITERAL_RUN = /[^"\\\x00-\x1f]*/y
const HEX4 = /^[0-9a-fA-F]{4}$/

/**
 * Where the JSON string literal opening at `q` ends: after its closing quote (complete), or where
 * it stops being one (a raw control character, a bad or cut escape, the end of the text).
 */
function literalEnd (text: string, q: number): { end: number, complete: boolean } {
  const n = text.length
  let i = q + 1
  while (i < n) {
    // Characters that need no look are skipped by the regex engine, not one by one here.
    LITERAL_RUN.lastIndex = i
    LITERAL_RUN.test(text)
    i = LITERAL_RUN.lastIndex
    if (i >= n) break
    const c = text.charCodeAt(i)
    if (c === 34) return { end: i + 1, complete: true }
    if (c === 92) {
      const e = text.charCodeAt(i + 1)
      if (SIMPLE_ESCAPES.has(e)) {
        i += 2
        continue
      }
      if (e === 117 && HEX4.test(text.slice(i + 2, i + 6))) {
        i += 6
        continue
      }
      return { end: i, complete: false }
    }
    if (c < 32) return { end: i, complete: false }
    i++
  }
  return { end: n, complete: false }
}

function decodeLiteral (raw: string, complete: boolean): string {
  work += raw.length
  // Without a backslash a literal is its characters (literalEnd let no control character in): most are.
  if (!raw.includes('\\', 1)) return raw.slice(1, complete ? -1 : raw.length)
  return JSON.parse(complete ? raw : raw + '"') as string
}

function encodeLiteral (value: string, complete: boolean): string {
  const json = JSON.stringify(value)
  return complete ? json : json.slice(0, -1)
}

function isSpace (c: number): boolean {
  return c === 32 || c === 9 || c === 10 || c === 13
}

/** Where the JSON value starting at `v` ends: a string, a whole object or array, or a scalar. */
function valueEnd (text: string, v: number): { end: number, kind: 'string' | 'container' | 'scalar', empty: boolean, complete: boolean } {
  const c = text.charCodeAt(v)
  if (c === 34) {
    const { end, complete } = literalEnd(text, v)
    return { end, kind: 'string', empty: complete && end === v + 2, complete }
  }
  if (c === 123 || c === 91) {
    let depth = 0
    let i = v
    while (i < text.length) {
      const ch = text.charCodeAt(i)
      if (ch === 34) {
        i = literalEnd(text, i).end
        continue
      }
      if (ch === 123 || ch === 91) depth++
      else if (ch === 125 || ch === 93) {
        depth--
        if (depth === 0) return { end: i + 1, kind: 'container', empty: false, complete: true }
      }
      i++
    }
    return { end: text.length, kind: 'container', empty: false, complete: false }
  }
  let i = v
  while (i < text.length && !isSpace(text.charCodeAt(i)) && !',}]'.includes(text[i] as string)) i++
  const scalar = text.slice(v, i)
  return { end: i, kind: 'scalar', empty: scalar === '' || scalar === 'true' || scalar === 'false' || scalar === 'null', complete: true }
}

const ASCII_LETTER = /[A-Za-z]/
// What a text may end with right before a quoted value (checked on its last 200 characters).
const FLAG_AT_END = /(?<![A-Za-z0-9_-])(--[A-Za-z][A-Za-z0-9_-]{0,63})[ \t]+$/
const MYSQL_P_AT_END = /[ \t]-p$/
const CURL_USER_AT_END = /(?<=[ \t])(?:-u|-U|--user|--proxy-user)(?:[ \t]*|=)$/

/**
 * How the text before a JSON string literal makes it a secret: `whole` after a credential name and
 * its separator (`export DB_PASSWORD=`, `password: `), a secret flag (`--password `) or mysql's
 * `-p`; `userinfo` after curl's `-u ` (the part after the colon); `word` after a credential word
 * (masked when random-looking); undefined otherwise.
 */
function valueContextAtEnd (gap: string): { kind: 'whole' | 'userinfo' | 'word', name: string } | undefined {
  const tail = gap.slice(-200)
  // Each context below holds a letter (a name, a flag, a command, a word): JSON's `": "` and `", "` hold none.
  if (!ASCII_LETTER.test(tail)) return undefined
  let i = tail.length - 1
  while (i >= 0 && (tail[i] === ' ' || tail[i] === '\t')) i--
  if (i >= 0 && (tail[i] === '=' || tail[i] === ':')) {
    i--
    if (tail[i] === ':') i--
    while (i >= 0 && (tail[i] === ' ' || tail[i] === '\t')) i--
    const end = i + 1
    while (i >= 0 && end - i <= 128 && /[A-Za-z0-9_.-]/.test(tail[i] as string)) i--
    const name = tail.slice(i + 1, end)
    if (name !== '' && isSecretName(name)) return { kind: 'whole', name }
  }
  const flag = FLAG_AT_END.exec(tail)?.[1]
  if (flag !== undefined && isSecretName(flag)) return { kind: 'whole', name: flag }
  const line = tail.slice(tail.lastIndexOf('\n') + 1)
  if (MYSQL_P_AT_END.test(line) && MYSQL_LINE.test(line)) return { kind: 'whole', name: '-p' }
  if (CURL_USER_AT_END.test(line) && CURL_LINE.test(line)) return { kind: 'userinfo', name: '-u' }
  return credentialWordAtEnd(tail) ? { kind: 'word', name: '' } : undefined
}

/** Whether a text ends with a credential word and at most three filler words ("the API token is "). */
function credentialWordAtEnd (gap: string): boolean {
  const tail = gap.slice(-60)
  CREDENTIAL_WORD.lastIndex = 0
  let last: RegExpExecArray | null = null
  for (let m = nextCredentialWord(tail); m !== null; m = nextCredentialWord(tail)) last = m
  if (last === null) return false
  const words = tail.slice(last.index + last[0].length).split(/[\s:=>'"`(),-]+/).filter((w) => w !== '')
  return words.length <= 3 && words.every((w) => FILLER.has(w.toLowerCase()))
}

/**
 * `text` with its credentials masked. JSON string literals in it are decoded, masked (as text, at
 * most MAX_NESTING levels deep) and encoded again; a literal that is an object key naming a secret
 * has its value replaced by the mask whatever it is; the text between literals is masked as plain text.
 */
function scan (text: string, mask: string, nesting: number): string {
  if (text.length < 4) return text
  let q = text.indexOf('"')
  if (q < 0 || nesting >= MAX_NESTING) return maskPlain(text, mask)
  const maskLiteral = JSON.stringify(mask)
  let out = ''
  let last = 0
  let pairName = false
  while (q >= 0) {
    const { end, complete } = literalEnd(text, q)
    const gap = text.slice(last, q)
    const raw = text.slice(q, end)
    const value = decodeLiteral(raw, complete)
    let k = end
    while (k < text.length && isSpace(text.charCodeAt(k))) k++
    if (complete && text.charCodeAt(k) === 58 /* : */) {
      // An object key: its value goes whole when the key names a secret.
      pairName = false
      out += maskPlain(gap, mask) + maskedLiteral(raw, value, complete, mask, nesting)
      last = end
      if (isSecretName(value)) {
        let v = k + 1
        while (v < text.length && isSpace(text.charCodeAt(v))) v++
        const span = valueEnd(text, v)
        const cut = span.kind === 'string' && !span.complete
        if (!span.empty && !(span.kind === 'string' && isWorkingDirectory(value, decodeLiteral(text.slice(v, span.end), !cut)))) {
          out += text.slice(end, v) + (cut ? maskLiteral.slice(0, -1) : maskLiteral)
          last = span.end
        }
      }
    } else {
      out += maskPlain(gap, mask)
      const context = valueContextAtEnd(gap)
      const colon = value.indexOf(':')
      // The value of a `["X-Api-Key", "..."]` header pair.
      const pairValue = pairName && complete && value !== '' && gap.trim() === ',' && text[k] === ']'
      pairName = complete && text[k] === ',' && text.slice(Math.max(0, q - 16), q).trimEnd().endsWith('[') && isSecretName(value)
      if (pairValue) {
        out += maskLiteral
      } else if (context?.kind === 'userinfo' && colon >= 0 && !isNotSecretValue(value.slice(colon + 1), mask)) {
        out += encodeLiteral(value.slice(0, colon + 1) + mask, complete)
      } else if ((context?.kind === 'whole' && !isNotSecretValue(value, mask) && !isWorkingDirectory(context.name, value)) ||
          (context?.kind === 'word' && looksRandom(value))) {
        out += complete ? maskLiteral : maskLiteral.slice(0, -1)
      } else {
        out += maskedLiteral(raw, value, complete, mask, nesting)
      }
      last = end
    }
    q = text.indexOf('"', last)
  }
  return out + maskPlain(text.slice(last), mask)
}

function maskedLiteral (raw: string, value: string, complete: boolean, mask: string, nesting: number): string {
  const masked = scan(value, mask, nesting + 1)
  return masked === value ? raw : encodeLiteral(masked, complete)
}

/**
 * `text` with the credentials in it masked (see the module comment); the rest kept as it was.
 * A JSON text stays valid JSON. With `inString`, the text starts inside a JSON string literal
 * (the tail of a JSON text cut in a string).
 */
export function maskText (text: string, opts: MaskOptions & { inString?: boolean } = {}): string {
  const mask = opts.mask ?? MASK
  if (opts.inString !== true) return scan(text, mask, 0)
  return scan('"' + text, mask, 0).slice(1)
}

/**
 * The value with every value under a secret-looking key replaced by the mask, at any depth (a
 * boolean, null or empty value stays as it is); with `strings`, credentials inside strings are
 * masked too (maskText). Headers as `[name, value]` pairs are masked by name like object keys.
 * The input is never modified: a part that changes is copied, and a part with nothing to mask is
 * returned as is (the common case costs no allocation).
 */
export function maskValue (value: unknown, opts: MaskOptions & { strings: boolean }, depth = 0): unknown {
  const mask = opts.mask ?? MASK
  if (typeof value === 'string') return opts.strings ? scan(value, mask, 0) : value
  if (value === null || typeof value !== 'object') return value
  if (depth >= MAX_DEPTH) return TOO_DEEP
  if (Array.isArray(value)) {
    if (value.length === 2 && typeof value[0] === 'string' && isSecretName(value[0]) && hidesSecret(value[0], value[1])) return [value[0], mask]
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
    const m = isSecretName(k) && hidesSecret(k, v) ? mask : maskValue(v, opts, depth + 1)
    if (out === undefined && m !== v) {
      out = {}
      for (let j = 0; j < i; j++) out[keys[j] as string] = obj[keys[j] as string]
    }
    if (out !== undefined) out[k] = m
  }
  return out ?? value
}

/** Whether the value under a secret name can hold one: not null, empty, a boolean or a working directory. */
function hidesSecret (name: string, v: unknown): boolean {
  if (v === null || v === undefined || v === '' || typeof v === 'boolean') return false
  return !(typeof v === 'string' && isWorkingDirectory(name, v))
}

/** Every pattern the detector runs, for the test that checks they are linear (no nested quantifier). */
export const PATTERNS: readonly RegExp[] = [
  TOKEN_FORMATS, TOKEN_FORMATS_AT, BEARER, BASIC, BEARER_GATE, BASIC_GATE, SCHEME_GATE, ...URL_PATTERNS, QUERY_PARAM, ASSIGNED_VALUE,
  FLAG_VALUE, MYSQL_LINE, MYSQL_LINES, MYSQL_P, CURL_LINE, CURL_LINES, CURL_USER, COMMAND_WORDS, COMMAND_NAMES, COMMAND_AT_START, CREDENTIAL_WORD,
  TOKEN_RUN, TOKEN_CHAR, SEPARATOR, FILLER_WORD, FLAG_AT_END, MYSQL_P_AT_END, CURL_USER_AT_END, LITERAL_RUN, ASCII_LETTER
]
