import type { FileHandle } from 'node:fs/promises'
import { StringDecoder } from 'node:string_decoder'
import { setImmediate as yieldToLoop } from 'node:timers/promises'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../tool.js'
import { tenantIo } from '../workspace/io-gate.js'
import { openForRead, release } from '../workspace/fd-tree.js'
import { BINARY_SNIFF_BYTES, looksBinary, objectSchema, optInt, str } from './args.js'

const CHUNK_BYTES = 64 * 1024

export interface ReadFileResult {
  path: string
  content: string
  startLine: number
  endLine: number
  truncated: boolean
}

/**
 * Streams the file: reading stops after endLine or once maxChars are collected, so a slice of a
 * huge file costs what the slice costs plus counting the lines before it (see skipToLine and the
 * line-offset index). Lines are split on '\n'; a trailing '\r' is dropped.
 */
export const readFileTool: BuiltinTool = {
  name: 'read_file',
  description: 'Read a UTF-8 text file from the workspace (or from an approved read-only root). ' +
    'Returns the requested line range; long output is cut at maxChars and marked truncated. Binary files are refused.',
  inputSchema: objectSchema({
    path: { type: 'string', description: 'File path relative to the workspace root, or an absolute path inside an approved read-only root.' },
    startLine: { type: 'integer', minimum: 1, description: 'First line to return (1-based). Default 1.' },
    endLine: { type: 'integer', minimum: 1, description: 'Last line to return (inclusive). Default: end of file.' },
    maxChars: { type: 'integer', minimum: 1, description: 'Maximum characters of content to return (capped by the server, default 12000).' }
  }, ['path']),
  mutates: () => false,
  async run (args, ctx) {
    const input = str(args, 'path')
    const startLine = optInt(args, 'startLine', 1) ?? 1
    const endLine = optInt(args, 'endLine', 1)
    if (endLine !== undefined && endLine < startLine) throw new ToolError('endLine must be >= startLine', 'invalid-arguments')
    const serverMax = ctx.workspace.limits.readMaxChars
    const limit = Math.min(optInt(args, 'maxChars', 1) ?? serverMax, serverMax)
    // A deep read of a big file scans it; one tenant's many of them at once must not crowd out the others.
    return await tenantIo.run(ctx.workspace.tenant, ctx.signal, async () => {
      const { fh, st, rel } = await openForRead(ctx.workspace, input)
      return await readSlice(fh, st, rel, startLine, endLine ?? Number.POSITIVE_INFINITY, limit, ctx.signal)
    })
  }
}

/**
 * Chunk size while counting lines before startLine: the bytes are only scanned for '\n', never
 * decoded. Counting is a loop on the event loop (one indexOf per line), so a chunk of short lines
 * costs a few milliseconds at this size; bigger chunks would hold everyone else's requests longer.
 */
const SKIP_CHUNK_BYTES = 256 * 1024

/*
 * Line-offset index. startLine is a line number, so the first read at line N of a file has to
 * count the newlines before it (about 0.5 s per GiB here). A reader paging through a big log asks
 * again and again, so the scan leaves a checkpoint every LINE_INDEX_STEP lines (the byte offset
 * where that line starts), and the next read deep in the same file seeks to the nearest checkpoint
 * below its startLine and counts at most LINE_INDEX_STEP lines from there.
 *
 * Bounded: LINE_INDEX_MAX_FILES files (least recently used dropped), LINE_INDEX_MAX_POINTS
 * checkpoints each (8 bytes apiece: 128 KiB per file, 4 MiB in all; lines past the last checkpoint
 * are counted from it). An entry is keyed by device and inode and is valid only while size, mtime
 * and ctime are unchanged; ctime cannot be set by a user, and files changed less than
 * LINE_INDEX_SETTLE_MS before the scan are not indexed, so a rewrite within the same (coarse,
 * millisecond-range) timestamp tick cannot leave a stale entry behind. Offsets are not secret: a
 * caller can only use an entry after opening the same file through the workspace checks, and each
 * use re-checks that the byte before the checkpoint is a '\n'.
 */
const LINE_INDEX_STEP = 65_536
const LINE_INDEX_MAX_POINTS = 16_384
const LINE_INDEX_MAX_FILES = 32
const LINE_INDEX_SETTLE_MS = 1000

interface LineIndex {
  size: number
  mtimeMs: number
  ctimeMs: number
  /** offsets[k]: byte offset of line 1 + k * LINE_INDEX_STEP; contiguous from offsets[0] = 0. */
  offsets: number[]
}

const lineIndexes = new Map<string, LineIndex>()

interface FileId { dev: number, ino: number, size: number, mtimeMs: number, ctimeMs: number }

function indexKey (st: FileId): string {
  return `${st.dev}:${st.ino}`
}

function findIndex (st: FileId): LineIndex | undefined {
  const key = indexKey(st)
  const idx = lineIndexes.get(key)
  if (idx === undefined) return undefined
  if (idx.size !== st.size || idx.mtimeMs !== st.mtimeMs || idx.ctimeMs !== st.ctimeMs) {
    lineIndexes.delete(key)
    return undefined
  }
  // Most recently used last: Map iteration order is insertion order.
  lineIndexes.delete(key)
  lineIndexes.set(key, idx)
  return idx
}

function storeIndex (st: FileId, idx: LineIndex): void {
  const key = indexKey(st)
  lineIndexes.delete(key)
  lineIndexes.set(key, idx)
  while (lineIndexes.size > LINE_INDEX_MAX_FILES) {
    const oldest = lineIndexes.keys().next().value as string
    lineIndexes.delete(oldest)
  }
}

function dropIndex (st: FileId, idx: LineIndex): void {
  if (lineIndexes.get(indexKey(st)) === idx) lineIndexes.delete(indexKey(st))
}

/** For tests: forget every line index. */
export function clearLineIndexCache (): void {
  lineIndexes.clear()
}

/** For tests: the indexed files' checkpoint counts. */
export function lineIndexCacheInfo (): { files: number, checkpoints: number } {
  let checkpoints = 0
  for (const idx of lineIndexes.values()) checkpoints += idx.offsets.length
  return { files: lineIndexes.size, checkpoints }
}

function binaryError (rel: string): ToolError {
  return new ToolError(`File appears to be binary and cannot be read as text: ${rel}`)
}

/**
 * Finds the byte offset where line `start` (> 1) begins by counting 0x0a bytes in raw buffers:
 * a '\n' byte is a newline whatever the surrounding UTF-8 looks like (it never belongs to a
 * multi-byte sequence, and invalid bytes before it decode to U+FFFD without swallowing it), so
 * the count is the one decoding would give, without decoding. Returns undefined when the file has
 * fewer lines. Also performs the binary sniff on the file's first bytes.
 */
async function skipToLine (fh: FileHandle, st: FileId, rel: string, start: number, signal: AbortSignal): Promise<number | undefined> {
  let idx = findIndex(st)
  let line = 1
  let pos = 0
  if (idx !== undefined) {
    const k = Math.min(Math.floor((start - 1) / LINE_INDEX_STEP), idx.offsets.length - 1)
    if (k > 0) {
      const at = idx.offsets[k] as number
      // The checkpoint must sit right after a '\n' (cheap guard against a stale entry).
      const one = Buffer.alloc(1)
      const { bytesRead } = await fh.read(one, 0, 1, at - 1)
      if (bytesRead === 1 && one[0] === 0x0a) {
        line = 1 + k * LINE_INDEX_STEP
        pos = at
      } else {
        dropIndex(st, idx)
        idx = undefined
      }
    }
  }
  // New checkpoints are kept only for a file that has settled (see LINE_INDEX_SETTLE_MS).
  const record = Date.now() - st.ctimeMs >= LINE_INDEX_SETTLE_MS
  const fresh = idx === undefined && record ? { size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs, offsets: [0] } : undefined
  const target = idx ?? fresh
  if (pos > 0) {
    // Seeking past the start: the binary sniff still looks at the file's first bytes.
    const head = Buffer.alloc(BINARY_SNIFF_BYTES)
    const { bytesRead } = await fh.read(head, 0, head.length, 0)
    if (looksBinary(head, bytesRead)) throw binaryError(rel)
    if (line === start) return pos
  }
  const buf = Buffer.allocUnsafe(SKIP_CHUNK_BYTES)
  // Small first reads keep a startLine near the top as cheap as before; long skips use big chunks.
  let want = CHUNK_BYTES
  let found: number | undefined
  while (found === undefined) {
    if (signal.aborted) throw new ToolError('Cancelled', 'tool-error')
    const { bytesRead } = await fh.read(buf, 0, want, pos)
    want = Math.min(want * 2, SKIP_CHUNK_BYTES)
    if (pos === 0 && looksBinary(buf, bytesRead)) throw binaryError(rel)
    if (bytesRead === 0) break
    const view = buf.subarray(0, bytesRead)
    let i = 0
    for (;;) {
      const nl = view.indexOf(0x0a, i)
      if (nl === -1) break
      line++
      i = nl + 1
      if (line === start) { found = pos + i; break }
      if ((line - 1) % LINE_INDEX_STEP === 0 && target !== undefined) {
        const k = (line - 1) / LINE_INDEX_STEP
        // Contiguous only: a concurrent reader of the same file may have added it already.
        if (k === target.offsets.length && k < LINE_INDEX_MAX_POINTS) target.offsets.push(pos + i)
      }
    }
    pos += bytesRead
    // Let other requests in between chunks even when the reads are served from the page cache.
    await yieldToLoop()
  }
  if (fresh !== undefined && fresh.offsets.length > 1) storeIndex(st, fresh)
  return found
}

/** Reads lines start..end from an open regular file; closes `fh`. */
async function readSlice (fh: FileHandle, st: FileId, rel: string, start: number, end: number, limit: number, signal: AbortSignal): Promise<ReadFileResult> {
  try {
    // Lines before startLine are located without decoding (skipToLine); decoding starts right
    // after the last skipped '\n', where a UTF-8 decoder holds no pending bytes, so a fresh
    // decoder there yields exactly what one decoder running from the start would.
    let pos = 0
    let first = true
    if (start > 1) {
      const at = await skipToLine(fh, st, rel, start, signal)
      if (at === undefined) return { path: rel, content: '', startLine: start, endLine: start - 1, truncated: false }
      pos = at
      first = false
    }

    const decoder = new StringDecoder('utf8')
    const buf = Buffer.allocUnsafe(CHUNK_BYTES)
    let lineNo = start
    let partial = ''
    let content = ''
    let lastIncluded = start - 1
    let truncated = false
    let done = false

    // Appends a piece of line `lineNo` to the output; returns false once the char budget is spent.
    const take = (piece: string): boolean => {
      if (lineNo < start || lineNo > end) return true
      const sep = lineNo > start ? '\n' : ''
      const room = limit - content.length
      const add = sep + piece
      lastIncluded = lineNo
      if (add.length > room) {
        let cut = add.slice(0, Math.max(0, room))
        const lastCode = cut.charCodeAt(cut.length - 1)
        if (lastCode >= 0xd800 && lastCode <= 0xdbff) cut = cut.slice(0, -1)
        content += cut
        truncated = true
        return false
      }
      content += add
      return true
    }

    while (!done) {
      if (signal.aborted) throw new ToolError('Cancelled', 'tool-error')
      const { bytesRead } = await fh.read(buf, 0, CHUNK_BYTES, pos)
      pos += bytesRead
      if (first) {
        first = false
        if (looksBinary(buf, bytesRead)) throw binaryError(rel)
      }
      // A short read that reached the size the file had when opened is its end: no second read to be told so (each
      // read is a round trip to libuv's threadpool; most files fit in one chunk).
      const ended = bytesRead === 0 || (bytesRead < CHUNK_BYTES && pos >= st.size)
      const read = bytesRead === 0 ? '' : decoder.write(buf.subarray(0, bytesRead))
      const text = ended ? read + decoder.end() : read
      let from = 0
      for (;;) {
        const nl = text.indexOf('\n', from)
        if (nl === -1) break
        let line = partial + text.slice(from, nl)
        partial = ''
        if (line.endsWith('\r')) line = line.slice(0, -1)
        if (lineNo >= start && !take(line)) { done = true; break }
        lineNo++
        from = nl + 1
        if (lineNo > end) { done = true; break }
      }
      if (done) break
      partial += text.slice(from)
      if (lineNo >= start && lineNo <= end && partial.length > limit - content.length + 1) {
        // A single line longer than the budget (or a giant line of NULs in a sparse file):
        // emit what fits and stop instead of buffering the whole line.
        take(partial)
        truncated = true
        break
      }
      if (ended) {
        if (partial.length > 0) {
          if (partial.endsWith('\r')) partial = partial.slice(0, -1)
          take(partial)
        }
        break
      }
    }
    return { path: rel, content, startLine: start, endLine: lastIncluded, truncated }
  } finally {
    release(fh)
  }
}
