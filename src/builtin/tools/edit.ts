import { ToolError } from '../types.js'
import type { BuiltinCallContext, BuiltinTool } from '../tool.js'
import { locateWritable, readFileCapped, readFileCappedAt, release, writeFileAtomicAt } from '../workspace/fd-tree.js'
import type { Location } from '../workspace/fd-tree.js'
import { withQuota } from '../workspace/usage.js'
import { looksBinary, objectSchema, optBool, str } from './args.js'

/** Editing loads the whole file; past this size the tool refuses rather than ballooning memory. */
const EDIT_MAX_BYTES = 10 * 1024 * 1024

export interface EditResult {
  path: string
  replacements: number
}

function count (haystack: string, needle: string): number {
  return haystack.split(needle).length - 1
}

export const editTool: BuiltinTool = {
  name: 'edit',
  description: 'Replace an exact, literal string in a workspace file. old_string must match exactly once ' +
    '(whitespace and indentation included) unless replaceAll is true. No regex: "$&" and similar are inserted literally.',
  inputSchema: objectSchema({
    path: { type: 'string', description: 'File path relative to the workspace root.' },
    old_string: { type: 'string', description: 'Exact text to find (non-empty). Include enough surrounding context to make it unique.' },
    new_string: { type: 'string', description: 'Replacement text (must differ from old_string).' },
    replaceAll: { type: 'boolean', description: 'Replace every occurrence instead of requiring exactly one. Default false.' }
  }, ['path', 'old_string', 'new_string']),
  mutates: () => true,
  async run (args, ctx): Promise<EditResult> {
    const input = str(args, 'path')
    const oldStr = str(args, 'old_string')
    const newStr = str(args, 'new_string')
    const replaceAll = optBool(args, 'replaceAll') ?? false
    if (oldStr.length === 0) throw new ToolError('old_string must not be empty', 'invalid-arguments')
    if (oldStr === newStr) throw new ToolError('old_string and new_string must be different', 'invalid-arguments')
    // Text tools edit text: a NUL would turn the file binary (and is how a model's output gets mangled).
    if (oldStr.includes('\0') || newStr.includes('\0')) throw new ToolError('old_string and new_string must not contain NUL bytes', 'invalid-arguments')

    // Refuse read roots and protected paths before reading anything. The location found is read and written
    // through its directory's fd: one walk from the root for the edit, not three.
    const loc = await locateWritable(ctx.workspace, input)
    try {
      return await editAt(ctx, loc, input, oldStr, newStr, replaceAll)
    } finally {
      release(loc)
    }
  }
}

async function editAt (ctx: BuiltinCallContext, loc: Location, input: string, oldStr: string, newStr: string, replaceAll: boolean): Promise<EditResult> {
  // A symlink (an in-tree one): read where it points, by its path, as before; the write refuses it.
  const { data, rel } = await readFileCappedAt(loc, EDIT_MAX_BYTES, 'edit') ?? await readFileCapped(ctx.workspace, input, EDIT_MAX_BYTES, 'edit')
  const original = decodeText(data, rel)

  let n = count(original, oldStr)
  // A model usually sends '\n'; in a CRLF file, retry with CRLF so the file keeps its line endings.
  if (n === 0 && original.includes('\r\n') && oldStr.includes('\n') && !oldStr.includes('\r')) {
    const crlfOld = oldStr.replace(/\n/g, '\r\n')
    const crlfCount = count(original, crlfOld)
    if (crlfCount > 0) {
      oldStr = crlfOld
      newStr = newStr.replace(/\r?\n/g, '\r\n')
      n = crlfCount
    }
  }
  if (n === 0) {
    throw new ToolError(`old_string not found in file: ${rel}. Ensure whitespace and indentation match exactly.`)
  }
  if (n > 1 && !replaceAll) {
    throw new ToolError(`old_string is not unique — found ${n} occurrences in ${rel}. Provide more context or set replaceAll=true`)
  }
  // The new content is bounded like the file read: a replaceAll of a million one-byte matches by
  // 500 bytes would build a 500 MB string from a 1 MB file (and encode it again to write it).
  const bytes = data.length + (replaceAll ? n : 1) * (Buffer.byteLength(newStr) - Buffer.byteLength(oldStr))
  if (bytes > EDIT_MAX_BYTES) throw new ToolError(`The edit would make ${rel} ${bytes} bytes; edit works on files up to ${EDIT_MAX_BYTES} bytes`)
  // split/join, never String.prototype.replace with a string: '$&', '$1', "$'" must stay literal.
  const parts = original.split(oldStr)
  const updated = replaceAll
    ? parts.join(newStr)
    : (parts[0] ?? '') + newStr + parts.slice(1).join(oldStr)
  await withQuota(ctx.usage, ctx.workspace, async (quota) => await writeFileAtomicAt(ctx.workspace, loc, updated, { ...quota, signal: ctx.signal }))
  return { path: rel, replacements: replaceAll ? n : 1 }
}

function decodeText (buf: Buffer, rel: string): string {
  // The whole file, not just the sniffed head: a NUL anywhere means it is not text to edit.
  if (looksBinary(buf) || buf.includes(0)) throw new ToolError(`File appears to be binary (it contains NUL bytes) and cannot be edited: ${rel}`)
  try {
    // ignoreBOM keeps a leading BOM in the text, so writing back preserves it.
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(buf)
  } catch {
    throw new ToolError(`File is not valid UTF-8 text: ${rel}`)
  }
}
