/**
 * The one path resolver every file tool uses (SPEC 4 "Path safety").
 *
 * Inputs are checked lexically first (NUL bytes, length, `..` escapes, absolute paths outside
 * the roots), then by real path: symlinks are followed (for paths that do not exist yet, the
 * deepest existing ancestor) and the result must stay inside the real workspace root, or inside
 * a read root for reads. Error messages quote the input as given, never a resolved host path.
 */
import { randomBytes } from 'node:crypto'
import { constants as fsConstants } from 'node:fs'
import { chown, lstat, mkdir, open, readlink, realpath, rename, rmdir, unlink } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import type { Stats } from 'node:fs'
import path from 'node:path'
import { ToolError } from '../types.js'
import type { ReadRoot, Workspace } from '../types.js'

/** A path checked against a workspace. */
export interface ResolvedPath {
  /** Absolute real path to operate on (symlinks already resolved for the existing part). */
  abs: string
  /** Display path: workspace-relative with '/', or the absolute path for read roots. */
  rel: string
  /** True when the path lies in a read root: no tool may change it. */
  readOnly: boolean
}

export const MAX_PATH_CHARS = 4096
export const MAX_COMPONENT_BYTES = 255

/** Segments that are never writable, compared case-folded and NFC-normalised. */
const PROTECTED_SINGLE = new Set(['.ssh', '.aws'])

function fold (segment: string): string {
  return segment.normalize('NFC').toLowerCase()
}

/** Quote the caller's input for an error message, bounded so a 5,000-char path stays readable. */
export function quoteInput (input: string): string {
  const clean = input.replace(/\0/g, '\\0')
  return clean.length > 200 ? `${clean.slice(0, 200)}...` : clean
}

function escapeError (input: string): ToolError {
  return new ToolError(`Path escapes workspace root: ${quoteInput(input)}`, 'forbidden')
}

/** True when `child` is `parent` or lies below it (both absolute and normalised). */
export function isInside (parent: string, child: string): boolean {
  const rel = path.relative(parent, child)
  return rel === '' || (!rel.startsWith('..' + path.sep) && rel !== '..' && !path.isAbsolute(rel))
}

function toPosix (p: string): string {
  return path.sep === '/' ? p : p.split(path.sep).join('/')
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

interface Area {
  /** Real path of the root the input is lexically inside. */
  base: string
  readRoot: ReadRoot | undefined
}

/** Lexical step: where the input points and which root it claims to be in. */
function lexical (ws: Workspace, input: string): { lexAbs: string, area: Area } {
  if (path.isAbsolute(input)) {
    const lexAbs = path.resolve(input)
    if (isInside(ws.root, lexAbs)) return { lexAbs, area: { base: ws.root, readRoot: undefined } }
    for (const rr of ws.readRoots) {
      if (isInside(rr.path, lexAbs)) return { lexAbs, area: { base: rr.path, readRoot: rr } }
    }
    throw escapeError(input)
  }
  const lexAbs = path.resolve(ws.root, input)
  if (!isInside(ws.root, lexAbs)) throw escapeError(input)
  return { lexAbs, area: { base: ws.root, readRoot: undefined } }
}

/** Map a filesystem error to a ToolError whose message carries the input, never the host path. */
export function fsError (err: unknown, input: string): ToolError {
  if (err instanceof ToolError) return err
  const code = (err as NodeJS.ErrnoException | undefined)?.code
  const q = quoteInput(input)
  switch (code) {
    case 'ELOOP': return new ToolError(`Too many levels of symbolic links: ${q}`, 'forbidden')
    case 'ENAMETOOLONG': return new ToolError(`Path is too long: ${q}`, 'invalid-arguments')
    case 'EACCES':
    case 'EPERM': return new ToolError(`Permission denied: ${q}`, 'forbidden')
    case 'ENOENT': return new ToolError(`File does not exist: ${q}`)
    case 'EISDIR': return new ToolError(`Path is a directory: ${q}`)
    case 'ENOTDIR': return new ToolError(`Not a directory: ${q}`)
    case 'ENOSPC':
    case 'EDQUOT': return new ToolError(`No space left for: ${q}`)
    default: return new ToolError(`Cannot access path (${code ?? 'unknown error'}): ${q}`)
  }
}

interface DeepReal {
  /** Real path of the deepest existing ancestor joined with the missing tail. */
  real: string
  exists: boolean
  /** A component of the path is a symlink whose target does not exist. */
  dangling: boolean
}

/**
 * realpath() that tolerates missing tails: for `a/b/c` where only `a` exists, returns
 * realpath(a) + '/b/c'. A dangling symlink on the way is reported, because creating
 * anything "through" it would land wherever it points.
 */
async function deepRealpath (abs: string, input: string): Promise<DeepReal> {
  const tail: string[] = []
  let cur = abs
  let dangling = false
  for (;;) {
    try {
      const r = await realpath(cur)
      return { real: tail.length === 0 ? r : path.join(r, ...tail.reverse()), exists: tail.length === 0, dangling }
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code !== 'ENOENT' && code !== 'ENOTDIR') throw fsError(err, input)
      try {
        if ((await lstat(cur)).isSymbolicLink()) dangling = true
      } catch {
        // Missing entirely: keep walking up.
      }
      const parent = path.dirname(cur)
      if (parent === cur) throw escapeError(input)
      tail.push(path.basename(cur))
      cur = parent
    }
  }
}

function display (ws: Workspace, lexAbs: string, area: Area): string {
  if (area.readRoot !== undefined) return toPosix(lexAbs)
  const rel = path.relative(ws.root, lexAbs)
  return rel === '' ? '.' : toPosix(rel)
}

/** Resolve a path for reading: inside the workspace root or one of the request's read roots. */
export async function resolveReadPath (ws: Workspace, input: string): Promise<ResolvedPath> {
  checkPathInput(input)
  const { lexAbs, area } = lexical(ws, input)
  const deep = await deepRealpath(lexAbs, input)
  if (isInside(area.base, deep.real)) {
    return { abs: deep.real, rel: display(ws, lexAbs, area), readOnly: area.readRoot !== undefined }
  }
  // A link inside the workspace may point into a read root the request exposes: reading is fine.
  if (area.readRoot === undefined) {
    for (const rr of ws.readRoots) {
      if (isInside(rr.path, deep.real)) return { abs: deep.real, rel: display(ws, lexAbs, area), readOnly: true }
    }
  }
  throw escapeError(input)
}

function protectedSegment (rel: string): boolean {
  const segs = rel.split(/[\\/]/).filter((s) => s !== '' && s !== '.').map(fold)
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i] as string
    if (PROTECTED_SINGLE.has(s)) return true
    if (s === '.git' && segs[i + 1] === 'hooks') return true
  }
  return false
}

/**
 * Resolve a path for writing (or deleting). Refuses read roots, protected segments, a final
 * component that is a symlink (even a dangling one), and paths that reach outside the real root.
 */
export async function resolveWritePath (ws: Workspace, input: string): Promise<ResolvedPath> {
  checkPathInput(input)
  const { lexAbs, area } = lexical(ws, input)
  const q = quoteInput(input)
  if (area.readRoot !== undefined) throw new ToolError(`Path is in a read-only root: ${q}`, 'forbidden')
  if (lexAbs === ws.root) throw new ToolError(`Path is a directory: ${q}`)
  const parent = await deepRealpath(path.dirname(lexAbs), input)
  if (!isInside(ws.root, parent.real)) throw escapeError(input)
  if (parent.dangling) throw new ToolError(`Path goes through a dangling symbolic link: ${q}`, 'forbidden')
  const abs = path.join(parent.real, path.basename(lexAbs))
  if (!isInside(ws.root, abs) || abs === ws.root) throw escapeError(input)
  const rel = display(ws, lexAbs, area)
  if (protectedSegment(rel) || protectedSegment(path.relative(ws.root, abs))) {
    throw new ToolError(`Path is protected and cannot be written: ${q}`, 'forbidden')
  }
  try {
    const st = await lstat(abs)
    if (st.isSymbolicLink()) throw new ToolError(`Refusing to write through a symbolic link: ${q}`, 'forbidden')
  } catch (err) {
    if (err instanceof ToolError) throw err
    const code = (err as NodeJS.ErrnoException).code
    if (code !== 'ENOENT' && code !== 'ENOTDIR') throw fsError(err, input)
  }
  return { abs, rel, readOnly: false }
}

async function chownTo (ws: Workspace, target: string | FileHandle): Promise<void> {
  if (ws.owner === undefined) return
  if (typeof target === 'string') await chown(target, ws.owner.uid, ws.owner.gid)
  else await target.chown(ws.owner.uid, ws.owner.gid)
}

/**
 * Create the missing parents of `target` one level at a time. Each created level is checked to be
 * a plain directory whose real path is still inside the root, so a symlink planted concurrently is
 * not followed further. Every directory created is pushed to `made`, outermost first.
 */
async function ensureParents (ws: Workspace, target: ResolvedPath, made: string[]): Promise<void> {
  const dir = path.dirname(target.abs)
  const rel = path.relative(ws.root, dir)
  if (rel === '') return
  let cur = ws.root
  for (const part of rel.split(path.sep)) {
    cur = path.join(cur, part)
    let created = false
    try {
      await mkdir(cur, { mode: 0o755 })
      created = true
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOTDIR') throw new ToolError(`Parent is not a directory: ${target.rel}`)
      if (code !== 'EEXIST') throw fsError(err, target.rel)
    }
    const st = await lstat(cur)
    if (st.isSymbolicLink()) {
      const real = await realpath(cur).catch(() => undefined)
      if (real === undefined || !isInside(ws.root, real)) throw escapeError(target.rel)
    } else if (!st.isDirectory()) {
      throw new ToolError(`Parent is not a directory: ${target.rel}`)
    }
    if (created) {
      made.push(cur)
      await chownTo(ws, cur)
    }
  }
  const realDir = await realpath(dir)
  if (!isInside(ws.root, realDir)) throw escapeError(target.rel)
}

/** On Linux, where an open fd really points: closes the window between the checks and open(). */
async function fdInsideRoot (ws: Workspace, fh: FileHandle): Promise<boolean> {
  if (process.platform !== 'linux') return true
  try {
    const where = await readlink(`/proc/self/fd/${fh.fd}`)
    return isInside(ws.root, where)
  } catch {
    return true
  }
}

const O_NOFOLLOW = fsConstants.O_NOFOLLOW ?? 0

/**
 * Write `data` to `target` atomically: a temp file in the same directory, then rename over the
 * target. With `append`, the existing content is copied into the temp file first. A target with
 * more than one hard link is refused: rename would detach it, but the caller asked to change a
 * file that is also visible elsewhere (possibly outside the workspace).
 */
export async function writeFileAtomic (
  ws: Workspace,
  target: ResolvedPath,
  data: string | Buffer,
  opts: { append?: boolean } = {}
): Promise<{ created: boolean, bytesWritten: number }> {
  const madeDirs: string[] = []
  try {
    return await writeInner(ws, target, data, opts, madeDirs)
  } catch (err) {
    // A failed write leaves nothing behind, not even the folders made for it (a full disk fails
    // the write after they exist). Deepest first; rmdir removes only folders still empty.
    for (const dir of madeDirs.reverse()) await rmdir(dir).catch(() => {})
    throw fsError(err, target.rel)
  }
}

async function writeInner (
  ws: Workspace,
  target: ResolvedPath,
  data: string | Buffer,
  opts: { append?: boolean },
  madeDirs: string[]
): Promise<{ created: boolean, bytesWritten: number }> {
  if (target.readOnly) throw new ToolError(`Path is in a read-only root: ${target.rel}`, 'forbidden')
  if (!isInside(ws.root, target.abs) || target.abs === ws.root) throw escapeError(target.rel)
  await ensureParents(ws, target, madeDirs)

  let existing: { mode: number, uid: number, gid: number } | undefined
  try {
    const st = await lstat(target.abs)
    if (st.isSymbolicLink()) throw new ToolError(`Refusing to write through a symbolic link: ${target.rel}`, 'forbidden')
    if (st.isDirectory()) throw new ToolError(`Path is a directory: ${target.rel}`)
    if (!st.isFile()) throw new ToolError(`Not a regular file: ${target.rel}`)
    if (st.nlink > 1) throw new ToolError(`Refusing to write to a file with multiple hard links: ${target.rel}`, 'forbidden')
    existing = { mode: st.mode & 0o7777, uid: st.uid, gid: st.gid }
  } catch (err) {
    if (err instanceof ToolError) throw err
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw fsError(err, target.rel)
  }

  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data
  const dir = path.dirname(target.abs)
  const tmp = path.join(dir, `.${path.basename(target.abs).slice(0, 200)}.${randomBytes(6).toString('hex')}.tg-tmp`)
  const flags = fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL | O_NOFOLLOW
  const fh = await open(tmp, flags, existing?.mode ?? 0o644)
  let renamed = false
  try {
    if (!(await fdInsideRoot(ws, fh))) throw escapeError(target.rel)
    if (opts.append === true && existing !== undefined) {
      const src = await open(target.abs, fsConstants.O_RDONLY | O_NOFOLLOW)
      try {
        const st = await src.stat()
        if (st.nlink > 1) throw new ToolError(`Refusing to write to a file with multiple hard links: ${target.rel}`, 'forbidden')
        const buf = Buffer.allocUnsafe(256 * 1024)
        for (;;) {
          const { bytesRead } = await src.read(buf, 0, buf.length, null)
          if (bytesRead === 0) break
          await fh.write(buf, 0, bytesRead)
        }
      } finally {
        await src.close()
      }
    }
    if (bytes.length > 0) await fh.write(bytes, 0, bytes.length)
    if (ws.owner !== undefined) {
      await chownTo(ws, fh)
    } else if (existing !== undefined && process.getuid?.() === 0) {
      // Running as root: keep the replaced file's owner instead of silently taking it over.
      await fh.chown(existing.uid, existing.gid)
    }
    if (existing !== undefined) await fh.chmod(existing.mode)
    await fh.close()
    // Re-check just before the rename: the target must not have turned into a link meanwhile.
    const again = await lstat(target.abs).catch(() => undefined)
    if (again?.isSymbolicLink() === true) throw new ToolError(`Refusing to write through a symbolic link: ${target.rel}`, 'forbidden')
    await rename(tmp, target.abs)
    renamed = true
  } finally {
    await fh.close().catch(() => {})
    if (!renamed) await unlink(tmp).catch(() => {})
  }
  return { created: existing === undefined, bytesWritten: bytes.length }
}

/** Delete a file (never a directory) at a path from resolveWritePath. */
export async function removePath (ws: Workspace, target: ResolvedPath): Promise<void> {
  if (target.readOnly) throw new ToolError(`Path is in a read-only root: ${target.rel}`, 'forbidden')
  if (!isInside(ws.root, target.abs) || target.abs === ws.root) throw escapeError(target.rel)
  let st
  try {
    st = await lstat(target.abs)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ToolError(`File does not exist: ${target.rel}`)
    throw fsError(err, target.rel)
  }
  if (st.isDirectory()) throw new ToolError(`Path is a directory: ${target.rel}`)
  // Unlinking a symlink or a hard link removes only the workspace's name, never the outside inode.
  await unlink(target.abs).catch((err: unknown) => { throw fsError(err, target.rel) })
}

/**
 * Opens a resolved path for reading as a regular file, with AI4J's messages for the usual
 * failures. O_NONBLOCK: opening a FIFO must not hang the call; O_NOFOLLOW: `abs` is already
 * real, so a link swapped in since resolution is refused. The caller closes the handle.
 */
export async function openRegularFile (abs: string, rel: string): Promise<{ fh: FileHandle, st: Stats }> {
  let fh: FileHandle
  try {
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
    return { fh, st }
  } catch (err) {
    await fh.close()
    throw err
  }
}
