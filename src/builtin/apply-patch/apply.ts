/**
 * Applying the chunks of one Update File hunk to a file's text, in memory.
 *
 * Location follows Codex (codex-rs/apply-patch/src/lib.rs, compute_replacements): chunks
 * are searched from a cursor that only moves forward, an "@@ ctx" line is located first,
 * a chunk without old lines is appended at the end of the file, and a chunk whose old
 * lines end with an empty line is retried without it (that line usually stands for the
 * file's final newline).
 *
 * Unlike Codex, the file's own line endings are kept: lines are matched without their
 * CR, untouched lines keep their exact ending, new lines get the file's dominant ending,
 * and a file that ended without a final newline still does (Codex always adds one). A
 * UTF-8 byte order mark is kept too.
 */
import type { UpdateChunk } from './parser.js'
import { LineSearch, SEEK_BUDGET, SeekBudgetExceeded } from './seek-sequence.js'

export type TextResult =
  | { ok: true, content: string }
  | { ok: false, message: string }

interface Line {
  text: string
  /** The line's terminator as found in the file; '' for a last line without one or a new line. */
  eol: string
}

interface Replacement {
  start: number
  oldLength: number
  newLines: readonly string[]
}

const BOM = '\uFEFF'

/** Splits text into lines with their terminators; a final newline yields no extra empty line. */
function splitLines (text: string): { lines: Line[], endsWithNewline: boolean, eol: string } {
  if (text === '') return { lines: [], endsWithNewline: true, eol: '\n' }
  const parts = text.split('\n')
  const endsWithNewline = parts[parts.length - 1] === ''
  if (endsWithNewline) parts.pop()
  let crlf = 0
  let lf = 0
  const lines = parts.map((part, i): Line => {
    if (i === parts.length - 1 && !endsWithNewline) return { text: part, eol: '' }
    if (part.endsWith('\r')) {
      crlf++
      return { text: part.slice(0, -1), eol: '\r\n' }
    }
    lf++
    return { text: part, eol: '\n' }
  })
  return { lines, endsWithNewline, eol: crlf > lf ? '\r\n' : '\n' }
}

/**
 * Where each chunk goes, as Codex computes it. `path` is only used in error messages
 * (workspace-relative, so nothing outside the workspace is ever named).
 */
function computeReplacements (
  lines: readonly string[],
  chunks: readonly UpdateChunk[],
  path: string
): { ok: true, replacements: Replacement[] } | { ok: false, message: string } {
  try {
    return placeChunks(new LineSearch(lines), lines, chunks, path)
  } catch (err) {
    if (!(err instanceof SeekBudgetExceeded)) throw err
    return { ok: false, message: `The patch takes more than ${SEEK_BUDGET} line comparisons to place in ${path} (${lines.length} lines): split it, or give exact context lines` }
  }
}

function placeChunks (
  search: LineSearch,
  lines: readonly string[],
  chunks: readonly UpdateChunk[],
  path: string
): { ok: true, replacements: Replacement[] } | { ok: false, message: string } {
  const replacements: Replacement[] = []
  let cursor = 0
  for (const chunk of chunks) {
    if (chunk.changeContext !== undefined) {
      const idx = search.seek([chunk.changeContext], cursor, false)
      if (idx < 0) return { ok: false, message: `Failed to find context '${chunk.changeContext}' in ${path}` }
      cursor = idx + 1
    }
    if (chunk.oldLines.length === 0) {
      // Before a final blank line, as Codex does, so an appended block stays above it.
      const at = lines.length > 0 && lines[lines.length - 1] === '' ? lines.length - 1 : lines.length
      replacements.push({ start: at, oldLength: 0, newLines: chunk.newLines })
      continue
    }
    let pattern: readonly string[] = chunk.oldLines
    let newLines: readonly string[] = chunk.newLines
    let found = search.seek(pattern, cursor, chunk.isEndOfFile)
    if (found < 0 && pattern[pattern.length - 1] === '') {
      pattern = pattern.slice(0, -1)
      if (newLines[newLines.length - 1] === '') newLines = newLines.slice(0, -1)
      found = search.seek(pattern, cursor, chunk.isEndOfFile)
    }
    if (found < 0) {
      return { ok: false, message: `Failed to find expected lines in ${path}:\n${chunk.oldLines.join('\n')}` }
    }
    replacements.push({ start: found, oldLength: pattern.length, newLines })
    cursor = found + pattern.length
  }
  // Stable sort: equal starts keep patch order, as in Codex.
  replacements.sort((a, b) => a.start - b.start)
  for (let i = 1; i < replacements.length; i++) {
    const prev = replacements[i - 1] as Replacement
    const cur = replacements[i] as Replacement
    // Only reachable through "*** End of File" (which ignores the cursor); Codex would
    // splice the regions into each other, we refuse instead.
    if (cur.start < prev.start + prev.oldLength) {
      return { ok: false, message: `Chunks overlap in ${path}: two chunks change the same lines` }
    }
  }
  return { ok: true, replacements }
}

/** The new content of a file after applying `chunks` to `original`. */
export function applyChunks (original: string, chunks: readonly UpdateChunk[], path: string): TextResult {
  const bom = original.startsWith(BOM) ? BOM : ''
  const { lines, endsWithNewline, eol } = splitLines(bom === '' ? original : original.slice(1))
  const computed = computeReplacements(lines.map((l) => l.text), chunks, path)
  if (!computed.ok) return computed

  const out: Line[] = []
  let next = 0
  for (const r of computed.replacements) {
    for (; next < r.start; next++) out.push(lines[next] as Line)
    for (const text of r.newLines) out.push({ text, eol: '' })
    next = r.start + r.oldLength
  }
  for (; next < lines.length; next++) out.push(lines[next] as Line)

  let content = bom
  for (let i = 0; i < out.length; i++) {
    const line = out[i] as Line
    const isLast = i === out.length - 1
    const ending = isLast && !endsWithNewline ? '' : (line.eol === '' ? eol : line.eol)
    content += line.text + ending
  }
  return { ok: true, content }
}
