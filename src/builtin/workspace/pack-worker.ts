/**
 * The file-system side of a workspace download, in a worker thread: a walk of the tree below an
 * open directory fd, with the same rules as fd-walk.ts `walk` (every component opened beneath its
 * directory's fd through `/proc/self/fd/<fd>/<name>` with O_NOFOLLOW, directories with
 * O_DIRECTORY, symlinks read and never followed, names in UTF-16 order per directory, no deeper
 * than WALK_MAX_DEPTH), and the contents of the regular files.
 *
 * Why a thread: on a tree of small files a download is four file-system calls per file, and
 * through the libuv pool each costs a round trip; on a loaded host that made the walk ~15x slower
 * than the same calls made synchronously. Synchronous calls on the event loop would stall every
 * other request, so they run here, and the event loop only formats tar headers and gzips.
 *
 * Protocol: workerData `{ baseFd, maxDepth, batchBytes, control }`; `control` is an Int32Array on
 * a SharedArrayBuffer: [0] batches the parent will accept (the worker blocks on it with
 * Atomics.wait: backpressure), [1] set to 1 to stop. Messages: `{ recs, buf }` (buf transferred),
 * then `{ done: true }` or `{ error }`. Records: ['d', rel, mode, mtimeMs], ['l', rel, mode,
 * mtimeMs, target], ['f', rel, mode, mtimeMs, size] followed by ['c', offset, length] records whose
 * lengths add up to exactly `size` (a file that shrinks while read is padded with zeros, one that
 * grows is cut: the tar header is already written). The worker closes every fd it opened, also
 * when stopped; it never closes baseFd, which stays the parent's.
 *
 * Plain JavaScript evaluated from a string: worker threads do not inherit tsx's loader, so the worker cannot
 * import fd.ts; its flags are written into the source as numbers instead.
 */
import { DIR_FLAGS, READ_FLAGS } from './fd.js'

export const PACK_WORKER_SOURCE = `
'use strict'
const { workerData, parentPort } = require('node:worker_threads')
const fs = require('node:fs')
const DIR_FLAGS = ${DIR_FLAGS}
const READ_FLAGS = ${READ_FLAGS}
const { baseFd, maxDepth, batchBytes, control } = workerData
// Errors of an entry that changed or vanished under the walk: the entry is skipped.
const RACES = new Set(['ENOENT', 'ENOTDIR', 'ELOOP', 'EISDIR', 'ENXIO', 'EAGAIN', 'EWOULDBLOCK'])
class Stopped extends Error {}

let recs = []
let buf = new Uint8Array(new ArrayBuffer(batchBytes))
let used = 0
function flush () {
  if (recs.length === 0) return
  for (;;) {
    if (Atomics.load(control, 1) !== 0) throw new Stopped()
    const credits = Atomics.load(control, 0)
    if (credits > 0 && Atomics.compareExchange(control, 0, credits, credits - 1) === credits) break
    Atomics.wait(control, 0, credits, 1000)
  }
  const out = buf.buffer
  parentPort.postMessage({ recs, buf: out }, [out])
  recs = []
  buf = new Uint8Array(new ArrayBuffer(batchBytes))
  used = 0
}
function add (rec) {
  recs.push(rec)
  if (recs.length >= 1024) flush()
}
function at (fd, name) { return '/proc/self/fd/' + fd + '/' + name }
function raced (err) { return err !== null && typeof err === 'object' && RACES.has(err.code) }

function file (dirFd, name, rel) {
  let fd
  try {
    fd = fs.openSync(at(dirFd, name), READ_FLAGS)
  } catch (err) {
    if (raced(err)) return
    throw err
  }
  try {
    const st = fs.fstatSync(fd)
    if (!st.isFile()) return
    const size = st.size
    add(['f', rel, st.mode & 0o777, st.mtimeMs, size])
    let pos = 0
    while (pos < size) {
      if (used === buf.length) flush()
      const want = Math.min(buf.length - used, size - pos)
      let got = 0
      try {
        got = fs.readSync(fd, buf, used, want, pos)
      } catch (err) {
        if (!raced(err)) throw err
      }
      // A file cut short under us: zeros, since its header says size bytes.
      if (got === 0) { buf.fill(0, used, used + want); got = want }
      const off = used
      used += got
      pos += got
      add(['c', off, got])
    }
  } finally {
    fs.closeSync(fd)
  }
}

function dir (dirFd, prefix, depth) {
  let ents
  try {
    ents = fs.readdirSync('/proc/self/fd/' + dirFd, { withFileTypes: true })
  } catch (err) {
    if (raced(err)) return
    throw err
  }
  ents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
  for (const d of ents) {
    if (Atomics.load(control, 1) !== 0) throw new Stopped()
    const rel = prefix === '' ? d.name : prefix + '/' + d.name
    if (d.isFile()) { file(dirFd, d.name, rel); continue }
    let st
    try {
      st = fs.lstatSync(at(dirFd, d.name))
    } catch (err) {
      if (raced(err)) continue
      throw err
    }
    if (st.isFile()) { file(dirFd, d.name, rel); continue }
    if (st.isSymbolicLink()) {
      let target
      try {
        target = fs.readlinkSync(at(dirFd, d.name))
      } catch (err) {
        if (raced(err) || err.code === 'EINVAL') continue
        throw err
      }
      add(['l', rel, st.mode & 0o777, st.mtimeMs, target])
      continue
    }
    if (!st.isDirectory()) continue
    add(['d', rel, st.mode & 0o777, st.mtimeMs])
    if (depth >= maxDepth) continue
    let sub
    try {
      sub = fs.openSync(at(dirFd, d.name), DIR_FLAGS)
    } catch (err) {
      if (raced(err)) continue
      throw err
    }
    try {
      dir(sub, rel, depth + 1)
    } finally {
      fs.closeSync(sub)
    }
  }
}

try {
  dir(baseFd, '', 1)
  flush()
  parentPort.postMessage({ done: true })
} catch (err) {
  if (err instanceof Stopped) parentPort.postMessage({ done: true, stopped: true })
  else parentPort.postMessage({ error: String(err && err.message || err) })
}
`
