/**
 * Locating a block of lines inside a file, with Codex's progressively looser passes
 * (codex-rs/apply-patch/src/seek_sequence.rs): exact, trailing whitespace ignored, both
 * ends ignored, then typographic punctuation folded to ASCII. Models often retype
 * context with slightly different whitespace or with ASCII quotes and dashes where the
 * file has Unicode ones; a looser pass only runs when every stricter one failed.
 */

// Rust's `char::is_whitespace` set (Unicode White_Space). JS `trim()` differs slightly
// (it strips U+FEFF and not U+0085), so matching uses this set to behave like Codex.
const WS = '\\t\\n\\v\\f\\r \\u0085\\u00A0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000'
const LEADING_WS = new RegExp(`^[${WS}]+`)
const TRAILING_WS = new RegExp(`[${WS}]+$`)

export function trimEnd (s: string): string {
  return s.replace(TRAILING_WS, '')
}

export function trim (s: string): string {
  return s.replace(LEADING_WS, '').replace(TRAILING_WS, '')
}

const FOLD: Readonly<Record<string, string>> = {
  '\u2010': '-',
  '\u2011': '-',
  '\u2012': '-',
  '\u2013': '-',
  '\u2014': '-',
  '\u2015': '-',
  '\u2212': '-',
  '\u2018': "'",
  '\u2019': "'",
  '\u201A': "'",
  '\u201B': "'",
  '\u201C': '"',
  '\u201D': '"',
  '\u201E': '"',
  '\u201F': '"',
  '\u00A0': ' ',
  '\u2002': ' ',
  '\u2003': ' ',
  '\u2004': ' ',
  '\u2005': ' ',
  '\u2006': ' ',
  '\u2007': ' ',
  '\u2008': ' ',
  '\u2009': ' ',
  '\u200A': ' ',
  '\u202F': ' ',
  '\u205F': ' ',
  '\u3000': ' '
}
const FOLD_RE = /[\u2010-\u2015\u2212\u2018-\u201F\u00A0\u2002-\u200A\u202F\u205F\u3000]/g

/** Trims both ends and folds typographic dashes, quotes and spaces to ASCII. */
export function normalisePunctuation (s: string): string {
  return trim(s).replace(FOLD_RE, (c) => FOLD[c] ?? c)
}

const PASSES: ReadonlyArray<(s: string) => string> = [
  (s) => s,
  trimEnd,
  trim,
  normalisePunctuation
]

/**
 * Index of the first occurrence of `pattern` in `lines` at or after `start`, or -1.
 * With `eof`, only a match ending at the last line counts (Codex's code anchors there and,
 * despite its doc comment, does not fall back to searching from `start`).
 * An empty pattern matches at `start`.
 */
export function seekSequence (lines: readonly string[], pattern: readonly string[], start: number, eof: boolean): number {
  if (pattern.length === 0) return start
  if (pattern.length > lines.length) return -1
  const last = lines.length - pattern.length
  const from = eof ? last : Math.max(0, start)
  if (from > last) return -1
  for (const key of PASSES) {
    // Each pass maps the searched window once instead of once per comparison.
    const hay = lines.slice(from).map(key)
    const pat = pattern.map(key)
    for (let i = 0; i + from <= last; i++) {
      let j = 0
      while (j < pat.length && hay[i + j] === pat[j]) j++
      if (j === pat.length) return i + from
    }
  }
  return -1
}
