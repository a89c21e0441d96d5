import type { Dirent } from 'node:fs'
import { constants as fsConstants } from 'node:fs'
import { open, opendir, readdir } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { at, WALK_MAX_DEPTH } from '../../workspace/tree.js'
import type { WalkEntry, WalkOptions } from '../../workspace/tree.js'
import { pathSortKey } from '../glob.js'

const DIR_FLAGS = fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW | 0o2000000

function kindOf (d: Dirent): WalkEntry['kind'] {
  if (d.isFile()) return 'file'
  if (d.isDirectory()) return 'dir'
  if (d.isSymbolicLink()) return 'symlink'
  return 'other'
}

/**
 * tree.ts's `walk` (directories entered by fd with O_NOFOLLOW|O_DIRECTORY beneath the one before,
 * symlinks yielded and never entered), but in bytewise name order per directory: grep collects
 * matches in walk order and must give them in comparePaths order, the order ripgrep's results
 * are sorted into (walk sorts by UTF-16 code units, which differs above U+D7FF).
 */
export interface BytewiseWalkOptions extends WalkOptions {
  /**
   * Awaited before a directory's fd is closed: the caller may still be opening entries beneath
   * it (several at once), and a closed fd number can be reused by an unrelated open.
   */
  onLeave?: (dir: FileHandle) => Promise<void>
}

export async function * walkBytewise (base: FileHandle, opts: BytewiseWalkOptions = {}): AsyncGenerator<WalkEntry> {
  const maxDepth = opts.maxDepth ?? WALK_MAX_DEPTH
  async function * inside (dir: FileHandle, prefix: string, depth: number): AsyncGenerator<WalkEntry> {
    const entries: Dirent[] = []
    try {
      const handle = await opendir(at(dir), { bufferSize: 256 })
      for await (const d of handle) entries.push(d)
    } catch {
      // A directory removed under us: what was read is all there is.
    }
    const keyed = entries.map((d) => ({ d, k: pathSortKey(d.name) }))
    keyed.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
    for (const { d } of keyed) {
      if (opts.signal?.aborted === true) return
      const kind = kindOf(d)
      if (kind === 'dir' && opts.skip?.has(d.name) === true) continue
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

/**
 * The same walk for callers that need no per-entry order (glob sorts its result): `visit` gets
 * each directory's entries at once (far fewer promise hops than one yield per entry) and returns
 * false to stop. Directories are entered by fd, O_NOFOLLOW|O_DIRECTORY, never through a symlink.
 * Resolves true when the walk was stopped by `visit`.
 */
export async function walkDirs (
  base: FileHandle,
  opts: WalkOptions,
  visit: (prefix: string, entries: Dirent[]) => boolean
): Promise<boolean> {
  const maxDepth = opts.maxDepth ?? WALK_MAX_DEPTH
  const inside = async (dir: FileHandle, prefix: string, depth: number): Promise<boolean> => {
    if (opts.signal?.aborted === true) return true
    let entries: Dirent[]
    try {
      entries = await readdir(at(dir), { withFileTypes: true })
    } catch {
      return false
    }
    if (!visit(prefix, entries)) return true
    if (depth >= maxDepth) return false
    for (const d of entries) {
      if (!d.isDirectory() || opts.skip?.has(d.name) === true) continue
      let sub: FileHandle
      try {
        sub = await open(at(dir, d.name), DIR_FLAGS)
      } catch {
        continue
      }
      try {
        if (await inside(sub, prefix === '' ? d.name : `${prefix}/${d.name}`, depth + 1)) return true
      } finally {
        await sub.close().catch(() => {})
      }
    }
    return false
  }
  return await inside(base, '', 1)
}
