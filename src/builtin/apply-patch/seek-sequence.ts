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

/** Line comparisons one patch may spend placing its chunks in one file (~0.1 s here); past it the patch is refused. */
export const SEEK_BUDGET = 20_000_000

/** The budget of a patch's seeks in one file ran out: the patch is refused, not placed halfway. */
export class SeekBudgetExceeded extends Error {
  constructor () {
    super(`more than ${SEEK_BUDGET} line comparisons`)
    this.name = 'SeekBudgetExceeded'
  }
}

/**
 * The seeks of one patch in one file's lines: each pass's normalised lines made once (on the
 * first seek that needs that pass) and shared by every chunk, and every seek one
 * Knuth-Morris-Pratt scan from the cursor, linear in the lines it passes and the pattern.
 * Comparing at every position (as Codex does) costs lines x pattern comparisons on near misses
 * (a tenant's patch of 10,000 repeated lines against a file of 100,000 held the gateway's event
 * loop for 5 s), and copying the rest of the file per seek cost file x chunks. What is left is
 * bounded by SEEK_BUDGET: a chunk found only by a looser pass first costs a full scan by each
 * stricter one (an exact match later in the file must win), so many such chunks in a large file
 * add up; past the budget `seek` throws SeekBudgetExceeded.
 */
export class LineSearch {
  readonly #lines: readonly string[]
  readonly #keyed: Array<readonly string[] | undefined> = []
  #left = SEEK_BUDGET

  constructor (lines: readonly string[]) {
    this.#lines = lines
  }

  /**
   * Index of the first occurrence of `pattern` at or after `start`, or -1. With `eof`, only a
   * match ending at the last line counts (Codex's code anchors there and, despite its doc
   * comment, does not fall back to searching from `start`). An empty pattern matches at `start`.
   */
  seek (pattern: readonly string[], start: number, eof: boolean): number {
    if (pattern.length === 0) return start
    const lines = this.#lines
    if (pattern.length > lines.length) return -1
    const last = lines.length - pattern.length
    const from = eof ? last : Math.max(0, start)
    if (from > last) return -1
    for (let pass = 0; pass < PASSES.length; pass++) {
      const key = PASSES[pass] as (s: string) => string
      const hay = pass === 0 ? lines : (this.#keyed[pass] ??= lines.map(key))
      const found = this.#indexOfLines(hay, from, pass === 0 ? pattern : pattern.map(key))
      if (found !== -1) return found
    }
    return -1
  }

  /**
   * The first index >= `from` of `pat` (not empty) in `hay`, or -1: Knuth-Morris-Pratt, at most
   * 2 x (lines passed + pat) comparisons, charged to the budget.
   */
  #indexOfLines (hay: readonly string[], from: number, pat: readonly string[]): number {
    const m = pat.length
    this.#charge(m)
    // fail[i]: the length of the longest proper prefix of pat[0..i] that is also its suffix.
    const fail = new Int32Array(m)
    for (let i = 1, k = 0; i < m; i++) {
      while (k > 0 && pat[i] !== pat[k]) k = fail[k - 1] as number
      if (pat[i] === pat[k]) k++
      fail[i] = k
    }
    let i = from
    for (let k = 0; i < hay.length; i++) {
      while (k > 0 && hay[i] !== pat[k]) k = fail[k - 1] as number
      if (hay[i] === pat[k]) k++
      if (k === m) {
        this.#charge(i + 1 - from)
        return i - m + 1
      }
    }
    this.#charge(i - from)
    return -1
  }

  #charge (comparisons: number): void {
    this.#left -= 2 * comparisons
    if (this.#left < 0) throw new SeekBudgetExceeded()
  }
}

/** One seek in `lines` (LineSearch.seek), for a single pattern. */
export function seekSequence (lines: readonly string[], pattern: readonly string[], start: number, eof: boolean): number {
  return new LineSearch(lines).seek(pattern, start, eof)
}
