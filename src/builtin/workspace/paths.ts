/**
 * Lexical rules for the paths a caller gives the file tools (docs/ARCHITECTURE.md#workspaces): NUL bytes,
 * lengths, quoting in error messages, and the mapping of filesystem errors to tool errors. The
 * resolution itself is fd-based and lives in fd-tree.ts (docs/ARCHITECTURE.md#fd-layer): nothing here touches the disk.
 * Error messages quote the input as given, never a resolved host path.
 */
import path from 'node:path'
import { ToolError } from '../types.js'
import { errnoOf } from './fd.js'

const MAX_PATH_CHARS = 4096
const MAX_COMPONENT_BYTES = 255

/** Quote the caller's input for an error message, bounded so a 5,000-char path stays readable. */
export function quoteInput (input: string): string {
  const clean = input.replace(/\0/g, '\\0')
  return clean.length > 200 ? `${clean.slice(0, 200)}...` : clean
}

/** True when `child` is `parent` or lies below it (both absolute and normalised). */
export function isInside (parent: string, child: string): boolean {
  const rel = path.relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + path.sep) && rel !== '..' && !path.isAbsolute(rel))
}

/**
 * Whether `input` can only name a directory, as the kernel reads a path: one that ends in `/` (or `/.`) after a
 * name. `path.resolve` drops that ending, so the resolver asks here: a file is never written, removed or read
 * through such a path (open(2) answers EISDIR or ENOTDIR).
 */
export function namesDirectory (input: string): boolean {
  return /(?:[^/]\/+|.\/\.)$/.test(input)
}

/** Validate the raw input: clean ToolErrors instead of Node's ERR_INVALID_ARG_VALUE / ENAMETOOLONG. */
export function checkPathInput (input: unknown, name = 'path'): string {
  if (typeof input !== 'string') throw new ToolError(`${name} must be a string`, 'invalid-arguments')
  if (input.length === 0) throw new ToolError(`${name} must not be empty`, 'invalid-arguments')
  if (input.includes('\0')) throw new ToolError(`${name} contains a NUL byte: ${quoteInput(input)}`, 'invalid-arguments')
  if (input.length > MAX_PATH_CHARS) {
    throw new ToolError(`${name} is too long (${input.length} chars, max ${MAX_PATH_CHARS}): ${quoteInput(input)}`, 'invalid-arguments')
  }
  for (const component of input.split(/[\\/]/)) {
    if (Buffer.byteLength(component) > MAX_COMPONENT_BYTES) {
      throw new ToolError(`${name} has a component longer than ${MAX_COMPONENT_BYTES} bytes: ${quoteInput(input)}`, 'invalid-arguments')
    }
  }
  return input
}

/** Map a filesystem error to a ToolError whose message carries the input, never the host path. */
export function fsError (err: unknown, input: string): ToolError {
  if (err instanceof ToolError) return err
  const code = errnoOf(err)
  const q = quoteInput(input)
  switch (code) {
    case 'ELOOP': return new ToolError(`Too many levels of symbolic links: ${q}`, 'forbidden')
    case 'ENAMETOOLONG': return new ToolError(`Path is too long: ${q}`, 'invalid-arguments')
    case 'EACCES':
    case 'EPERM': return new ToolError(`Permission denied: ${q}`, 'forbidden')
    case 'ENOENT': return new ToolError(`File does not exist: ${q}`)
    case 'EISDIR': return new ToolError(`Path is a directory: ${q}`)
    case 'ENOTDIR': return new ToolError(`Not a directory: ${q}`)
    // A full quota image (docs/ARCHITECTURE.md#workspace-quota), in blocks or inodes, or a full
    // disk: for the tenant the same condition, reported as the quota (WORKSPACE_QUOTA_EXCEEDED).
    case 'ENOSPC':
    case 'EDQUOT': return new ToolError(`No space left for: ${q}`, 'quota')
    default: return new ToolError(`Cannot access path (${code ?? 'unknown error'}): ${q}`)
  }
}
