/**
 * File operations on a tenant's tree that no directory entry can redirect (docs/ARCHITECTURE.md#fd-layer):
 * resolving a caller's path, reading, writing, deleting, renaming.
 *
 * A tenant controls every entry below its workspace root and can swap any of them for a symlink at
 * any moment (a `renameat2(RENAME_EXCHANGE)` loop in a background process). Checking a path and
 * then using it by name is therefore always a race, and the gateway runs as root. So nothing here
 * ever hands a multi-component path to the kernel: the root is opened once, and every further
 * component is opened relative to the directory fd of the one before it, with `O_NOFOLLOW` (fd.ts
 * `at`: Node has no `openat`). Creating, renaming, deleting and stat-ing work the same way on
 * (directory fd, name) pairs, and `rename`, `unlink`, `mkdir`, `rmdir`, `lstat` and `readlink`
 * never follow a final symlink.
 *
 * Symlinks inside the tree are still honoured the way `openat2(RESOLVE_BENEATH)` honours them: we
 * read the link and walk its target ourselves, component by component, from the directory the link
 * is in (relative targets, `..` never above the root) or from a root (absolute targets that point
 * into the workspace or a read root); anything else is an escape. A swap during the walk can only
 * make the walk fail or land on another entry beneath the same root.
 */
import { randomBytes } from 'node:crypto'
import { constants as fsConstants } from 'node:fs'
import type { Stats } from 'node:fs'
import { lstat, mkdir, open, readlink, rename, rmdir, unlink } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import path from 'node:path'
import { ToolError } from '../types.js'
import type { ReadRoot, Workspace } from '../types.js'
import { at, CREATE_FLAGS, DIR_FLAGS, errnoOf, READ_FLAGS } from './fd.js'
import { checkPathInput, fsError, isInside, namesDirectory, quoteInput } from './paths.js'

const { O_NOFOLLOW } = fsConstants
/** Like the kernel's MAXSYMLINKS. */
const MAX_SYMLINK_HOPS = 40

/** What a request is about to do with a location. */
export type Intent =
  /** Read: the final component may be an in-tree symlink (followed, beneath a root). */
  | 'read'
  /** Read the final entry as it is (not followed; its opener refuses a symlink with O_NOFOLLOW): openForRead's first try. */
  | 'read-entry'
  /** Change or delete an entry: the final component is taken as it is (a symlink is not followed). */
  | 'write'
  /** Like 'write', and missing parent directories are created (owned by the workspace's owner). */
  | 'create'

/**
 * One entry beneath a root: its parent directory held open, and its name in it. Valid until
 * `close()`; every operation on it goes through `at(parent, name)`.
 */
export interface Location {
  parent: FileHandle
  /** Final component; '' when the location is the root itself. */
  name: string
  /** Display path: the caller's input made workspace-relative with '/', or absolute for read roots. */
  rel: string
  /** In a read root: nothing may change it. */
  readOnly: boolean
  /** The real components below the root, symlinks resolved (for the protected-path rules). */
  chain: readonly string[]
  /** Directories this resolution created, outermost first, as chains below the workspace root. */
  made: ReadonlyArray<readonly string[]>
  close: () => Promise<void>
}

interface Area { base: string, readRoot: ReadRoot | undefined }

function escapeError (input: string): ToolError {
  return new ToolError(`Path escapes workspace root: ${quoteInput(input)}`, 'forbidden')
}

function readOnlyError (input: string): ToolError {
  return new ToolError(`Path is in a read-only root: ${quoteInput(input)}`, 'forbidden')
}

/** Which root an absolute path lies in (the workspace first), or undefined. */
function areaOf (ws: Workspace, abs: string): Area | undefined {
  if (isInside(ws.root, abs)) return { base: ws.root, readRoot: undefined }
  for (const rr of ws.readRoots) if (isInside(rr.path, abs)) return { base: rr.path, readRoot: rr }
  return undefined
}

function components (base: string, abs: string): string[] {
  const rel = path.relative(base, abs)
  return rel === '' ? [] : rel.split(path.sep)
}

function display (ws: Workspace, lexAbs: string, area: Area): string {
  if (area.readRoot !== undefined) return lexAbs
  const rel = path.relative(ws.root, lexAbs)
  return rel === '' ? '.' : rel.split(path.sep).join('/')
}

/** Segments that are never writable, compared case-folded and NFC-normalised. */
const PROTECTED_SINGLE = new Set(['.ssh', '.aws'])

export function isProtected (segments: readonly string[]): boolean {
  const segs = segments.filter((s) => s !== '' && s !== '.').map((s) => s.normalize('NFC').toLowerCase())
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i] as string
    if (PROTECTED_SINGLE.has(s)) return true
    if (s === '.git' && segs[i + 1] === 'hooks') return true
  }
  return false
}

/**
 * Closes an fd (or a Location's) its user is done with, without waiting: each close is a round trip to libuv's threadpool,
 * and a walk waited for one per component, a read for one more before it answered. Only for fds whose close
 * decides nothing (a directory walked through, a file read); an fd written to is closed and waited for.
 */
export function release (fh: { close: () => Promise<unknown> }): void {
  fh.close().catch(() => {})
}

/**
 * Opens a root directory. Roots are trusted paths: the workspace root's parent belongs to the
 * gateway (a tenant cannot rename or replace it; inside the sandbox it is a mount point), read
 * roots are the operator's.
 */
async function openBase (base: string): Promise<FileHandle> {
  return await open(base, DIR_FLAGS)
}

/** Walks `chain` down from the root with no symlink followed (used after a `..` in a link target). */
async function openChain (base: string, chain: readonly string[]): Promise<FileHandle> {
  let dir = await openBase(base)
  try {
    for (const c of chain) {
      const next = await open(at(dir, c), DIR_FLAGS)
      release(dir)
      dir = next
    }
    return dir
  } catch (err) {
    await dir.close().catch(() => {})
    throw err
  }
}

/** The target of `name` in `dir` when it is a symlink, else undefined. */
async function linkTarget (dir: FileHandle, name: string): Promise<string | undefined> {
  try {
    return await readlink(at(dir, name))
  } catch (err) {
    if (errnoOf(err) === 'EINVAL' || errnoOf(err) === 'ENOENT') return undefined
    throw err
  }
}

/**
 * Resolves `input` beneath the workspace (or a read root) into an open parent directory and a
 * final name, following in-tree symlinks ourselves. See the module comment.
 */
export async function locate (ws: Workspace, input: string, intent: Intent): Promise<Location> {
  checkPathInput(input)
  const lexAbs = path.isAbsolute(input) ? path.resolve(input) : path.resolve(ws.root, input)
  let area = areaOf(ws, lexAbs)
  // Relative inputs are resolved lexically first (`a/../b` is `b`), as before: never above the root.
  if (area === undefined || (!path.isAbsolute(input) && area.readRoot !== undefined)) throw escapeError(input)
  const reads = intent === 'read' || intent === 'read-entry'
  if (!reads && area.readRoot !== undefined) throw readOnlyError(input)
  // Every writer here writes, renames or removes a file: `newdir/` made a file named newdir, `x.txt/` overwrote x.txt.
  if (!reads && namesDirectory(input)) {
    throw new ToolError(`Path names a directory (it ends in '/'), not a file: ${quoteInput(input)}; a file's folders are made as needed`, 'invalid-arguments')
  }
  const rel = display(ws, lexAbs, area)

  let todo = components(area.base, lexAbs)
  let chain: string[] = []
  const made: string[][] = []
  let hops = 0
  let dir = await openBase(area.base)

  // Replaces the walk's position with where a symlink's target points.
  const follow = async (target: string, rest: string[]): Promise<void> => {
    if (++hops > MAX_SYMLINK_HOPS) throw new ToolError(`Too many levels of symbolic links: ${quoteInput(input)}`, 'forbidden')
    if (path.isAbsolute(target)) {
      const abs = path.resolve(target)
      const next = areaOf(ws, abs)
      if (next === undefined) throw escapeError(input)
      if (!reads && next.readRoot !== undefined) throw readOnlyError(input)
      release(dir)
      dir = await openBase(next.base)
      area = next
      chain = []
      todo = [...components(next.base, abs), ...rest]
    } else {
      todo = [...target.split('/'), ...rest]
    }
  }

  try {
    for (;;) {
      const c = todo.shift()
      if (c === undefined) {
        // The root itself (or a link to it).
        return location(dir, '', rel, area, chain, made)
      }
      if (c === '' || c === '.') continue
      if (c === '..') {
        if (chain.length === 0) throw escapeError(input)
        chain.pop()
        release(dir)
        dir = await openChain(area.base, chain)
        continue
      }
      if (todo.every((t) => t === '' || t === '.')) {
        // The final component. Reads follow a symlink here too; writes act on the entry itself.
        if (intent === 'read') {
          const target = await linkTarget(dir, c)
          if (target !== undefined) { await follow(target, []); continue }
        }
        return location(dir, c, rel, area, [...chain, c], made)
      }
      try {
        const next = await open(at(dir, c), DIR_FLAGS)
        release(dir)
        dir = next
        chain.push(c)
      } catch (err) {
        const e = errnoOf(err)
        if (e === 'ELOOP' || e === 'ENOTDIR') {
          const target = await linkTarget(dir, c)
          if (target === undefined) throw new ToolError(`Not a directory: ${quoteInput(input)}`)
          await follow(target, todo)
          continue
        }
        if (e === 'ENOENT' && intent === 'create') {
          await makeDir(ws, dir, c)
          made.push([...chain, c])
          todo.unshift(c)
          continue
        }
        if (e === 'ENOENT') throw new ToolError(`File does not exist: ${quoteInput(input)}`)
        throw err
      }
    }
  } catch (err) {
    await dir.close().catch(() => {})
    throw fsError(err, input)
  }
}

function location (dir: FileHandle, name: string, rel: string, area: Area, chain: string[], made: string[][]): Location {
  let closed = false
  return {
    parent: dir,
    name,
    rel,
    readOnly: area.readRoot !== undefined,
    chain,
    made,
    close: async () => {
      if (closed) return
      closed = true
      await dir.close().catch(() => {})
    }
  }
}

/** mkdir of one level, owned by the workspace owner. EEXIST is fine: the caller opens it again. */
async function makeDir (ws: Workspace, dir: FileHandle, name: string): Promise<void> {
  try {
    await mkdir(at(dir, name), { mode: 0o755 })
  } catch (err) {
    if (errnoOf(err) === 'EEXIST') return
    throw err
  }
  if (ws.owner === undefined) return
  // Opened without following: if the new directory was swapped for a link already, chown nothing.
  const fh = await open(at(dir, name), DIR_FLAGS)
  try {
    await fh.chown(ws.owner.uid, ws.owner.gid)
  } finally {
    await fh.close()
  }
}

/** Removes the directories a failed write created, deepest first; only ones still empty go. */
async function removeMade (ws: Workspace, made: ReadonlyArray<readonly string[]>): Promise<void> {
  for (const chain of [...made].reverse()) {
    const parentChain = chain.slice(0, -1)
    const name = chain[chain.length - 1] as string
    try {
      const parent = await openChain(ws.root, parentChain)
      try {
        await rmdir(at(parent, name))
      } finally {
        await parent.close()
      }
    } catch {
      // Best effort: a folder someone filled meanwhile stays.
    }
  }
}

/**
 * The protected rule on the input as written, before anything is resolved or created: a missing
 * `.git/hooks` must be refused as protected, not reported missing or created.
 */
function checkProtectedInput (ws: Workspace, input: string): void {
  checkPathInput(input)
  const lexAbs = path.isAbsolute(input) ? path.resolve(input) : path.resolve(ws.root, input)
  if (isProtected(path.relative(ws.root, lexAbs).split(path.sep))) {
    throw new ToolError(`Path is protected and cannot be written: ${quoteInput(input)}`, 'forbidden')
  }
}

/** Refusals shared by every writer: read roots, protected segments, the root itself. */
function checkWritable (loc: Location, lexicalRel: string): void {
  if (loc.readOnly) throw readOnlyError(loc.rel)
  if (loc.name === '') throw new ToolError(`Path is a directory: ${loc.rel}`)
  if (isProtected(lexicalRel.split('/')) || isProtected(loc.chain)) {
    throw new ToolError(`Path is protected and cannot be written: ${loc.rel}`, 'forbidden')
  }
}

/** A regular file opened for reading, checked on the fd. */
export interface OpenedFile {
  fh: FileHandle
  st: Stats
  rel: string
  readOnly: boolean
  /** Its real components below the root (symlinks resolved); [] for the root itself. */
  chain: readonly string[]
}

/**
 * Opens `name` in `dir` as a regular file for reading, or undefined when it is not one (a symlink
 * swapped in, a FIFO, a directory, gone). Used by walkers.
 */
export async function openFileIn (dir: FileHandle, name: string): Promise<{ fh: FileHandle, st: Stats } | undefined> {
  let fh: FileHandle
  try {
    fh = await open(at(dir, name), READ_FLAGS)
  } catch {
    return undefined
  }
  try {
    const st = await fh.stat()
    if (st.isFile()) return { fh, st }
  } catch {}
  await fh.close().catch(() => {})
  return undefined
}

/**
 * Opens a file for reading with AI4J's messages for the usual failures (docs/ARCHITECTURE.md#workspaces). The caller
 * closes `fh`. `allowDirectory` returns a directory too (glob and grep bases).
 */
export async function openForRead (ws: Workspace, input: string, opts: { allowDirectory?: boolean } = {}): Promise<OpenedFile> {
  // The final entry is opened as it is first: a regular file (nearly every read) needs no readlink. A
  // symlink there fails that open (ELOOP, O_NOFOLLOW) and is then followed beneath its root by the
  // read walk, and its target opened the same way.
  let loc = await locate(ws, input, 'read-entry')
  try {
    let fh = await openEntry(loc, true)
    if (fh === undefined) {
      release(loc)
      loc = await locate(ws, input, 'read')
      fh = await openEntry(loc, false)
    }
    try {
      const st = await fh.stat()
      if (!st.isDirectory() && namesDirectory(input)) throw new ToolError(`Not a directory: ${quoteInput(input)}`)
      checkOpened(st, loc.rel, opts.allowDirectory === true)
      return { fh, st, rel: loc.rel, readOnly: loc.readOnly, chain: loc.chain }
    } catch (err) {
      await fh.close()
      throw err
    }
  } finally {
    release(loc)
  }
}

/** Opens a located entry for reading; undefined for a symlink when `linkIsMiss` (the caller follows it). */
async function openEntry (loc: Location, linkIsMiss: true): Promise<FileHandle | undefined>
async function openEntry (loc: Location, linkIsMiss: false): Promise<FileHandle>
async function openEntry (loc: Location, linkIsMiss: boolean): Promise<FileHandle | undefined> {
  try {
    // The root itself: /proc/self/fd/N is a magic link to the open directory, so it is reopened
    // by following it (O_NOFOLLOW would refuse the magic link), which can reach nothing else.
    return await open(at(loc.parent, loc.name), loc.name === '' ? READ_FLAGS & ~O_NOFOLLOW : READ_FLAGS)
  } catch (err) {
    if (linkIsMiss && errnoOf(err) === 'ELOOP') return undefined
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') throw new ToolError(`File does not exist: ${loc.rel}`)
    throw fsError(err, loc.rel)
  }
}

/** Reads a whole regular file, refusing one larger than `maxBytes` (checked on the fd). */
export async function readFileCapped (ws: Workspace, input: string, maxBytes: number, what = 'read'): Promise<{ data: Buffer, rel: string }> {
  const { fh, st, rel } = await openForRead(ws, input)
  return await readOpened(fh, st, rel, maxBytes, what)
}

/** readFileCapped of a writable location's entry (locateWritable) without a second walk; undefined for a symlink (read it by path). */
export async function readFileCappedAt (loc: Location, maxBytes: number, what = 'read'): Promise<{ data: Buffer, rel: string } | undefined> {
  const fh = await openEntry(loc, true)
  if (fh === undefined) return undefined
  const st = await fh.stat().catch((err: unknown) => { release(fh); throw fsError(err, loc.rel) })
  if (!st.isFile()) {
    release(fh)
    checkOpened(st, loc.rel, false)
  }
  return await readOpened(fh, st, loc.rel, maxBytes, what)
}

/** Refuses an opened entry that is not a regular file (or a directory, when `allowDirectory`), in AI4J's words. */
function checkOpened (st: Stats, rel: string, allowDirectory: boolean): void {
  if (st.isDirectory() && !allowDirectory) throw new ToolError(`Path is a directory: ${rel}`)
  if (!st.isFile() && !st.isDirectory()) throw new ToolError(`Not a regular file: ${rel}`)
}

/** Reads an opened regular file whole, at most `maxBytes`; closes it. */
async function readOpened (fh: FileHandle, st: Stats, rel: string, maxBytes: number, what: string): Promise<{ data: Buffer, rel: string }> {
  try {
    if (st.size > maxBytes) throw new ToolError(`File is too large to ${what} (${st.size} bytes, max ${maxBytes}): ${rel}`)
    // Read at most maxBytes + 1 whatever the size says now: the file may grow under us.
    const buf = Buffer.allocUnsafe(Math.min(st.size, maxBytes) + 1)
    let got = 0
    for (;;) {
      const { bytesRead } = await fh.read(buf, got, buf.length - got, got)
      if (bytesRead === 0) break
      got += bytesRead
      if (got === buf.length) break
    }
    if (got > maxBytes) throw new ToolError(`File is too large to ${what} (more than ${maxBytes} bytes): ${rel}`)
    return { data: buf.subarray(0, got), rel }
  } finally {
    release(fh)
  }
}

export interface WriteOptions {
  append?: boolean
  /** Fail when the file exists (write_file mode create). */
  exclusive?: boolean
  /**
   * Called once the target is checked and before anything is written, with what the write will
   * change: bytes (new size minus old) and entries (the file if new, plus the folders made for
   * it). Throwing refuses the write (the quota check); the folders made are removed again.
   */
  beforeWrite?: (change: { deltaBytes: number, deltaFiles: number }) => Promise<void>
  /**
   * Checked right before the rename that commits the write: aborted (the call was cancelled, or
   * its workspace write lease was lost to another instance), the file is left as it was.
   */
  signal?: AbortSignal
}

/**
 * Writes `data` to the file at `input` atomically: a temp file in the same directory (opened
 * O_EXCL|O_NOFOLLOW beneath the parent's fd), then a rename of that fd-relative name over the
 * target. Missing parents are created. A target that is a symlink, a directory, not a regular
 * file, or a file with several hard links is refused; with `append` the existing content is
 * copied from an fd checked to be that regular file. A failed write leaves nothing behind, not
 * even the folders made for it.
 */
export async function writeFileAtomic (
  ws: Workspace,
  input: string,
  data: string | Buffer,
  opts: WriteOptions = {}
): Promise<{ created: boolean, bytesWritten: number, rel: string }> {
  checkProtectedInput(ws, input)
  const loc = await locate(ws, input, 'create')
  try {
    const lexicalRel = loc.rel
    checkWritable(loc, lexicalRel)
    return { ...await writeAt(ws, loc, data, opts), rel: loc.rel }
  } catch (err) {
    await removeMade(ws, loc.made)
    throw fsError(err, loc.rel)
  } finally {
    release(loc)
  }
}

/** writeFileAtomic to a location held from locateWritable, into the directory its fd is (no second walk); the caller closes `loc`. */
export async function writeFileAtomicAt (ws: Workspace, loc: Location, data: string, opts: WriteOptions): Promise<{ created: boolean, bytesWritten: number }> {
  return await writeAt(ws, loc, data, opts).catch((err: unknown) => { throw fsError(err, loc.rel) })
}

async function writeAt (ws: Workspace, loc: Location, data: string | Buffer, opts: WriteOptions): Promise<{ created: boolean, bytesWritten: number }> {
  let existing: Stats | undefined
  try {
    existing = await lstat(at(loc.parent, loc.name))
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw err
  }
  if (existing !== undefined) {
    if (existing.isSymbolicLink()) throw new ToolError(`Refusing to write through a symbolic link: ${loc.rel}`, 'forbidden')
    if (existing.isDirectory()) throw new ToolError(`Path is a directory: ${loc.rel}`)
    if (opts.exclusive === true) throw new ToolError(`File already exists: ${loc.rel}`)
    if (!existing.isFile()) throw new ToolError(`Not a regular file: ${loc.rel}`)
    if (existing.nlink > 1) throw new ToolError(`Refusing to write to a file with multiple hard links: ${loc.rel}`, 'forbidden')
  }

  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data
  if (opts.beforeWrite !== undefined) {
    const oldSize = existing?.size ?? 0
    const newSize = (opts.append === true ? oldSize : 0) + bytes.length
    await opts.beforeWrite({ deltaBytes: newSize - oldSize, deltaFiles: (existing === undefined ? 1 : 0) + loc.made.length })
  }
  const tmpName = `.${loc.name.slice(0, 200)}.${randomBytes(6).toString('hex')}.tg-tmp`
  const mode = existing !== undefined ? existing.mode & 0o7777 : 0o644
  const fh = await open(at(loc.parent, tmpName), CREATE_FLAGS, mode)
  let renamed = false
  try {
    if (opts.append === true && existing !== undefined) {
      const src = await openFileIn(loc.parent, loc.name)
      if (src === undefined) throw new ToolError(`Not a regular file: ${loc.rel}`)
      try {
        if (src.st.nlink > 1) throw new ToolError(`Refusing to write to a file with multiple hard links: ${loc.rel}`, 'forbidden')
        const buf = Buffer.allocUnsafe(256 * 1024)
        for (;;) {
          const { bytesRead } = await src.fh.read(buf, 0, buf.length, null)
          if (bytesRead === 0) break
          await fh.write(buf, 0, bytesRead)
        }
      } finally {
        await src.fh.close()
      }
    }
    if (bytes.length > 0) await fh.write(bytes, 0, bytes.length)
    if (ws.owner !== undefined) {
      await fh.chown(ws.owner.uid, ws.owner.gid)
    } else if (existing !== undefined && process.getuid?.() === 0) {
      // Running as root: keep the replaced file's owner instead of silently taking it over.
      await fh.chown(existing.uid, existing.gid)
    }
    if (existing !== undefined) await fh.chmod(mode)
    await fh.close()
    if (opts.signal?.aborted === true) {
      const why = opts.signal.reason instanceof Error ? opts.signal.reason.message : 'the call was cancelled'
      throw new ToolError(`${loc.rel} was not written: ${why}`, 'timeout')
    }
    // rename() never follows: whatever `name` is by now (even a link swapped in), it is replaced.
    await rename(at(loc.parent, tmpName), at(loc.parent, loc.name))
    renamed = true
  } finally {
    await fh.close().catch(() => {})
    if (!renamed) await unlink(at(loc.parent, tmpName)).catch(() => {})
  }
  return { created: existing === undefined, bytesWritten: bytes.length }
}

/** Deletes a file (never a directory). Unlinking a link removes only the workspace's name. */
export async function removeFile (ws: Workspace, input: string): Promise<{ rel: string }> {
  checkProtectedInput(ws, input)
  const loc = await locate(ws, input, 'write')
  try {
    checkWritable(loc, loc.rel)
    let st: Stats
    try {
      st = await lstat(at(loc.parent, loc.name))
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') throw new ToolError(`File does not exist: ${loc.rel}`)
      throw err
    }
    if (st.isDirectory()) throw new ToolError(`Path is a directory: ${loc.rel}`)
    await unlink(at(loc.parent, loc.name))
    return { rel: loc.rel }
  } catch (err) {
    throw fsError(err, loc.rel)
  } finally {
    await loc.close()
  }
}

/** A location resolved for writing, checked against the read-only and protected rules. */
export async function locateWritable (ws: Workspace, input: string, intent: 'write' | 'create' = 'write'): Promise<Location> {
  checkProtectedInput(ws, input)
  const loc = await locate(ws, input, intent)
  try {
    checkWritable(loc, loc.rel)
    return loc
  } catch (err) {
    await loc.close()
    throw err
  }
}

/** Renames (dir fd, name) to (dir fd, name); neither side follows a symlink. */
export async function renameAt (from: FileHandle, fromName: string, to: FileHandle, toName: string): Promise<void> {
  await rename(at(from, fromName), at(to, toName))
}

/** lstat of (dir fd, name): the entry itself, never what a link points to. */
export async function lstatAt (dir: FileHandle, name: string): Promise<Stats | undefined> {
  try {
    return await lstat(at(dir, name))
  } catch (err) {
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ENOTDIR') return undefined
    throw err
  }
}
