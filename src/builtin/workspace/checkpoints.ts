/**
 * Checkpoints of a workspace: a per-tenant store of snapshots that share unchanged content.
 *
 * Layout under `<dir>/<tenant>/` (the gateway's own directory, mode 0700, outside every workspace):
 * - `objects/`, `trees/`, `tmp/`: the content-addressed store (checkpoint-objects.ts); a
 *   checkpoint is the hash of its root tree.
 * - `ws/<workspaceId>/index.json`: that workspace's checkpoints, newest first (id, createdAt,
 *   label, bytes, files, root tree).
 *
 * Cost follows what changed, like git's index: per workspace we keep in memory, for each file of
 * the last checkpoint or restore, the (dev, ino, size, mtime, ctime, mode) it had when its content
 * was hashed. A file whose lstat still matches is taken from there without being read; a
 * directory whose entries all match keeps its tree hash without being serialised again. ctime
 * cannot be set by the tenant, so a content change that keeps size and mtime is still seen.
 * The memory is bounded (a few workspaces); a workspace that lost its entry is read whole once.
 *
 * The tenant may rewrite or swap any path for a symlink while we walk (its background commands
 * run concurrently). So the walk works like fd-tree.ts: every directory is opened beneath its
 * parent's fd with O_NOFOLLOW|O_DIRECTORY through `/proc/self/fd/<fd>/<name>`, files are opened
 * with O_NOFOLLOW and checked on the fd, symlinks are recorded and recreated as symlinks and never
 * followed, and restore writes only into directory fds obtained that way (temp file, then a rename
 * that never follows). Each directory is handled with synchronous calls (a lstat per file is the
 * floor of the cost, and the promise API costs several times more per call); the event loop gets a
 * turn between directories.
 *
 * Callers hold the workspace's write lock (no tool call interleaves). Within the store, every
 * change of one tenant's objects (create, restore, delete, garbage collection) runs one at a time,
 * so an object is never collected while a checkpoint that reuses it is being written.
 */
import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import {
  closeSync, constants as fsConstants, fchmodSync, fchownSync, fstatSync, futimesSync, lchownSync, lstatSync, mkdirSync,
  openSync, readdirSync, readFileSync, readlinkSync, readSync, renameSync, rmdirSync, rmSync, symlinkSync, unlinkSync,
  writeFileSync, writeSync
} from 'node:fs'
import type { Dirent, Stats } from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import { setImmediate as turn } from 'node:timers/promises'
import { HttpError } from '../../errors.js'
import { KeyedMutex } from '../../cluster/index.js'
import type { Workspace } from '../types.js'
import { ObjectStore, sortEntries, TreeCache } from './checkpoint-objects.js'
import type { FileEntry, TreeEntry } from './checkpoint-objects.js'
import { at, CREATE_FLAGS, DIR_FLAGS, errnoOf, O_CLOEXEC, openDirBeneath, READ_FLAGS } from './fd.js'

const execFileAsync = promisify(execFile)
const CHECKPOINT_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
const DEFAULT_CHECKPOINTS_PER_WORKSPACE = 20
const LABEL_MAX = 200
/** Directories deeper than this are refused (each level holds an fd while it is walked). */
const MAX_DEPTH = 256
/** Longest stretch of synchronous work before the event loop gets a turn. */
const SLICE_MS = 8
/** Parsed trees kept in memory, all tenants together (about 1,000 for a 50,000-file workspace). */
const TREE_CACHE_SIZE = 20_000

const { O_RDONLY } = fsConstants
const COPY_CHUNK = 1024 * 1024

export interface CheckpointInfo {
  checkpointId: string
  /** ISO 8601. */
  createdAt: string
  label: string | null
  /** Total size of the checkpoint's regular files (each name of a hard-linked file: a restore writes them apart). */
  bytes: number
  /**
   * Entries in it: files, directories, symlinks; counted as an upload's answer and the workspace
   * listing count them (usage.ts), so the same tree gives the same figure everywhere.
   */
  files: number
}

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

export interface CheckpointStoreOptions {
  /** Parent of the per-tenant stores, e.g. `<WORKSPACES_DIR>/.tg/checkpoints`; created mode 0700. */
  dir: string
  /** CHECKPOINTS_PER_WORKSPACE: creating one more drops the oldest. Default 20. */
  checkpointsPerWorkspace?: number
  /** Workspaces whose stat memory is kept (each holds a record per file). Default 8. */
  cachedWorkspaces?: number
  /** Failures of the background collection after a create (the next collection retries them). */
  onError?: (err: unknown) => void
}

interface IndexRecord extends CheckpointInfo {
  tree: string
}

/** A file's identity and timestamps when its content had hash `sha`. */
interface FileSig {
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
type Memo = Map<string, DirMemo>

interface Pass {
  /** The workspace root's path, for lstat hints only (see #hint). */
  root: string
  memo: Memo | undefined
  next: Memo
  lastTurn: number
  files: number
  bytes: number
  work: CheckpointWork
}

/** Mode bits a checkpoint keeps: no setuid/setgid (a restore runs as root). */
function fileMode (st: Stats): number {
  return st.mode & 0o777
}

function dirMode (st: Stats): number {
  return st.mode & 0o1777
}

/** Entries carry whole milliseconds (restore sets them back exactly; see #setTimes). */
function msOf (st: Stats): number {
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
function lstatHint (pass: { root: string }, rel: string, fd: number, name: string): Stats | undefined {
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

function sigOf (st: Stats, sha: string): FileSig {
  const racy = Date.now() - Math.max(st.mtimeMs, st.ctimeMs) < RACY_MS
  return { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: racy ? -1 : st.ctimeMs, mode: st.mode, sha }
}

function sameSig (sig: FileSig | undefined, st: Stats): sig is FileSig {
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

function newId (): string {
  // Time-sortable: 9 base-36 digits of milliseconds (fixed width until the year 5188), then randomness.
  return `${Date.now().toString(36).padStart(9, '0')}-${randomBytes(5).toString('hex')}`
}

function checkId (id: unknown): asserts id is string {
  if (typeof id !== 'string' || !CHECKPOINT_ID_RE.test(id)) {
    throw new HttpError('GW_BAD_REQUEST', 'checkpointId must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')
  }
}

function tooDeep (rel: string): HttpError {
  return new HttpError('GW_BAD_REQUEST', `The workspace is nested deeper than ${MAX_DEPTH} directories (at ${rel.slice(0, 200)}...)`)
}

/** Removes `name` in the directory `fd`, a whole directory tree included, following nothing. */
function removeAt (fd: number, name: string, depth = 0): void {
  try {
    unlinkSync(at(fd, name))
    return
  } catch (err) {
    if (errnoOf(err) === 'ENOENT') return
    if (errnoOf(err) !== 'EISDIR' && errnoOf(err) !== 'EPERM') throw err
  }
  if (depth > MAX_DEPTH) throw new HttpError('GW_BAD_REQUEST', `The workspace is nested deeper than ${MAX_DEPTH} directories`)
  const sub = openDirBeneath(fd, name)
  if (sub === undefined) {
    // Swapped for a non-directory meanwhile: unlink that instead.
    removeAt(fd, name, depth + 1)
    return
  }
  try {
    for (const child of readdirSync(at(sub))) removeAt(sub, child, depth + 1)
  } finally {
    closeSync(sub)
  }
  try {
    rmdirSync(at(fd, name))
  } catch (err) {
    if (errnoOf(err) !== 'ENOENT') throw err
  }
}

function hashFd (fd: number): { sha: string, bytes: number } {
  const hash = createHash('sha256')
  const buf = Buffer.allocUnsafe(COPY_CHUNK)
  let bytes = 0
  for (;;) {
    const n = readSync(fd, buf, 0, buf.length, bytes)
    if (n === 0) break
    hash.update(buf.subarray(0, n))
    bytes += n
  }
  return { sha: hash.digest('hex'), bytes }
}

function hasControl (s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x20 || c === 0x7f) return true
  }
  return false
}

/** Tree names come from our own store; checked anyway, since a restore writes as root. */
function checkName (name: string): void {
  if (name === '' || name === '.' || name === '..' || name.includes('/') || name.includes('\0')) {
    throw new Error(`checkpoint store: bad entry name ${JSON.stringify(name.slice(0, 80))}`)
  }
}

/** errno codes of a step that met an entry changed under it by the tenant. */
const RACE_CODES = new Set(['ENOENT', 'ENOTDIR', 'EISDIR', 'ENOTEMPTY', 'EEXIST', 'ELOOP'])
const RESTORE_ATTEMPTS = 3

class RaceError extends Error {
  constructor () {
    super('an entry changed while it was being restored')
  }
}

function tmpName (): string {
  return `.tg-restore-${randomBytes(8).toString('hex')}`
}

export class CheckpointStore {
  readonly #dir: string
  readonly #limit: number
  readonly #cacheSize: number
  readonly #onError: (err: unknown) => void
  readonly #mutex = new KeyedMutex()
  /** Stat memory per workspace, least recently used first. */
  readonly #memos = new Map<string, Memo>()
  /** Parsed trees of every tenant: restore and collection read them without a file read each. */
  readonly #trees = new TreeCache(TREE_CACHE_SIZE)
  /** Tenants whose last collection failed: the next one sweeps the whole store, not only what was dropped. */
  readonly #dirty = new Set<string>()

  constructor (opts: CheckpointStoreOptions) {
    const limit = opts.checkpointsPerWorkspace ?? DEFAULT_CHECKPOINTS_PER_WORKSPACE
    if (!Number.isInteger(limit) || limit < 1) throw new Error('CHECKPOINTS_PER_WORKSPACE must be a positive integer')
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 })
    this.#dir = opts.dir
    this.#limit = limit
    this.#cacheSize = opts.cachedWorkspaces ?? 8
    this.#onError = opts.onError ?? (() => {})
  }

  /** Takes a checkpoint of the workspace's current tree. */
  async create (ws: Workspace, opts: { label?: string } = {}): Promise<CheckpointInfo & { work: CheckpointWork }> {
    const label = opts.label ?? null
    if (label !== null && (typeof label !== 'string' || label.length > LABEL_MAX || hasControl(label))) {
      throw new HttpError('GW_BAD_REQUEST', `label must be a string of at most ${LABEL_MAX} characters without control characters`)
    }
    return await this.#mutex.run(this.#tenantDir(ws), async () => {
      const store = this.#objects(ws)
      const pass = this.#pass(ws)
      const root = openSync(ws.root, DIR_FLAGS)
      let tree: string
      try {
        tree = await this.#snapshotDir(store, root, '', 0, pass)
      } finally {
        closeSync(root)
      }
      const info: IndexRecord = { checkpointId: newId(), createdAt: new Date().toISOString(), label, bytes: pass.bytes, files: pass.files, tree }
      const index = this.#readIndex(ws)
      index.unshift(info)
      const dropped = index.splice(this.#limit)
      this.#writeIndex(ws, index)
      this.#remember(ws, pass.next)
      if (dropped.length > 0) {
        // Collected after the answer, still in the tenant's queue: nothing can reuse an object meanwhile.
        this.#mutex.run(this.#tenantDir(ws), async () => { await this.#collect(store, ws.tenant, dropped) }).catch(this.#onError)
      }
      const { tree: _tree, ...pub } = info
      return { ...pub, work: pass.work }
    })
  }

  /** Newest first. */
  async list (ws: Workspace): Promise<CheckpointInfo[]> {
    return this.#readIndex(ws).map(({ tree: _tree, ...pub }) => pub)
  }

  /**
   * Makes the workspace's tree exactly the checkpoint's. Files that still match what the store
   * knows of them are left alone; the others are written beside their target and renamed over it.
   */
  async restore (ws: Workspace, checkpointId: string): Promise<{ restored: true, checkpointId: string }> {
    checkId(checkpointId)
    return await this.#mutex.run(this.#tenantDir(ws), async () => {
      const rec = this.#find(ws, checkpointId)
      const store = this.#objects(ws)
      let pass = this.#pass(ws)
      // Whatever happens, the memory of this workspace is stale from here on.
      this.#memos.delete(this.#memoKey(ws))
      // A process of the tenant that changes the tree meanwhile can make a step fail (a directory
      // refilled while it is removed, a name retyped between two calls). Another pass over the
      // tree finishes the job; it has little left to do.
      for (let attempt = 1; ; attempt++) {
        const root = openSync(ws.root, DIR_FLAGS)
        try {
          await this.#restoreDir(ws, store, root, '', rec.tree, 0, pass)
          break
        } catch (err) {
          if (!(err instanceof RaceError) && !RACE_CODES.has(errnoOf(err) ?? '')) throw err
          if (attempt === RESTORE_ATTEMPTS) {
            throw new HttpError('GW_WORKSPACE_BUSY', `The restore of checkpoint ${checkpointId} was interrupted ${attempt} times by changes to the workspace (a background process writing to it?)`)
          }
          pass = { ...this.#pass(ws), memo: undefined }
        } finally {
          closeSync(root)
        }
      }
      this.#remember(ws, pass.next)
      return { restored: true as const, checkpointId }
    })
  }

  async delete (ws: Workspace, checkpointId: string): Promise<void> {
    checkId(checkpointId)
    await this.#mutex.run(this.#tenantDir(ws), async () => {
      const rec = this.#find(ws, checkpointId)
      this.#writeIndex(ws, this.#readIndex(ws).filter((r) => r.checkpointId !== checkpointId))
      await this.#collect(this.#objects(ws), ws.tenant, [rec])
    })
  }

  /** Removes every checkpoint of the workspace (the workspace is being deleted), then sweeps the tenant's store. */
  async deleteAll (ws: Workspace): Promise<void> {
    await this.#mutex.run(this.#tenantDir(ws), async () => {
      this.#memos.delete(this.#memoKey(ws))
      rmSync(this.#wsDir(ws), { recursive: true, force: true })
      await this.#collect(this.#objects(ws), ws.tenant, 'all')
    })
  }

  /** Resolves once the tenant's queued work (a collection after a create) is done. */
  async whenIdle (ws: Workspace): Promise<void> {
    await this.#mutex.run(this.#tenantDir(ws), async () => {})
  }

  /**
   * Bytes the tenant's checkpoints take on disk (objects, trees, indexes: what TENANT_QUOTA_BYTES
   * counts), by GNU du in a child process: the store may hold hundreds of thousands of objects.
   */
  async storedBytes (tenant: string): Promise<number> {
    const dir = path.join(this.#dir, tenant)
    try {
      const { stdout } = await execFileAsync('du', ['-s', '-B1', '-x', '--', dir], { timeout: 60_000 })
      const n = Number(stdout.split('\t')[0])
      return Number.isFinite(n) ? n : 0
    } catch {
      // No checkpoint yet (no directory), or du failed: nothing to count.
      return 0
    }
  }

  // --- layout -------------------------------------------------------------------------------

  #tenantDir (ws: Workspace): string {
    return path.join(this.#dir, ws.tenant)
  }

  #wsDir (ws: Workspace): string {
    return path.join(this.#tenantDir(ws), 'ws', ws.workspaceId)
  }

  #objects (ws: Workspace): ObjectStore {
    const store = new ObjectStore(this.#tenantDir(ws), this.#trees)
    store.init()
    return store
  }

  #readIndex (ws: Workspace): IndexRecord[] {
    return this.#readIndexAt(path.join(this.#wsDir(ws), 'index.json'))
  }

  #readIndexAt (file: string): IndexRecord[] {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as IndexRecord[]
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return []
      throw err
    }
  }

  #writeIndex (ws: Workspace, index: readonly IndexRecord[]): void {
    const dir = this.#wsDir(ws)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const tmp = path.join(dir, `.index.${randomBytes(6).toString('hex')}`)
    writeFileSync(tmp, JSON.stringify(index), { mode: 0o600 })
    renameSync(tmp, path.join(dir, 'index.json'))
  }

  #find (ws: Workspace, checkpointId: string): IndexRecord {
    const rec = this.#readIndex(ws).find((r) => r.checkpointId === checkpointId)
    if (rec === undefined) throw new HttpError('GW_CHECKPOINT_NOT_FOUND', `No checkpoint ${checkpointId} for workspace ${ws.workspaceId}`)
    return rec
  }

  // --- stat memory --------------------------------------------------------------------------

  #memoKey (ws: Workspace): string {
    return `${ws.tenant}\0${ws.workspaceId}\0${ws.root}`
  }

  #pass (ws: Workspace): Pass {
    return {
      root: ws.root,
      memo: this.#memos.get(this.#memoKey(ws)),
      next: new Map(),
      lastTurn: performance.now(),
      files: 0,
      bytes: 0,
      work: { hashedFiles: 0, hashedBytes: 0, newObjects: 0, newTrees: 0, newBytes: 0 }
    }
  }

  #remember (ws: Workspace, memo: Memo): void {
    const key = this.#memoKey(ws)
    this.#memos.delete(key)
    this.#memos.set(key, memo)
    while (this.#memos.size > this.#cacheSize) this.#memos.delete(this.#memos.keys().next().value as string)
  }

  async #maybeTurn (pass: Pass): Promise<void> {
    if (performance.now() - pass.lastTurn < SLICE_MS) return
    await turn()
    pass.lastTurn = performance.now()
  }

  // --- create -------------------------------------------------------------------------------

  /** Records the directory open as `fd` (and everything below it); returns its tree hash. */
  async #snapshotDir (store: ObjectStore, fd: number, rel: string, depth: number, pass: Pass): Promise<string> {
    if (depth > MAX_DEPTH) throw tooDeep(rel)
    await this.#maybeTurn(pass)
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
      await this.#maybeTurn(pass)
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
          const entry = await this.#snapshotFile(store, fd, name, st as Stats, before, files, pass)
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
          const tree = await this.#snapshotDir(store, sub, rel === '' ? name : `${rel}/${name}`, depth + 1, pass)
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

  async #snapshotFile (
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
      await this.#maybeTurn(pass)
      return [name, 'f', fileMode(fst), put.bytes, msOf(fst), put.sha]
    } finally {
      closeSync(rfd)
    }
  }

  // --- restore ------------------------------------------------------------------------------

  async #restoreDir (ws: Workspace, store: ObjectStore, fd: number, rel: string, treeSha: string, depth: number, pass: Pass): Promise<void> {
    if (depth > MAX_DEPTH) throw tooDeep(rel)
    await this.#maybeTurn(pass)
    const before = pass.memo?.get(rel)
    const target = before?.tree === treeSha ? before.entries : store.readTree(treeSha)
    for (const e of target) checkName(e[0])
    const wanted = new Set(target.map((e) => e[0]))
    for (const name of readdirSync(at(fd))) {
      if (!wanted.has(name)) removeAt(fd, name)
    }
    const files = new Map<string, FileSig>()
    for (const e of target) {
      await this.#maybeTurn(pass)
      const name = e[0]
      if (e[1] === 'f') {
        files.set(name, this.#restoreFile(ws, store, fd, lstatHint(pass, rel, fd, name), e, before?.files.get(name)))
      } else if (e[1] === 'l') {
        this.#restoreLink(ws, fd, name, e[5])
      } else {
        let sub = openDirBeneath(fd, name)
        if (sub === undefined) {
          removeAt(fd, name)
          mkdirSync(at(fd, name), { mode: 0o700 })
          sub = openDirBeneath(fd, name)
          if (sub === undefined) throw new RaceError()
          if (ws.owner !== undefined) fchownSync(sub, ws.owner.uid, ws.owner.gid)
        }
        try {
          await this.#restoreDir(ws, store, sub, rel === '' ? name : `${rel}/${name}`, e[5], depth + 1, pass)
          // The mode last: a read-only directory is filled first.
          if (dirMode(fstatSync(sub)) !== e[2]) fchmodSync(sub, e[2])
        } finally {
          closeSync(sub)
        }
      }
    }
    pass.next.set(rel, { tree: treeSha, entries: target, files })
  }

  #restoreFile (ws: Workspace, store: ObjectStore, fd: number, st: Stats | undefined, e: FileEntry, known: FileSig | undefined): FileSig {
    const [name, , mode, , mtime, sha] = e
    if (st?.isFile() === true) {
      if (sameSig(known, st) && known.sha === sha && fileMode(st) === mode && msOf(st) === mtime) return known
      // Unknown to us, or only its mode or time differ: compare the content before rewriting it.
      let rfd: number | undefined
      try {
        rfd = openSync(at(fd, name), READ_FLAGS)
      } catch (err) {
        if (errnoOf(err) !== 'ELOOP' && errnoOf(err) !== 'ENOENT') throw err
      }
      if (rfd !== undefined) {
        try {
          const fst = fstatSync(rfd)
          const same = fst.isFile() && (sameSig(known, fst) ? known.sha : hashFd(rfd).sha) === sha
          if (same) {
            if (fileMode(fst) !== mode) fchmodSync(rfd, mode)
            if (msOf(fst) !== mtime) this.#setTimes(rfd, mtime)
            return sigOf(fstatSync(rfd), sha)
          }
        } finally {
          closeSync(rfd)
        }
      }
    }
    return this.#writeFile(ws, store, fd, e, st)
  }

  /** Writes the object beside the target, then renames it over whatever is there now. */
  #writeFile (ws: Workspace, store: ObjectStore, fd: number, e: FileEntry, current: Stats | undefined): FileSig {
    const [name, , mode, , mtime, sha] = e
    if (current?.isDirectory() === true) removeAt(fd, name)
    const tmp = tmpName()
    const out = openSync(at(fd, tmp), CREATE_FLAGS, 0o600)
    let renamed = false
    try {
      const src = openSync(store.objectPath(sha), O_RDONLY | O_CLOEXEC)
      try {
        const buf = Buffer.allocUnsafe(COPY_CHUNK)
        let pos = 0
        for (;;) {
          const n = readSync(src, buf, 0, buf.length, pos)
          if (n === 0) break
          let off = 0
          while (off < n) off += writeSync(out, buf, off, n - off)
          pos += n
        }
      } finally {
        closeSync(src)
      }
      if (ws.owner !== undefined) fchownSync(out, ws.owner.uid, ws.owner.gid)
      fchmodSync(out, mode)
      this.#setTimes(out, mtime)
      try {
        renameSync(at(fd, tmp), at(fd, name))
      } catch (err) {
        // A directory appeared at the name meanwhile.
        if (errnoOf(err) !== 'EISDIR' && errnoOf(err) !== 'ENOTEMPTY' && errnoOf(err) !== 'EEXIST') throw err
        removeAt(fd, name)
        renameSync(at(fd, tmp), at(fd, name))
      }
      renamed = true
      // The fd's own inode, after the rename (which changes its ctime): what the next pass will lstat.
      return sigOf(fstatSync(out), sha)
    } finally {
      closeSync(out)
      if (!renamed) {
        try { unlinkSync(at(fd, tmp)) } catch {}
      }
    }
  }

  /**
   * Sets mtime to a whole millisecond. Half a microsecond more keeps the float to timespec
   * conversion from landing just below it, so the stat rounds back to the recorded value.
   */
  #setTimes (fd: number, mtimeMs: number): void {
    const t = (mtimeMs + 0.0005) / 1000
    futimesSync(fd, t, t)
  }

  #restoreLink (ws: Workspace, fd: number, name: string, target: string): void {
    let current: string | undefined
    try {
      current = readlinkSync(at(fd, name))
    } catch {}
    if (current === target) return
    const st = lstatSync(at(fd, name), { throwIfNoEntry: false })
    if (st?.isDirectory() === true) removeAt(fd, name)
    const tmp = tmpName()
    symlinkSync(target, at(fd, tmp))
    try {
      // lchown: the link itself, whatever its target.
      if (ws.owner !== undefined) lchownSync(at(fd, tmp), ws.owner.uid, ws.owner.gid)
      renameSync(at(fd, tmp), at(fd, name))
    } catch (err) {
      try { unlinkSync(at(fd, tmp)) } catch {}
      throw err
    }
  }

  // --- garbage collection -------------------------------------------------------------------

  /**
   * Mark and sweep over one tenant's store. Marks everything the remaining checkpoints (every
   * workspace of the tenant) reach; sweeps what the dropped ones reached and nothing marked, or,
   * with 'all', every object and tree not marked (also what a crashed create left behind).
   */
  async #collect (store: ObjectStore, tenant: string, dropped: readonly IndexRecord[] | 'all'): Promise<void> {
    const full = dropped === 'all' || this.#dirty.has(tenant)
    this.#dirty.add(tenant)
    await this.#markAndSweep(store, tenant, full ? 'all' : dropped)
    this.#dirty.delete(tenant)
  }

  async #markAndSweep (store: ObjectStore, tenant: string, dropped: readonly IndexRecord[] | 'all'): Promise<void> {
    const liveTrees = new Set<string>()
    const liveObjects = new Set<string>()
    const wsRoot = path.join(this.#dir, tenant, 'ws')
    let wsDirs: string[] = []
    try {
      wsDirs = readdirSync(wsRoot)
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err
    }
    const readTree = (sha: string): readonly TreeEntry[] | undefined => {
      try {
        return store.readTree(sha)
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return undefined
        throw err
      }
    }
    let lastTurn = performance.now()
    const maybeTurn = async (): Promise<void> => {
      if (performance.now() - lastTurn < SLICE_MS) return
      await turn()
      lastTurn = performance.now()
    }
    const mark = async (sha: string): Promise<void> => {
      if (liveTrees.has(sha)) return
      liveTrees.add(sha)
      await maybeTurn()
      for (const e of readTree(sha) ?? []) {
        if (e[1] === 'f') liveObjects.add(e[5])
        else if (e[1] === 'd') await mark(e[5])
      }
    }
    for (const w of wsDirs) {
      for (const rec of this.#readIndexAt(path.join(wsRoot, w, 'index.json'))) await mark(rec.tree)
    }

    if (dropped === 'all') {
      for (const [kind, sub] of [['object', 'objects'], ['tree', 'trees']] as const) {
        const live = kind === 'object' ? liveObjects : liveTrees
        const base = path.join(store.dir, sub)
        for (const prefix of readdirSync(base)) {
          for (const rest of readdirSync(path.join(base, prefix))) {
            if (!live.has(prefix + rest)) store.remove(kind, prefix + rest)
          }
          await maybeTurn()
        }
      }
      for (const t of readdirSync(path.join(store.dir, 'tmp'))) rmSync(path.join(store.dir, 'tmp', t), { force: true })
      return
    }

    const seen = new Set<string>()
    const sweep = async (sha: string): Promise<void> => {
      if (liveTrees.has(sha) || seen.has(sha)) return
      seen.add(sha)
      await maybeTurn()
      for (const e of readTree(sha) ?? []) {
        if (e[1] === 'f' && !liveObjects.has(e[5])) store.remove('object', e[5])
        else if (e[1] === 'd') await sweep(e[5])
      }
      store.remove('tree', sha)
    }
    for (const rec of dropped) await sweep(rec.tree)
  }
}
