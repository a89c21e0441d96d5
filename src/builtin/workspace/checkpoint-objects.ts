/**
 * The content-addressed half of the checkpoint store: immutable objects named by their sha256.
 *
 * Two kinds, kept in two directories so each can be counted and swept on its own:
 * - `objects/ab/cdef...`: the bytes of one regular file, copied out of the workspace (never hard
 *   linked: the tenant could change the shared inode later through its own name);
 * - `trees/ab/cdef...`: one directory listing, the JSON of its entries sorted by name. A subtree is
 *   named by the hash of its listing, so a checkpoint after 10 changed files adds those 10 files
 *   and the listings on their paths, and shares every other listing with the checkpoint before.
 *
 * The store directory is the gateway's own (outside every workspace, mode 0700), so plain path
 * operations are safe in it. Every object is written to `tmp/` first and renamed into place, so a
 * name that exists always holds complete content.
 */
import { createHash, randomBytes } from 'node:crypto'
import { closeSync, mkdirSync, openSync, readFileSync, readSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs'
import path from 'node:path'
import { setImmediate as turn } from 'node:timers/promises'
import { errnoOf } from './fd.js'

/** A file: [name, 'f', mode, size, mtimeMs, sha256 of the content]. */
export type FileEntry = [name: string, type: 'f', mode: number, size: number, mtimeMs: number, sha: string]
/** A directory: [name, 'd', mode, 0, 0, sha256 of its tree object]. */
export type DirEntry = [name: string, type: 'd', mode: number, size: 0, mtimeMs: 0, tree: string]
/** A symlink: [name, 'l', 0, 0, 0, target]; restored as a link, never followed. */
export type LinkEntry = [name: string, type: 'l', mode: 0, size: 0, mtimeMs: 0, target: string]
export type TreeEntry = FileEntry | DirEntry | LinkEntry

const SHA_RE = /^[0-9a-f]{64}$/
const COPY_CHUNK = 1024 * 1024
const YIELD_CHUNKS = 8
/** Files below this are read in one piece. */
const SMALL_FILE = 256 * 1024
const TMP_PREFIX = `${process.pid}-${randomBytes(4).toString('hex')}`
let tmpCounter = 0

/** Entries by name in UTF-16 order, the one order trees are written in (equal trees, equal hashes). */
export function sortEntries<T extends { 0: string }> (entries: T[]): T[] {
  return entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
}

export interface PutResult {
  sha: string
  /** Bytes read from the source. */
  bytes: number
  /** False when an object with that content was already stored (nothing was added). */
  added: boolean
}

/**
 * Parsed trees, least recently used first. Trees are immutable, so an entry is never stale; the
 * bound is a number of trees (a 50,000-file workspace has about a thousand).
 */
export class TreeCache {
  readonly #map = new Map<string, readonly TreeEntry[]>()
  readonly #max: number

  constructor (max: number) {
    this.#max = max
  }

  get (key: string): readonly TreeEntry[] | undefined {
    const v = this.#map.get(key)
    if (v !== undefined) {
      this.#map.delete(key)
      this.#map.set(key, v)
    }
    return v
  }

  set (key: string, v: readonly TreeEntry[]): void {
    this.#map.delete(key)
    this.#map.set(key, v)
    if (this.#map.size > this.#max) this.#map.delete(this.#map.keys().next().value as string)
  }

  delete (key: string): void {
    this.#map.delete(key)
  }
}

export class ObjectStore {
  readonly dir: string
  readonly #tmp: string
  readonly #cache: TreeCache | undefined

  constructor (dir: string, cache?: TreeCache) {
    this.dir = dir
    this.#tmp = path.join(dir, 'tmp')
    this.#cache = cache
  }

  /** Creates the layout (mode 0700: nothing in it is any tenant's business). */
  init (): void {
    mkdirSync(this.#tmp, { recursive: true, mode: 0o700 })
    mkdirSync(path.join(this.dir, 'objects'), { recursive: true, mode: 0o700 })
    mkdirSync(path.join(this.dir, 'trees'), { recursive: true, mode: 0o700 })
  }

  objectPath (sha: string): string {
    return path.join(this.dir, 'objects', sha.slice(0, 2), sha.slice(2))
  }

  treePath (sha: string): string {
    return path.join(this.dir, 'trees', sha.slice(0, 2), sha.slice(2))
  }

  #tmpName (): string {
    // Unique without a random draw per object: one tenant's writes are serialised, and the prefix
    // differs per process.
    return path.join(this.#tmp, `${TMP_PREFIX}.${++tmpCounter}`)
  }

  /** rename into the object's prefix directory, made on first use. */
  #place (tmp: string, dest: string): void {
    try {
      renameSync(tmp, dest)
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err
      mkdirSync(path.dirname(dest), { recursive: true, mode: 0o700 })
      renameSync(tmp, dest)
    }
  }

  #exists (dest: string): boolean {
    try {
      statSync(dest)
      return true
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return false
      throw err
    }
  }

  /** Moves a finished temp file to `dest`, or drops it when `dest` exists (same content, by its name). */
  #publish (tmp: string, dest: string): boolean {
    if (this.#exists(dest)) {
      unlinkSync(tmp)
      return false
    }
    this.#place(tmp, dest)
    return true
  }

  /**
   * A small file (most of a source tree) in one read: hashed before anything is written, so
   * content the store holds already costs no write at all.
   */
  #putSmall (src: number, size: number): PutResult | undefined {
    const buf = Buffer.allocUnsafe(size + 1)
    let got = 0
    while (got < buf.length) {
      const n = readSync(src, buf, got, buf.length - got, got)
      if (n === 0) break
      got += n
    }
    // Grew since its fstat: the streaming copy handles it.
    if (got > size) return undefined
    const data = buf.subarray(0, got)
    const sha = createHash('sha256').update(data).digest('hex')
    const dest = this.objectPath(sha)
    if (this.#exists(dest)) return { sha, bytes: got, added: false }
    const tmp = this.#tmpName()
    const out = openSync(tmp, 'wx', 0o600)
    try {
      let off = 0
      while (off < got) off += writeSync(out, data, off, got - off)
    } catch (err) {
      closeSync(out)
      try { unlinkSync(tmp) } catch {}
      throw err
    }
    closeSync(out)
    this.#place(tmp, dest)
    return { sha, bytes: got, added: true }
  }

  /**
   * Copies an open regular file into the store while hashing it: the source is read once, from
   * the fd the caller opened without following anything. Reads to EOF, so a file that grows
   * meanwhile is stored as read (its ctime changed, the next checkpoint reads it again). Not
   * fsynced: one fsync per object made a first checkpoint of 50,000 files take minutes; a host
   * crash can cost the newest checkpoints, never the workspace.
   */
  async putFile (src: number, size: number): Promise<PutResult> {
    if (size < SMALL_FILE) {
      const small = this.#putSmall(src, size)
      if (small !== undefined) return small
    }
    const tmp = this.#tmpName()
    const out = openSync(tmp, 'wx', 0o600)
    const hash = createHash('sha256')
    const buf = Buffer.allocUnsafe(COPY_CHUNK)
    let bytes = 0
    let done = false
    try {
      for (let chunks = 1; ; chunks++) {
        const bytesRead = readSync(src, buf, 0, buf.length, bytes)
        if (bytesRead === 0) break
        const chunk = buf.subarray(0, bytesRead)
        hash.update(chunk)
        let off = 0
        while (off < bytesRead) off += writeSync(out, chunk, off, bytesRead - off)
        bytes += bytesRead
        // Synchronous reads are far cheaper for the many small files; a big one lets the event loop run.
        if (chunks % YIELD_CHUNKS === 0) await turn()
      }
      closeSync(out)
      done = true
      const sha = hash.digest('hex')
      return { sha, bytes, added: this.#publish(tmp, this.objectPath(sha)) }
    } finally {
      if (!done) {
        try { closeSync(out) } catch {}
        try { unlinkSync(tmp) } catch {}
      }
    }
  }

  /** Stores a tree (its entries already sorted); returns its hash and whether it was new. */
  putTree (entries: readonly TreeEntry[]): { sha: string, added: boolean, bytes: number } {
    const data = Buffer.from(JSON.stringify(entries))
    const sha = createHash('sha256').update(data).digest('hex')
    this.#cache?.set(`${this.dir}\0${sha}`, entries)
    const dest = this.treePath(sha)
    try {
      statSync(dest)
      return { sha, added: false, bytes: 0 }
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err
    }
    const tmp = this.#tmpName()
    const fd = openSync(tmp, 'wx', 0o600)
    try {
      writeSync(fd, data)
    } finally {
      closeSync(fd)
    }
    return { sha, added: this.#publish(tmp, dest), bytes: data.length }
  }

  readTree (sha: string): readonly TreeEntry[] {
    const cached = this.#cache?.get(`${this.dir}\0${sha}`)
    if (cached !== undefined) return cached
    if (!SHA_RE.test(sha)) throw new Error(`checkpoint store: bad tree reference ${sha.slice(0, 80)}`)
    const parsed: unknown = JSON.parse(readFileSync(this.treePath(sha), 'utf8'))
    if (!Array.isArray(parsed)) throw new Error(`checkpoint store: tree ${sha} is not a list`)
    const entries = parsed as TreeEntry[]
    this.#cache?.set(`${this.dir}\0${sha}`, entries)
    return entries
  }

  /** Removes an object or a tree; a missing one is fine (collected already). */
  remove (kind: 'object' | 'tree', sha: string): void {
    if (!SHA_RE.test(sha)) return
    if (kind === 'tree') this.#cache?.delete(`${this.dir}\0${sha}`)
    try {
      unlinkSync(kind === 'object' ? this.objectPath(sha) : this.treePath(sha))
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err
    }
  }
}
