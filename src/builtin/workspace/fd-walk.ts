/**
 * The walk of a directory by FileHandle, for the file tools (grep's Node engine, through tools/walk.ts
 * `walkBytewise`): one entry at a time in name order, every directory entered beneath its parent's fd
 * (docs/ARCHITECTURE.md#fd-layer says which other walkers there are, and why).
 */
import type { Dirent } from 'node:fs'
import { open, opendir } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { at, DIR_FLAGS } from './fd.js'

/** One entry met by `walk`. `dir` is open only until the generator resumes. */
export interface WalkEntry {
  dir: FileHandle
  name: string
  /** Path relative to the walk's base, '/'-separated. */
  rel: string
  kind: 'file' | 'dir' | 'symlink' | 'other'
}

export interface WalkOptions {
  /** Directory names never entered (and not yielded). */
  skip?: ReadonlySet<string>
  signal?: AbortSignal
  /** Stop after this many entries (a bound on work for huge trees). */
  maxEntries?: number
  /** Directories deeper than this are not entered (each level holds an fd while it is walked). */
  maxDepth?: number
  /** Order of names within a directory: by this key (default: the name, UTF-16 order). */
  sortKey?: (name: string) => string
  /**
   * Awaited before a directory's fd is closed: the caller may still be opening entries beneath
   * it, and a closed fd number can be reused by an unrelated open.
   */
  onLeave?: (dir: FileHandle) => Promise<void>
}

/** How deep walks go, and uploads may nest: each level holds an fd while it is walked. */
export const WALK_MAX_DEPTH = 256

function kindOf (d: Dirent): WalkEntry['kind'] {
  if (d.isFile()) return 'file'
  if (d.isDirectory()) return 'dir'
  if (d.isSymbolicLink()) return 'symlink'
  return 'other'
}

/**
 * Depth-first walk below an open directory, in name order per directory. Directories are entered
 * by fd with O_NOFOLLOW|O_DIRECTORY, so a directory swapped for a symlink mid-walk is skipped, not
 * followed; symlinks are yielded as such and never entered. The base handle stays the caller's.
 */
export async function * walk (base: FileHandle, opts: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  let seen = 0
  const maxDepth = opts.maxDepth ?? WALK_MAX_DEPTH
  async function * inside (dir: FileHandle, prefix: string, depth: number): AsyncGenerator<WalkEntry> {
    const entries: Dirent[] = []
    const handle = await opendir(at(dir), { bufferSize: 256 })
    try {
      for await (const d of handle) entries.push(d)
    } catch {
      // A directory removed under us: what was read is all there is.
    }
    const key = opts.sortKey ?? ((name: string) => name)
    const keyed = entries.map((d) => ({ d, k: key(d.name) }))
    keyed.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
    for (const { d } of keyed) {
      if (opts.signal?.aborted === true) return
      if (opts.maxEntries !== undefined && seen >= opts.maxEntries) return
      const kind = kindOf(d)
      if (kind === 'dir' && opts.skip?.has(d.name) === true) continue
      seen++
      const rel = prefix === '' ? d.name : `${prefix}/${d.name}`
      yield { dir, name: d.name, rel, kind }
      if (kind !== 'dir' || depth >= maxDepth) continue
      let sub: FileHandle
      try {
        sub = await open(at(dir, d.name), DIR_FLAGS)
      } catch {
        continue
      }
      try {
        yield * inside(sub, rel, depth + 1)
      } finally {
        await opts.onLeave?.(sub)
        await sub.close().catch(() => {})
      }
    }
  }
  yield * inside(base, '', 1)
}
