/**
 * Scanning a text only where a pattern can match (the CPU bound of SPEC 18's checks, bench row
 * 18.1). A detector's exact patterns are slow where they start with a character class or a
 * lookbehind: the regex engine tries them at every position. Most texts hold no match at all, so
 * a cheap pattern (the hint: a literal, or a short run every match must contain) is scanned for
 * first, and the exact pattern runs only in windows around the hint's hits, on a slice of the
 * text with the context it reads. The matches are the same as a scan of the whole text:
 *
 * - every match of the exact pattern contains a match of the hint, and is at most `maxMatch`
 *   characters long (its quantifiers are bounded); the hint's matches are at most `maxHint`;
 * - the hint's scan (leftmost, non-overlapping) then has a hit starting at most `maxHint - 1`
 *   before any such occurrence, so a match starting at `s` has a hit `h` with
 *   `s - maxMatch < h < s + maxHint` (or `s - lead <= h` where a match's hint comes at most `lead`
 *   after its start): outside those windows no match starts;
 * - within a window the pattern runs on a slice holding `behind` characters before (its
 *   lookbehind, `^`, `\b`) and `maxMatch + ahead` after (its lookahead, `$`, `\b`), where every
 *   attempt reads what it reads in the whole text; a scan goes on from the end of the last match
 *   (as a global scan does), and nothing starts between two windows.
 */

/** How far an exact pattern's matches and the context it reads reach (see the module comment). */
export interface Reach {
  /** The longest match of the exact pattern. */
  maxMatch: number
  /** The longest match of the hint. */
  maxHint: number
  /** How far before its hint a match may start, when less than `maxMatch - 1` (an e-mail's local part before its `@`). */
  lead?: number
  /** Characters read before a match's start (lookbehind, `^` with the `m` flag, `\b`). */
  behind: number
  /** Characters read after a match's end (lookahead, `$`, `\b`). */
  ahead: number
}

/** Where a global `hint` matches in `text` (leftmost, non-overlapping, as a global scan finds them). */
export function hintHits (text: string, hint: RegExp): number[] {
  const hits: number[] = []
  hint.lastIndex = 0
  for (let m = hint.exec(text); m !== null; m = hint.exec(text)) {
    hits.push(m.index)
    if (m[0].length === 0) hint.lastIndex++
  }
  return hits
}

/** Where a literal occurs in `text` (each occurrence, as hints; a literal's hits are exact). */
export function literalHits (text: string, literal: string): number[] {
  const hits: number[] = []
  for (let at = text.indexOf(literal); at >= 0; at = text.indexOf(literal, at + literal.length)) hits.push(at)
  return hits
}

/**
 * The matches of the global pattern `re` in `text`, as `text.matchAll(re)` finds them, given the
 * hits of a hint every match contains (sorted) and how far matches reach. `index` is the position
 * in `text`; the arrays' `input` is the slice they were found in.
 */
export function matchesNear (text: string, re: RegExp, hits: readonly number[], reach: Reach): RegExpExecArray[] {
  const found: RegExpExecArray[] = []
  let lastEnd = 0
  let i = 0
  while (i < hits.length) {
    // The window of match starts of this hit, grown by every hit whose window starts before a match of it could end.
    const lead = reach.lead ?? reach.maxMatch - 1
    const from = Math.max(lastEnd, (hits[i] as number) - lead)
    let to = (hits[i] as number) + reach.maxHint - 1
    for (i++; i < hits.length && (hits[i] as number) - lead <= to + reach.maxMatch; i++) to = (hits[i] as number) + reach.maxHint - 1
    if (to < from) continue
    const sliceStart = Math.max(0, from - reach.behind)
    const slice = text.slice(sliceStart, to + reach.maxMatch + reach.ahead + 1)
    re.lastIndex = from - sliceStart
    for (let m = re.exec(slice); m !== null; m = re.exec(slice)) {
      const at = m.index + sliceStart
      if (at > to) break
      m.index = at
      found.push(m)
      lastEnd = at + m[0].length
      if (m[0].length === 0) re.lastIndex++
    }
  }
  return found
}

/** `text` with each of `matches` (in order, not overlapping; `index` in `text`) replaced by what `fn` makes of it, the rest kept. */
export function replaceMatches (text: string, matches: Iterable<RegExpMatchArray>, fn: (m: RegExpMatchArray) => string): string {
  let out = ''
  let from = 0
  for (const m of matches) {
    const at = m.index as number
    out += text.slice(from, at) + fn(m)
    from = at + m[0].length
  }
  return from === 0 ? text : out + text.slice(from)
}
