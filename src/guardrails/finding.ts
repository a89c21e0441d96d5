/**
 * What a guardrail detector reports (SPEC 18): which check found it, what kind of thing it is,
 * and where. Offsets are UTF-16 code units of the scanned string (JavaScript string indices), so
 * `text.slice(start, end)` is the match and `redactFindings` can replace it. A finding never
 * carries the matched text: a `block` names the check, never what it matched.
 */
export interface Finding {
  /** The built-in check that found it. */
  check: 'pii' | 'injection'
  /** The rule or the kind of data (`email`, `card`, `ignore-instructions`, ...). */
  kind: string
  /** First code unit of the match. */
  start: number
  /** One past its last code unit. */
  end: number
}
