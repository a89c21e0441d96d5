/**
 * The restore half of a checkpoint: makes a workspace's tree exactly a stored tree. Files that still
 * match what the stat memory knows of them (checkpoint-snapshot.ts) are left alone, the others are
 * compared by content, and only those that differ are written.
 *
 * The tenant may rewrite or swap any path for a symlink while we work (its background commands run
 * concurrently). So, as in the snapshot, every directory is opened beneath its parent's fd with
 * O_NOFOLLOW|O_DIRECTORY, and a restore writes only into directory fds obtained that way: a temp
 * file, then a rename that never follows; symlinks are recreated as symlinks, never followed. A
 * step that meets an entry the tenant changed under it fails; another pass over the tree finishes
 * the job.
 */
import { createHash, randomBytes } from 'node:crypto'
import {
  closeSync, constants as fsConstants, fchmodSync, fchownSync, fstatSync, futimesSync, lchownSync, lstatSync, mkdirSync,
  openSync, readdirSync, readlinkSync, readSync, renameSync, rmdirSync, symlinkSync, unlinkSync, writeSync
} from 'node:fs'
import type { Stats } from 'node:fs'
import { HttpError } from '../../errors.js'
import type { Workspace } from '../types.js'
import type { FileEntry, ObjectStore } from './checkpoint-objects.js'
import { dirMode, fileMode, lstatHint, MAX_DEPTH, maybeTurn, msOf, newPass, sameSig, sigOf, tooDeep } from './checkpoint-snapshot.js'
import type { FileSig, Memo, Pass } from './checkpoint-snapshot.js'
import { at, CREATE_FLAGS, DIR_FLAGS, errnoOf, O_CLOEXEC, openDirBeneath, READ_FLAGS } from './fd.js'

const { O_RDONLY } = fsConstants
const COPY_CHUNK = 1024 * 1024

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

/**
 * Makes the workspace's tree exactly the checkpoint's and returns the stat memory of the result.
 * A process of the tenant that changes the tree meanwhile can make a step fail (a directory
 * refilled while it is removed, a name retyped between two calls). Another pass over the tree
 * finishes the job; it has little left to do.
 */
export async function restoreTree (
  ws: Workspace, store: ObjectStore, checkpoint: { checkpointId: string, tree: string }, first: Pass
): Promise<Memo> {
  let pass = first
  for (let attempt = 1; ; attempt++) {
    const root = openSync(ws.root, DIR_FLAGS)
    try {
      await restoreDir(ws, store, root, '', checkpoint.tree, 0, pass)
      return pass.next
    } catch (err) {
      if (!(err instanceof RaceError) && !RACE_CODES.has(errnoOf(err) ?? '')) throw err
      if (attempt === RESTORE_ATTEMPTS) {
        throw new HttpError('GW_WORKSPACE_BUSY', `The restore of checkpoint ${checkpoint.checkpointId} was interrupted ${attempt} times by changes to the workspace (a background process writing to it?)`)
      }
      pass = newPass(ws.root, undefined)
    } finally {
      closeSync(root)
    }
  }
}

async function restoreDir (ws: Workspace, store: ObjectStore, fd: number, rel: string, treeSha: string, depth: number, pass: Pass): Promise<void> {
  if (depth > MAX_DEPTH) throw tooDeep(rel)
  await maybeTurn(pass)
  const before = pass.memo?.get(rel)
  const target = before?.tree === treeSha ? before.entries : store.readTree(treeSha)
  for (const e of target) checkName(e[0])
  const wanted = new Set(target.map((e) => e[0]))
  for (const name of readdirSync(at(fd))) {
    if (!wanted.has(name)) removeAt(fd, name)
  }
  const files = new Map<string, FileSig>()
  for (const e of target) {
    await maybeTurn(pass)
    const name = e[0]
    if (e[1] === 'f') {
      files.set(name, restoreFile(ws, store, fd, lstatHint(pass, rel, fd, name), e, before?.files.get(name)))
    } else if (e[1] === 'l') {
      restoreLink(ws, fd, name, e[5])
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
        await restoreDir(ws, store, sub, rel === '' ? name : `${rel}/${name}`, e[5], depth + 1, pass)
        // The mode last: a read-only directory is filled first.
        if (dirMode(fstatSync(sub)) !== e[2]) fchmodSync(sub, e[2])
      } finally {
        closeSync(sub)
      }
    }
  }
  pass.next.set(rel, { tree: treeSha, entries: target, files })
}

function restoreFile (ws: Workspace, store: ObjectStore, fd: number, st: Stats | undefined, e: FileEntry, known: FileSig | undefined): FileSig {
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
          if (msOf(fst) !== mtime) setTimes(rfd, mtime)
          return sigOf(fstatSync(rfd), sha)
        }
      } finally {
        closeSync(rfd)
      }
    }
  }
  return writeFile(ws, store, fd, e, st)
}

/** Writes the object beside the target, then renames it over whatever is there now. */
function writeFile (ws: Workspace, store: ObjectStore, fd: number, e: FileEntry, current: Stats | undefined): FileSig {
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
    setTimes(out, mtime)
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
function setTimes (fd: number, mtimeMs: number): void {
  const t = (mtimeMs + 0.0005) / 1000
  futimesSync(fd, t, t)
}

function restoreLink (ws: Workspace, fd: number, name: string, target: string): void {
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
