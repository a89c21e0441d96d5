/**
 * Where apply_patch's paths lead, and where its rollback copies wait: both on file descriptors
 * (docs/ARCHITECTURE.md#fd-layer; the model of `workspace/fd-tree.ts`).
 *
 * A patch is staged before anything is written, so its targets must be resolved without creating
 * the folders a write will need: `locate(.., 'create')` would make them, `'write'` refuses a
 * missing parent. `resolveTarget` walks the parent folders itself, one (directory fd, name) pair
 * at a time, never handing the kernel more than one component; an in-tree symlink on the way is
 * resolved by fd-tree.ts `locate` (beneath the root, never out of it), and the walk stops at the first
 * missing folder or at a file, reporting what each parent is. The commit then works on the
 * target's real chain below the root, through fd-tree.ts again.
 */
import { randomBytes } from 'node:crypto'
import type { Stats } from 'node:fs'
import { mkdir, open, opendir, rmdir, unlink } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import path from 'node:path'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { at, DIR_FLAGS, errnoOf } from '../workspace/fd.js'
import { checkPathInput, fsError, isInside, quoteInput } from '../workspace/paths.js'
import { isProtected, locate, lstatAt } from '../workspace/fd-tree.js'

/** What a parent folder of a target is on disk. */
export type ParentKind = 'dir' | 'file' | 'missing'

/** A patch path, resolved for staging. */
export interface Target {
  /** Display path: the input made workspace-relative, '/'-separated (error messages, results). */
  rel: string
  /** Real components below the workspace root, symlinks resolved; the last one is the file's name. */
  chain: string[]
  /** `chain` joined with '/': one key per file, whatever alias the patch used. */
  key: string
  /** `parents[i]` is what `chain.slice(0, i + 1)` is on disk (one per parent folder). */
  parents: ParentKind[]
  /** lstat of the entry itself, when its parent folder exists and it does. */
  st: Stats | undefined
  /** The parent folder, open, when it exists. The caller closes it. */
  dir: FileHandle | undefined
}

function escapeError (input: string): ToolError {
  return new ToolError(`Path escapes workspace root: ${quoteInput(input)}`, 'forbidden')
}

function readOnlyError (input: string): ToolError {
  return new ToolError(`Path is in a read-only root: ${quoteInput(input)}`, 'forbidden')
}

/**
 * fd-tree.ts `locate` quotes the path it was given (a prefix of the real chain); the patch's author
 * gave another one. Its refusals are re-worded with the input, the rest kept.
 */
function relabel (err: unknown, input: string): ToolError {
  if (!(err instanceof ToolError)) return fsError(err, input)
  const m = err.message
  const q = quoteInput(input)
  if (m.startsWith('Path escapes workspace root')) return escapeError(input)
  if (m.startsWith('Path is in a read-only root')) return readOnlyError(input)
  if (m.startsWith('Too many levels of symbolic links')) return new ToolError(`Too many levels of symbolic links: ${q}`, 'forbidden')
  // A link whose target is missing, or runs through a file: writing "through" it would land wherever it points.
  if (m.startsWith('File does not exist') || m.startsWith('Not a directory')) {
    return new ToolError(`Path goes through a dangling symbolic link: ${q}`, 'forbidden')
  }
  return err
}

/**
 * Follows the in-tree symlink at `linkChain` (real components, the last one the link) to the
 * folder it stands for. Returns the open folder and its real chain, or `kind: 'file'` when the
 * link leads to a file.
 */
async function followLink (ws: Workspace, linkChain: readonly string[], input: string): Promise<
  { kind: 'dir', fh: FileHandle, chain: string[] } | { kind: 'file', chain: string[] }
> {
  let loc
  try {
    loc = await locate(ws, linkChain.join('/'), 'read')
  } catch (err) {
    throw relabel(err, input)
  }
  try {
    if (loc.readOnly) throw readOnlyError(input)
    // A link to the root itself: the root is a trusted path, opened again.
    if (loc.name === '') return { kind: 'dir', fh: await open(ws.root, DIR_FLAGS), chain: [] }
    const st = await lstatAt(loc.parent, loc.name)
    if (st === undefined) throw new ToolError(`Path goes through a dangling symbolic link: ${quoteInput(input)}`, 'forbidden')
    if (!st.isDirectory()) return { kind: 'file', chain: [...loc.chain] }
    try {
      return { kind: 'dir', fh: await open(at(loc.parent, loc.name), DIR_FLAGS), chain: [...loc.chain] }
    } catch (err) {
      throw fsError(err, input)
    }
  } finally {
    await loc.close()
  }
}

/**
 * Resolves a patch path for writing or deleting, creating nothing. Refuses what the write rules
 * refuse (docs/ARCHITECTURE.md#workspaces): escapes, read roots, protected segments, the root itself, a final component
 * that is a symlink, a path through a dangling link.
 */
export async function resolveTarget (ws: Workspace, input: string): Promise<Target> {
  checkPathInput(input)
  const q = quoteInput(input)
  const lexAbs = path.isAbsolute(input) ? path.resolve(input) : path.resolve(ws.root, input)
  if (!isInside(ws.root, lexAbs)) {
    if (path.isAbsolute(input) && ws.readRoots.some((rr) => isInside(rr.path, lexAbs))) throw readOnlyError(input)
    throw escapeError(input)
  }
  const relLex = path.relative(ws.root, lexAbs)
  if (relLex === '') throw new ToolError(`Path is a directory: ${q}`)
  const comps = relLex.split(path.sep)
  const rel = comps.join('/')
  const protectedError = new ToolError(`Path is protected and cannot be written: ${q}`, 'forbidden')
  if (isProtected(comps)) throw protectedError
  const name = comps.pop() as string

  // The root is a trusted path (its parent belongs to the gateway); everything below is walked.
  let dir: FileHandle | undefined = await open(ws.root, DIR_FLAGS)
  let chain: string[] = []
  const parents: ParentKind[] = []
  try {
    let i = 0
    for (; i < comps.length; i++) {
      const c = comps[i] as string
      const st = await lstatAt(dir, c)
      if (st === undefined) break
      if (st.isDirectory()) {
        let next: FileHandle
        try {
          next = await open(at(dir, c), DIR_FLAGS)
        } catch (err) {
          throw fsError(err, input)
        }
        await dir.close()
        dir = next
        chain.push(c)
      } else if (st.isSymbolicLink()) {
        const found = await followLink(ws, [...chain, c], input)
        if (found.kind === 'file') {
          chain = found.chain
          parents.push('file')
          i++
          break
        }
        await dir.close()
        dir = found.fh
        chain = found.chain
      } else {
        chain.push(c)
        parents.push('file')
        i++
        break
      }
      parents.push('dir')
    }
    if (i < comps.length || parents[parents.length - 1] === 'file') {
      // Below a missing folder or a file: nothing further exists (the writes may create it).
      for (const c of comps.slice(i)) {
        chain.push(c)
        parents.push('missing')
      }
      chain.push(name)
      if (isProtected(chain)) throw protectedError
      await dir.close()
      dir = undefined
      return { rel, chain, key: chain.join('/'), parents, st: undefined, dir: undefined }
    }
    chain.push(name)
    if (isProtected(chain)) throw protectedError
    const st = await lstatAt(dir, name)
    if (st?.isSymbolicLink() === true) throw new ToolError(`Refusing to write through a symbolic link: ${q}`, 'forbidden')
    const out: Target = { rel, chain, key: chain.join('/'), parents, st, dir }
    dir = undefined
    return out
  } catch (err) {
    throw fsError(err, input)
  } finally {
    await dir?.close().catch(() => {})
  }
}

export type RenameFn = (from: FileHandle, fromName: string, to: FileHandle, toName: string) => Promise<void>

/** One trash folder: open, with the folder it was made in (to remove it). */
interface Bin { fh: FileHandle, parent: FileHandle, name: string }

/** A file parked in the trash. */
export interface Slot { bin: Bin, name: string }

const TRASH_PREFIX = '.tg-trash-'

/**
 * Per-call trash: files a patch deletes (or replaces without keeping their bytes) are renamed
 * here, never read; a rollback renames them back, a success removes them.
 *
 * Where: a fresh `.tg-trash-<random>` folder (mode 0700) next to the workspace root, i.e. in the
 * tenant's folder under WORKSPACES_DIR. That folder belongs to the gateway and is not in the
 * tenant's sandbox, so the tenant cannot see, swap or fill the trash while a patch runs; the name
 * cannot clash with a workspace (workspace ids start with a letter or digit); and it sits on the
 * workspace's filesystem in the usual layout, so a rename is enough. When the root is a mount
 * point of its own (rename gives EXDEV) or its parent cannot be written, the trash falls back to
 * a `.tg-trash-<random>` folder inside the workspace root: the tenant could rename or empty it
 * then, but every use goes through the folder's fd and the names in it, so the worst a tenant
 * can do is lose its own files. One folder per call (not a shared `.tg-trash/`): nothing to
 * share between concurrent calls, and nothing is left next to the workspace afterwards.
 */
export class Trash {
  readonly #ws: Workspace
  #outside: Bin | undefined | null = undefined
  #inside: Bin | undefined
  #seq = 0

  constructor (ws: Workspace) {
    this.#ws = ws
  }

  async #make (base: string): Promise<Bin> {
    const parent = await open(base, DIR_FLAGS)
    try {
      const name = `${TRASH_PREFIX}${randomBytes(8).toString('hex')}`
      await mkdir(at(parent, name), { mode: 0o700 })
      return { fh: await open(at(parent, name), DIR_FLAGS), parent, name }
    } catch (err) {
      await parent.close().catch(() => {})
      throw err
    }
  }

  /** The trash next to the root, made on first use; null when that is not possible. */
  async #outsideBin (): Promise<Bin | null> {
    if (this.#outside !== undefined) return this.#outside
    const parent = path.dirname(this.#ws.root)
    this.#outside = parent === this.#ws.root ? null : await this.#make(parent).catch(() => null)
    return this.#outside
  }

  async #insideBin (): Promise<Bin> {
    this.#inside ??= await this.#make(this.#ws.root)
    return this.#inside
  }

  /** Names the slot a file will take (recorded before the rename, for the rollback). */
  async reserve (): Promise<Slot> {
    const bin = (await this.#outsideBin()) ?? await this.#insideBin()
    return { bin, name: String(this.#seq++) }
  }

  /** Renames (dir, name) into `slot`; on EXDEV the slot moves to the in-root trash. */
  async put (dir: FileHandle, name: string, slot: Slot, rename: RenameFn): Promise<void> {
    try {
      await rename(dir, name, slot.bin.fh, slot.name)
    } catch (err) {
      if (errnoOf(err) !== 'EXDEV') throw err
      slot.bin = await this.#insideBin()
      await rename(dir, name, slot.bin.fh, slot.name)
    }
  }

  /** True when the slot holds a file (its rename took place). */
  async holds (slot: Slot): Promise<boolean> {
    return (await lstatAt(slot.bin.fh, slot.name).catch(() => undefined)) !== undefined
  }

  /** Removes the trash and what is left in it. */
  async dispose (): Promise<void> {
    for (const bin of [this.#outside, this.#inside]) {
      if (bin === undefined || bin === null) continue
      try {
        await emptyDir(bin.fh, 0)
        await rmdir(at(bin.parent, bin.name)).catch(() => {})
      } finally {
        await bin.fh.close().catch(() => {})
        await bin.parent.close().catch(() => {})
      }
    }
    this.#outside = undefined
    this.#inside = undefined
  }

  /** Closes the trash, leaving its content (a rollback that could not put everything back). */
  async abandon (): Promise<void> {
    for (const bin of [this.#outside, this.#inside]) {
      if (bin === undefined || bin === null) continue
      await bin.fh.close().catch(() => {})
      await bin.parent.close().catch(() => {})
    }
    this.#outside = undefined
    this.#inside = undefined
  }
}

/** Deletes everything in an open folder, by fd and name only (never following a link). */
async function emptyDir (dir: FileHandle, depth: number): Promise<void> {
  const names: string[] = []
  try {
    for await (const d of await opendir(at(dir), { bufferSize: 64 })) names.push(d.name)
  } catch {}
  for (const name of names) {
    try {
      await unlink(at(dir, name))
      continue
    } catch (err) {
      if (errnoOf(err) !== 'EISDIR' || depth >= 64) continue
    }
    let sub: FileHandle
    try {
      sub = await open(at(dir, name), DIR_FLAGS)
    } catch {
      continue
    }
    try {
      await emptyDir(sub, depth + 1)
    } finally {
      await sub.close().catch(() => {})
    }
    await rmdir(at(dir, name)).catch(() => {})
  }
}
