import { constants as fsConstants } from 'node:fs'
import { open } from 'node:fs/promises'
import { StringDecoder } from 'node:string_decoder'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../types.js'
import { fsError, resolveReadPath } from '../workspace/paths.js'
import { BINARY_SNIFF_BYTES, objectSchema, optInt, str } from './schemas.js'

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
 * huge file costs what the slice costs. Lines are split on '\n'; a trailing '\r' is dropped.
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
    const target = await resolveReadPath(ctx.workspace, input)
    return await readSlice(target.abs, target.rel, startLine, endLine ?? Number.POSITIVE_INFINITY, limit, ctx.signal)
  }
}

async function readSlice (abs: string, rel: string, start: number, end: number, limit: number, signal: AbortSignal): Promise<ReadFileResult> {
  let fh
  try {
    // O_NONBLOCK: opening a FIFO must not hang the call; O_NOFOLLOW: abs is already real.
    fh = await open(abs, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK)
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code
    if (code === 'ENOENT' || code === 'ENOTDIR') throw new ToolError(`File does not exist: ${rel}`)
    throw fsError(err, rel)
  }
  try {
    const st = await fh.stat()
    if (st.isDirectory()) throw new ToolError(`Path is a directory: ${rel}`)
    if (!st.isFile()) throw new ToolError(`Not a regular file: ${rel}`)

    const decoder = new StringDecoder('utf8')
    const buf = Buffer.allocUnsafe(CHUNK_BYTES)
    let first = true
    let lineNo = 1
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
      const { bytesRead } = await fh.read(buf, 0, CHUNK_BYTES, null)
      if (first) {
        first = false
        if (buf.subarray(0, Math.min(bytesRead, BINARY_SNIFF_BYTES)).includes(0)) {
          throw new ToolError(`File appears to be binary and cannot be read as text: ${rel}`)
        }
      }
      const text = bytesRead === 0 ? decoder.end() : decoder.write(buf.subarray(0, bytesRead))
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
      // A line before startLine is only counted, never kept: memory stays flat on long lines.
      if (lineNo < start) partial = ''
      if (bytesRead === 0) {
        if (partial.length > 0) {
          if (partial.endsWith('\r')) partial = partial.slice(0, -1)
          take(partial)
        }
        break
      }
    }
    return { path: rel, content, startLine: start, endLine: lastIncluded, truncated }
  } finally {
    await fh.close()
  }
}
