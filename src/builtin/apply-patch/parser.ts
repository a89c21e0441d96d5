/**
 * Parser for the Codex apply_patch format (codex-rs/apply-patch/src/parser.rs):
 *
 *   start: begin_patch hunk+ end_patch
 *   hunk: add_hunk | delete_hunk | update_hunk
 *   add_hunk: "*** Add File: " filename LF add_line*
 *   delete_hunk: "*** Delete File: " filename LF
 *   update_hunk: "*** Update File: " filename LF change_move? change+
 *   change_move: "*** Move to: " filename LF
 *   change: ("@@" | "@@ " context) LF (("+" | "-" | " ") line LF | LF)+ ("*** End of File" LF)?
 *
 * Tolerance follows Codex (input trimmed, markers and hunk headers compared trimmed, a
 * `<<'EOF'` heredoc wrapper, the first chunk may omit "@@", an empty line inside a chunk is
 * an empty context line) plus a few harmless extras that cannot change the meaning of a
 * valid patch: blank lines between hunks are skipped, the "*** Move to:" line and file
 * names are trimmed, "*** End of File" may carry trailing spaces, a heredoc opener may be
 * prefixed with `apply_patch `, and "@@" followed only by spaces is a bare "@@".
 * Error texts keep Codex's wording.
 */
import { trim, trimEnd } from './seek-sequence.js'

const BEGIN_PATCH = '*** Begin Patch'
const END_PATCH = '*** End Patch'
const ADD_FILE = '*** Add File: '
const DELETE_FILE = '*** Delete File: '
const UPDATE_FILE = '*** Update File: '
const MOVE_TO = '*** Move to: '
const END_OF_FILE = '*** End of File'
const HEREDOC_OPEN = /^(?:apply_patch\s+)?<<(['"]?)EOF\1$/

/** One `@@` block of an Update File hunk. */
export interface UpdateChunk {
  /** The text after "@@ ": a line located first, the old lines must come after it. */
  changeContext: string | undefined
  /** Context and removed lines, in order: what must be found in the file. */
  oldLines: string[]
  /** Context and added lines, in order: what replaces oldLines. */
  newLines: string[]
  /** "*** End of File" followed the chunk: oldLines must end at the file's last line. */
  isEndOfFile: boolean
  /** Number of "+" lines. */
  added: number
  /** Number of "-" lines. */
  removed: number
}

/** One file operation of a patch. Paths are as written in the patch (not yet resolved). */
export type Hunk =
  | { type: 'add', path: string, contents: string, lineCount: number }
  | { type: 'delete', path: string }
  | { type: 'update', path: string, movePath: string | undefined, chunks: UpdateChunk[] }

export type ParseResult =
  | { ok: true, hunks: Hunk[] }
  | { ok: false, message: string }

class ParseFailure extends Error {}

function invalidPatch (message: string): ParseFailure {
  return new ParseFailure(`invalid patch: ${message}`)
}

function invalidHunk (message: string, lineNumber: number): ParseFailure {
  return new ParseFailure(`invalid hunk at line ${lineNumber}, ${message}`)
}

/** Parses patch text into hunks. Never throws for bad input: the failure is a value. */
export function parsePatch (text: string): ParseResult {
  try {
    return { ok: true, hunks: parseOrThrow(text) }
  } catch (err) {
    if (err instanceof ParseFailure) return { ok: false, message: err.message }
    throw err
  }
}

function parseOrThrow (text: string): Hunk[] {
  // Rust's str::lines(): split on LF, drop a CR before it; trimming first removes any final LF.
  const all = trim(text).split('\n').map((l) => l.endsWith('\r') ? l.slice(0, -1) : l)
  const body = bodyLines(all)
  const hunks: Hunk[] = []
  let i = 0
  while (i < body.length) {
    if (trim(body[i] as string) === '') {
      i++
      continue
    }
    // +2: the begin marker is line 1 and line numbers are 1-based.
    const { hunk, used } = parseHunk(body, i, i + 2)
    hunks.push(hunk)
    i += used
  }
  return hunks
}

/** Checks the envelope and returns the lines between the markers. */
function bodyLines (lines: string[]): string[] {
  const strict = checkEnvelope(lines)
  if (strict === undefined) return lines.slice(1, -1)
  if (lines.length >= 4 && HEREDOC_OPEN.test(trim(lines[0] as string)) && trim(lines[lines.length - 1] as string).endsWith('EOF')) {
    const inner = lines.slice(1, -1)
    const err = checkEnvelope(inner)
    if (err !== undefined) throw err
    return inner.slice(1, -1)
  }
  throw strict
}

function checkEnvelope (lines: string[]): ParseFailure | undefined {
  const first = lines.length > 0 ? trim(lines[0] as string) : undefined
  const last = lines.length > 1 ? trim(lines[lines.length - 1] as string) : undefined
  if (first !== BEGIN_PATCH) return invalidPatch("The first line of the patch must be '*** Begin Patch'")
  if (last !== END_PATCH) return invalidPatch("The last line of the patch must be '*** End Patch'")
  return undefined
}

function parseHunk (lines: string[], at: number, lineNumber: number): { hunk: Hunk, used: number } {
  const header = trim(lines[at] as string)
  if (header.startsWith(ADD_FILE)) {
    let used = 1
    let contents = ''
    while (at + used < lines.length) {
      const line = lines[at + used] as string
      if (!line.startsWith('+')) break
      contents += line.slice(1) + '\n'
      used++
    }
    return { hunk: { type: 'add', path: filename(header, ADD_FILE), contents, lineCount: used - 1 }, used }
  }
  if (header.startsWith(DELETE_FILE)) {
    return { hunk: { type: 'delete', path: filename(header, DELETE_FILE) }, used: 1 }
  }
  if (header.startsWith(UPDATE_FILE)) {
    const path = filename(header, UPDATE_FILE)
    let used = 1
    let movePath: string | undefined
    const maybeMove = lines[at + used]
    if (maybeMove !== undefined && trim(maybeMove).startsWith(MOVE_TO)) {
      movePath = filename(trim(maybeMove), MOVE_TO)
      used++
    }
    const chunks: UpdateChunk[] = []
    while (at + used < lines.length) {
      const line = lines[at + used] as string
      // Blank lines between chunks separate them; inside a chunk they are context (below).
      if (trim(line) === '') {
        used++
        continue
      }
      // Any line starting with '*' ends the hunk: the next header, or junk reported there.
      if (line.startsWith('*')) break
      const { chunk, used: n } = parseChunk(lines, at + used, lineNumber + used, chunks.length === 0)
      chunks.push(chunk)
      used += n
    }
    if (chunks.length === 0) throw invalidHunk(`Update file hunk for path '${path}' is empty`, lineNumber)
    return { hunk: { type: 'update', path, movePath, chunks }, used }
  }
  throw invalidHunk(`'${header}' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'`, lineNumber)
}

function filename (header: string, marker: string): string {
  return trim(header.slice(marker.length))
}

function parseChunk (lines: string[], at: number, lineNumber: number, allowMissingContext: boolean): { chunk: UpdateChunk, used: number } {
  const first = lines[at] as string
  let changeContext: string | undefined
  let start = 1
  if (trimEnd(first) === '@@') {
    changeContext = undefined
  } else if (first.startsWith('@@ ')) {
    const ctx = first.slice(3)
    changeContext = trim(ctx) === '' ? undefined : ctx
  } else {
    if (!allowMissingContext) {
      throw invalidHunk(`Expected update hunk to start with a @@ context marker, got: '${first}'`, lineNumber)
    }
    start = 0
  }
  if (at + start >= lines.length) throw invalidHunk('Update hunk does not contain any lines', lineNumber + 1)

  const chunk: UpdateChunk = { changeContext, oldLines: [], newLines: [], isEndOfFile: false, added: 0, removed: 0 }
  let parsed = 0
  for (let k = at + start; k < lines.length; k++) {
    const line = lines[k] as string
    if (trimEnd(line) === END_OF_FILE) {
      if (parsed === 0) throw invalidHunk('Update hunk does not contain any lines', lineNumber + 1)
      chunk.isEndOfFile = true
      parsed++
      break
    }
    const tag = line[0]
    if (tag === undefined) {
      chunk.oldLines.push('')
      chunk.newLines.push('')
    } else if (tag === ' ') {
      chunk.oldLines.push(line.slice(1))
      chunk.newLines.push(line.slice(1))
    } else if (tag === '+') {
      chunk.newLines.push(line.slice(1))
      chunk.added++
    } else if (tag === '-') {
      chunk.oldLines.push(line.slice(1))
      chunk.removed++
    } else {
      if (parsed === 0) {
        throw invalidHunk(`Unexpected line found in update hunk: '${line}'. Every line should start with ' ' (context line), '+' (added line), or '-' (removed line)`, lineNumber + 1)
      }
      // Anything else starts the next chunk ("@@") or the next hunk ("***").
      break
    }
    parsed++
  }
  return { chunk, used: parsed + start }
}
