/**
 * Where the secret detector's patterns can start (bench row 18.1, the CPU of SPEC 18's checks).
 * A pattern that starts with an alternation or a class is tried by the regex engine at every
 * position of the text, about a nanosecond and a half per character; a literal is found by
 * `indexOf` at a fraction of that. So the token formats, whose every match starts with one of a
 * few literals (a prefix), are tried only at the positions these literals give, with a sticky
 * copy of the pattern, in order, each from the end of the last match: the matches are those a
 * global scan finds (every position where a match can start is tried, and the leftmost match
 * from each point is taken), for a few literal scans and one attempt per candidate. Where
 * candidates are too many to pay (a text full of `_`), the caller scans the whole text instead:
 * the result is the same either way.
 */

/** More candidates than one per this many characters: the whole-text scan is cheaper (here and in urls.ts). */
export const DENSE = 64

/**
 * Prefixes of the token formats with a `_` (detector.ts's TOKEN_FORMATS: `ghp_`, `github_pat_`,
 * `sk_live_`, `whsec_`, `npm_`, `hf_`, `dop_v1_`, `shpat_`), the part before the first `_`, by
 * that part's last character: each `_` of a text is checked against the few its neighbour allows.
 */
const BEFORE_UNDERSCORE: ReadonlyArray<readonly string[] | undefined> = (() => {
  const table: string[][] = []
  for (const p of ['sk', 'rk', 'hf', 'ghp', 'gho', 'ghu', 'ghs', 'ghr', 'npm', 'dop', 'whsec', 'shpat', 'shpca', 'shppa', 'shpss', 'github']) {
    const last = p.charCodeAt(p.length - 1)
    ;(table[last] ??= []).push(p)
  }
  return table
})()

/**
 * The token formats without a `_`, each by a literal every match holds at a fixed offset from its
 * start (chosen to begin with a character that is rare in text, as indexOf stops at each
 * occurrence of its first): `sk-`, `glpat-`, `AKIA`/`ASIA`/`ABIA`, `ACCA`, `xox?-`, `xapp-`,
 * `AIza`, `ya29.`, `eyJ`, `pypi-AgE`, `SG.`.
 */
const TOKEN_LITERALS: ReadonlyArray<readonly [string, number]> = [
  ['k-', 1], ['glpat-', 0], ['IA', 2], ['ACCA', 0], ['xox', 0], ['pp-', 2], ['AIza', 0], ['ya29.', 0], ['yJ', 1], ['pypi-', 0], ['SG.', 0]
]

/** Each occurrence of `literal` in `text`, moved back by `offset`, added to `out`; false once `out` is over `max`. */
function addHits (out: number[], text: string, literal: string, offset: number, max: number): boolean {
  for (let at = text.indexOf(literal); at >= 0; at = text.indexOf(literal, at + 1)) {
    if (at >= offset) out.push(at - offset)
    if (out.length > max) return false
  }
  return true
}

/**
 * Every position where one of the token formats can match (a superset), or undefined when there
 * are too many for the sticky attempts to be cheaper than a whole-text scan.
 */
export function tokenFormatStarts (text: string): number[] | undefined {
  const max = text.length / DENSE
  const starts: number[] = []
  for (let u = text.indexOf('_'); u >= 0; u = text.indexOf('_', u + 1)) {
    const prefixes = BEFORE_UNDERSCORE[text.charCodeAt(u - 1)]
    if (prefixes === undefined) continue
    for (const p of prefixes) if (u >= p.length && text.startsWith(p, u - p.length)) starts.push(u - p.length)
    if (starts.length > max) return undefined
  }
  for (const [literal, offset] of TOKEN_LITERALS) if (!addHits(starts, text, literal, offset, max)) return undefined
  return sortedUnique(starts)
}

function sortedUnique (xs: number[]): number[] {
  if (xs.length < 2) return xs
  xs.sort((a, b) => a - b)
  let n = 1
  for (let i = 1; i < xs.length; i++) if (xs[i] !== xs[n - 1]) xs[n++] = xs[i] as number
  xs.length = n
  return xs
}

/**
 * The matches of a sticky pattern tried at `starts` (sorted, every position where it can match):
 * those its global form finds, as `text.matchAll` does (leftmost, each search from the end of the
 * last match). `index` is the position in `text`.
 */
export function matchesFrom (text: string, sticky: RegExp, starts: readonly number[]): RegExpExecArray[] {
  const found: RegExpExecArray[] = []
  let next = 0
  for (const s of starts) {
    if (s < next) continue
    sticky.lastIndex = s
    const m = sticky.exec(text)
    if (m === null) continue
    found.push(m)
    next = s + Math.max(1, m[0].length)
  }
  return found
}

// --- runs of token characters --------------------------------------------------------------------

/** `[A-Za-z0-9+/_~.=-]`, by byte (UTF-8: every other character's bytes are 0x80 or more, none of these). */
const TOKEN_BYTE = new Uint8Array(256)
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/_~.=-') TOKEN_BYTE[c.charCodeAt(0)] = 1

/** A character of a token run (TOKEN_BYTE's, by UTF-16 code unit). */
function isTokenChar (c: number): boolean {
  return c < 128 && TOKEN_BYTE[c] === 1
}

const encoder = new TextEncoder()
/** Characters encoded at a time, at most: the buffer holds their UTF-8 (3 bytes at most each), whatever the text's length. */
const CHUNK = 16_384
const bytes = new Uint8Array(CHUNK * 3)

/**
 * Whether `text` holds a run of `min` token characters: `/[A-Za-z0-9+/_~.=-]{16}/.test`, which
 * reads up to 15 characters at each position where no run starts (150 us on 10 KiB of prose).
 * Its UTF-8 is read once, a byte at a time, counting the current run (a run's characters are
 * ASCII, one byte each; anything else is a byte 0x80 or more, which ends it, as does a surrogate
 * cut between two chunks). Chunks grow from 512 characters: most texts that hold a run hold one early.
 */
export function hasTokenRun (text: string, min: number): boolean {
  if (text.length < min) return false
  let run = 0
  // A short text is read by character: encoding it costs more than that.
  if (text.length <= 128) {
    for (let i = 0; i < text.length; i++) {
      if (isTokenChar(text.charCodeAt(i))) {
        if (++run >= min) return true
      } else {
        run = 0
      }
    }
    return false
  }
  for (let at = 0, size = 512; at < text.length; at += size, size = Math.min(CHUNK, size * 4)) {
    const { written } = encoder.encodeInto(text.slice(at, at + size), bytes)
    for (let i = 0; i < written; i++) {
      if (TOKEN_BYTE[bytes[i] as number] === 1) {
        if (++run >= min) return true
      } else {
        run = 0
      }
    }
  }
  return false
}

const DIGIT = /[0-9]/g
/**
 * More runs with a digit than one per this many characters: reading them costs more than the scan they could spare (10 KiB
 * of code or prose holds 4-85 of them, a numbers-heavy log or listing hundreds, each read ~70 ns).
 */
const DIGIT_RUNS_SPARSE = 128

/**
 * False when `text` holds no run of `min` token characters with a digit and a letter in it: what a random-looking token
 * needs (detector.ts's looksRandom), so the credential-word scan before one (maskNearWords: a pass over the text, 15-30
 * us on 10 KiB of code or prose) runs only where one can be. Code and prose have long runs (identifiers, paths) with no
 * digit, and few digits: each digit is found by the regex engine, the run around it read once (its characters either
 * side of the digit; the search goes on after it). A text of many runs with digits (numbers, logs) answers true after
 * one run per DIGIT_RUNS_SPARSE characters, before those reads cost more than the scan they would spare.
 */
export function mayHoldMixedRun (text: string, min: number): boolean {
  const max = text.length / DIGIT_RUNS_SPARSE
  DIGIT.lastIndex = 0
  for (let runs = 0; DIGIT.test(text); runs++) {
    if (runs > max) return true
    const digit = DIGIT.lastIndex - 1
    let start = digit
    while (start > 0 && isTokenChar(text.charCodeAt(start - 1))) start--
    let end = DIGIT.lastIndex
    while (end < text.length && isTokenChar(text.charCodeAt(end))) end++
    if (end - start >= min) {
      // A letter: within the token characters, `| 0x20` puts only A-Z and a-z in a-z.
      for (let i = start; i < end; i++) {
        const c = text.charCodeAt(i) | 0x20
        if (c >= 97 && c <= 122) return true
      }
    }
    DIGIT.lastIndex = end
  }
  return false
}

// --- command words --------------------------------------------------------------------------------

// Where FLAG_VALUE, CURL_LINE or MYSQL_LINE can match: a long flag, `curl`, a MySQL client's name, after what none of them follows
// (COMMAND_NAMES: the last two, once a flag was found). That character is matched, not looked behind: a pattern that opens with a
// lookbehind (or with `^|`) is tried at every position, these are skipped through by the engine (2.6 us on the bench's 10 KiB, 3.7
// with the lookbehind, 9.5 with `(?:^|[^...])`). They find the same words: each ends in a character the next may not follow, so
// no match holds the character before the next; a word at the very start is COMMAND_AT_START's.
export const COMMAND_WORDS = /[^A-Za-z0-9_-](?:--[A-Za-z]|curl|mysql|mariadb)/g
export const COMMAND_NAMES = /[^A-Za-z0-9_-](?:curl|mysql|mariadb)/g
export const COMMAND_AT_START = /--[A-Za-z]|curl|mysql|mariadb/y

/** Which of detector.ts's FLAG_VALUE, CURL_LINE and MYSQL_LINE can match in `text`: one scan for the three. */
export function commandWords (text: string): { flag: boolean, curl: boolean, mysql: boolean } {
  const found = { flag: false, curl: false, mysql: false }
  COMMAND_AT_START.lastIndex = 0
  const first = COMMAND_AT_START.exec(text)
  let re = COMMAND_WORDS
  re.lastIndex = 0
  for (let m = first ?? re.exec(text); m !== null && !(found.flag && found.curl && found.mysql); m = re.exec(text)) {
    const w = m[0]
    // The word's first character: `-` (`--x`), `c` (curl), `m` (the MySQL clients).
    const c = w.charCodeAt(w.length - 2) === 45 ? 45 : w.endsWith('curl') ? 99 : 109
    if (c === 45 && !found.flag) {
      found.flag = true
      // A text of many flags is not stopped at each one.
      re = COMMAND_NAMES
    } else if (c === 99) found.curl = true
    else if (c !== 45) found.mysql = true
    re.lastIndex = m.index + w.length
  }
  return found
}
