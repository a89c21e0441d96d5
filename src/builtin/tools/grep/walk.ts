import type { Dirent } from 'node:fs'
import { constants as fsConstants } from 'node:fs'
import { open, readdir } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { at, walk, WALK_MAX_DEPTH } from '../../workspace/tree.js'
import type { WalkEntry, WalkOptions } from '../../workspace/tree.js'
import { pathSortKey } from '../glob.js'

const DIR_FLAGS = fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW | 0o2000000

/**
 * tree.ts's `walk` in bytewise name order per directory: grep collects matches in walk order and
 * must give them in comparePaths order, the order ripgrep's results are sorted into (the default
 * UTF-16 order differs above U+D7FF).
 */
export function walkBytewise (base: FileHandle, opts: WalkOptions = {}): AsyncGenerator<WalkEntry> {
  return walk(base, { ...opts, sortKey: pathSortKey })
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
