/**
 * The `redact` action of a guardrail (SPEC 18): the text with every finding replaced by a mask.
 * Findings of several checks (pii, injection, the secrets masker's spans) may overlap or touch;
 * they are merged first, so a span is masked once and no part of a match survives between two
 * masks. The default mask is the secret detector's, so one redacted text reads one way.
 */

import { MASK } from '../secrets/detector.js'
import type { Finding } from './finding.js'

/**
 * `text` with each finding's span replaced by `mask`; overlapping or touching spans become one.
 * Spans are clamped to the text, empty ones ignored; the findings are not changed.
 */
export function redactFindings (text: string, findings: readonly Finding[], mask: string = MASK): string {
  const spans = findings
    .map((f) => [Math.max(0, f.start), Math.min(text.length, f.end)] as const)
    .filter(([start, end]) => start < end)
    .sort((a, b) => a[0] - b[0])
  let out = ''
  let at = 0
  let open: [number, number] | null = null
  for (const [start, end] of spans) {
    if (open !== null && start <= open[1]) {
      open[1] = Math.max(open[1], end)
      continue
    }
    if (open !== null) {
      out += text.slice(at, open[0]) + mask
      at = open[1]
    }
    open = [start, end]
  }
  if (open !== null) {
    out += text.slice(at, open[0]) + mask
    at = open[1]
  }
  return out + text.slice(at)
}
