/**
 * The snapshot half of a checkpoint: a walk of the workspace that hashes what changed into the object
 * store (checkpoint-objects.ts) and returns the root tree's hash, and the stat memory that makes it cheap
 * (a restore keeps it too: checkpoint-restore.ts).
 *
 * Cost follows what changed, like git's index: per workspace we keep in memory, for each file of
 * the last checkpoint or restore, the (dev, ino, size, mtime, ctime, mode) it had when its content
 * was hashed. A file whose lstat still matches is taken from there without being read; a
 * directory whose entries all match keeps its tree hash without being serialised again. ctime
 * cannot be set by the tenant, so a content change that keeps size and mtime is still seen.
 * The memory is bounded (a few workspaces, checkpoint-store.ts); a workspace that lost its entry
 * is read whole once.
 *
 * The tenant may rewrite or swap any path for a symlink while we walk (its background commands
 * run concurrently). So the walk works like fd-tree.ts: every directory is opened beneath its
 * parent's fd with O_NOFOLLOW|O_DIRECTORY through `/proc/self/fd/<fd>/<name>`, files are opened
 * with O_NOFOLLOW and checked on the fd, symlinks are recorded as symlinks and never followed.
 * Each directory is handled with synchronous calls (a lstat per file is the floor of the cost,
 * and the promise API costs several times more per call); the event loop gets a turn every
 * SLICE_MS.
 */
import { closeSync, fstatSync, lstatSync, openSync, readdirSync, readlinkSync } from 'node:fs'
import type { Dirent, Stats } from 'node:fs'
import { setImmediate as turn } from 'node:timers/promises'
import { HttpError } from '../../errors.js'
import { sortEntries } from './checkpoint-objects.js'
import type { FileEntry, ObjectStore, TreeEntry } from './checkpoint-objects.js'
import { at, DIR_FLAGS, errnoOf, openDirBeneath, READ_FLAGS } from './fd.js'

/** Directories deeper than this are refused (each level holds an fd while it is walked). */
export const MAX_DEPTH = 256
/** Longest stretch of synchronous work before the event loop gets a turn. */
const SLICE_MS = 8

/** What a create cost; for benchmarks and tests, not part of the wire format. */
export interface CheckpointWork {
  /** Files read and hashed (the others were known unchanged from their lstat). */
  hashedFiles: number
  hashedBytes: number
  /** Objects and trees added to the store, and their bytes. */
  newObjects: number
  newTrees: number
  newBytes: number
}

/** A file's identity and timestamps when its content had hash `sha`. */
export interface FileSig {
  dev: number
  ino: number
  size: number
  mtimeMs: number
  ctimeMs: number
  mode: number
  sha: string
}

/** What we know of one directory: its tree and the files' signatures. */
interface DirMemo {
  tree: string
  entries: readonly TreeEntry[]
  files: Map<string, FileSig>
}
/** The stat memory of one workspace: a DirMemo per directory, by its path below the root. */
export type Memo = Map<string, DirMemo>

/** One walk over a workspace (a snapshot, or one attempt of a restore). */
export interface Pass {
  /** The workspace root's path, for lstat hints only (see lstatHint). */
  root: string
  /** What the last checkpoint or restore left (undefined: nothing known, every file is read). */
  memo: Memo | undefined
  /** What this walk finds, to be kept for the next one. */
  next: Memo
  lastTurn: number
  files: number
  bytes: number
  work: CheckpointWork
}

export function newPass (root: string, memo: Memo | undefined): Pass {
  return {
    root,
    memo,
    next: new Map(),
    lastTurn: performance.now(),
    files: 0,
    bytes: 0,
    work: { hashedFiles: 0, hashedBytes: 0, newObjects: 0, newTrees: 0, newBytes: 0 }
  }
}

/** Gives the event loop a turn once SLICE_MS of synchronous work have passed since the last one. */
export async function maybeTurn (clock: { lastTurn: number }): Promise<void> {
  if (performance.now() - clock.lastTurn < SLICE_MS) return
  await turn()
  clock.lastTurn = performance.now()
}

export function tooDeep (rel: string): HttpError {
  return new HttpError('GW_BAD_REQUEST', `The workspace is nested deeper than ${MAX_DEPTH} directories (at ${rel.slice(0, 200)}...)`)
}

/** Mode bits a checkpoint keeps: no setuid/setgid (a restore runs as root). */
export function fileMode (st: Stats): number {
  return st.mode & 0o777
}

export function dirMode (st: Stats): number {
  return st.mode & 0o1777
}

/** Entries carry whole milliseconds (restore sets them back exactly; see setTimes there). */
export function msOf (st: Stats): number {
  return Math.round(st.mtimeMs)
}

/**
 * The plain path of `name` below the root, for lstat only. A lstat is a hint that says whether a
 * file may be skipped, never a way to content, and its result is trusted only when (dev, ino,
 * ctime...) equal those of an inode we read earlier through an fd: a tenant that swaps a parent
 * for a symlink can at worst make us see one of its own already-read inodes, never bring content
 * from elsewhere. Resolving this path costs half the kernel time of /proc/self/fd/<fd>/<name>,
 * which is most of a checkpoint of a large tree. Everything else (listing, reading, writing,
 * removing) goes through directory fds.
 */
export function lstatHint (pass: { root: string }, rel: string, fd: number, name: string): Stats | undefined {
  try {
    return lstatSync(rel === '' ? `${pass.root}/${name}` : `${pass.root}/${rel}/${name}`, { throwIfNoEntry: false })
  } catch {
    // A parent swapped for a file or a link loop (ENOTDIR, ELOOP), a path past PATH_MAX: by fd.
    return lstatSync(at(fd, name), { throwIfNoEntry: false })
  }
}

/**
 * File timestamps come from a coarse clock (a kernel tick, several ms): a write in the same tick
 * as our stat leaves size, mtime and ctime as they were, and a same-size rewrite would then pass
 * for unchanged (git's "racily clean" entries). A signature taken within this window of its
 * file's last change is never trusted; that file is read again next time. 100 ms is many ticks
 * of the local filesystems' clock (1-10 ms); a filesystem with coarser timestamps needs more.
 */
export const RACY_MS = 100

export function sigOf (st: Stats, sha: string): FileSig {
  const racy = Date.now() - Math.max(st.mtimeMs, st.ctimeMs) < RACY_MS
  return { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: racy ? -1 : st.ctimeMs, mode: st.mode, sha }
}

export function sameSig (sig: FileSig | undefined, st: Stats): sig is FileSig {
  return sig !== undefined && sig.ino === st.ino && sig.dev === st.dev && sig.size === st.size &&
    sig.mtimeMs === st.mtimeMs && sig.ctimeMs === st.ctimeMs && sig.mode === st.mode
}

function sameEntries (a: readonly TreeEntry[] | undefined, b: readonly TreeEntry[]): boolean {
  if (a === undefined || a.length !== b.length) return false
  for (let i = 0; i < b.length; i++) {
    const x = a[i] as TreeEntry
    const y = b[i] as TreeEntry
    if (x[0] !== y[0] || x[1] !== y[1] || x[2] !== y[2] || x[3] !== y[3] || x[4] !== y[4] || x[5] !== y[5]) return false
  }
  return true
}

/** Records the workspace's tree (its root opened by path, a trusted one: see fd-tree.ts) and returns the root tree's hash. */
export async function snapshotTree (store: ObjectStore, pass: Pass): Promise<string> {
  const root = openSync(pass.root, DIR_FLAGS)
  try {
    return await snapshotDir(store, root, '', 0, pass)
  } finally {
    closeSync(root)
  }
}

/** Records the directory open as `fd` (and everything below it); returns its tree hash. */
async function snapshotDir (store: ObjectStore, fd: number, rel: string, depth: number, pass: Pass): Promise<string> {
  if (depth > MAX_DEPTH) throw tooDeep(rel)
  await maybeTurn(pass)
  const before = pass.memo?.get(rel)
  const entries: TreeEntry[] = []
  const files = new Map<string, FileSig>()
  let listing: Dirent[]
  try {
    listing = readdirSync(at(fd), { withFileTypes: true })
  } catch {
    listing = []
  }
  for (const d of listing) {
    // A directory of 100,000 entries must not hold the event loop: the slice ends inside it too.
    await maybeTurn(pass)
    const name = d.name
    // The type readdir saw may be stale by now: each branch checks again and falls back to lstat.
    let kind: 'file' | 'dir' | 'link' | 'other' = d.isFile() ? 'file' : d.isDirectory() ? 'dir' : d.isSymbolicLink() ? 'link' : 'other'
    let st: Stats | undefined
    for (let attempt = 0; attempt < 3; attempt++) {
      if (kind === 'file' || kind === 'other') {
        st = lstatHint(pass, rel, fd, name)
        if (st === undefined) break
        kind = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : 'other'
        if (kind === 'other') break // FIFO, socket, device: not part of a checkpoint
      }
      if (kind === 'file') {
        const entry = await snapshotFile(store, fd, name, st as Stats, before, files, pass)
        if (entry !== undefined) entries.push(entry)
        break
      }
      if (kind === 'link') {
        let target: string
        try {
          target = readlinkSync(at(fd, name))
        } catch (err) {
          if (errnoOf(err) === 'ENOENT') break
          if (errnoOf(err) !== 'EINVAL') throw err
          kind = 'other' // not a link any more: look again
          continue
        }
        entries.push([name, 'l', 0, 0, 0, target])
        break
      }
      // A directory: entered by fd, never through a symlink swapped in.
      const sub = openDirBeneath(fd, name)
      if (sub === undefined) { kind = 'other'; continue }
      try {
        const dst = fstatSync(sub)
        const tree = await snapshotDir(store, sub, rel === '' ? name : `${rel}/${name}`, depth + 1, pass)
        entries.push([name, 'd', dirMode(dst), 0, 0, tree])
      } finally {
        closeSync(sub)
      }
      break
    }
  }
  sortEntries(entries)
  // Every entry kept counts (see CheckpointInfo.files); FIFOs and sockets are not kept.
  pass.files += entries.length
  let tree: string
  if (before !== undefined && sameEntries(before.entries, entries)) {
    tree = before.tree
  } else {
    const put = store.putTree(entries)
    tree = put.sha
    if (put.added) {
      pass.work.newTrees++
      pass.work.newBytes += put.bytes
    }
  }
  pass.next.set(rel, { tree, entries, files })
  return tree
}

async function snapshotFile (
  store: ObjectStore, fd: number, name: string, st: Stats, before: DirMemo | undefined, files: Map<string, FileSig>, pass: Pass
): Promise<FileEntry | undefined> {
  const known = before?.files.get(name)
  if (sameSig(known, st)) {
    files.set(name, known)
    pass.bytes += st.size
    return [name, 'f', fileMode(st), st.size, msOf(st), known.sha]
  }
  let rfd: number
  try {
    rfd = openSync(at(fd, name), READ_FLAGS)
  } catch (err) {
    // Gone, or swapped for a symlink (ELOOP) since the lstat: it is not in this checkpoint.
    if (errnoOf(err) === 'ENOENT' || errnoOf(err) === 'ELOOP') return undefined
    throw err
  }
  try {
    const fst = fstatSync(rfd)
    if (!fst.isFile()) return undefined
    const put = await store.putFile(rfd, fst.size)
    pass.work.hashedFiles++
    pass.work.hashedBytes += put.bytes
    if (put.added) {
      pass.work.newObjects++
      pass.work.newBytes += put.bytes
    }
    const sig = sigOf(fst, put.sha)
    // Changed while we read it: keep what was read, and make sure the next checkpoint reads it again.
    if (put.bytes !== fst.size) sig.ctimeMs = -1
    files.set(name, sig)
    pass.bytes += put.bytes
    await maybeTurn(pass)
    return [name, 'f', fileMode(fst), put.bytes, msOf(fst), put.sha]
  } finally {
    closeSync(rfd)
  }
}
