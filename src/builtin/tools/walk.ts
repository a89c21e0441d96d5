/**
 * What glob and grep share: the path order both answer in (comparePaths: segment by segment,
 * bytewise, the order ripgrep's results are sorted into) and the directory walks over open fds.
 */
import type { Dirent } from 'node:fs'
import { constants as fsConstants } from 'node:fs'
import { open, readdir } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { at, walk, WALK_MAX_DEPTH } from '../workspace/tree.js'
import type { WalkEntry, WalkOptions } from '../workspace/tree.js'

/** Order shared with grep: compare path segment by segment, bytewise (what a sorted tree walk yields). */
export function comparePaths (a: string, b: string): number {
  const as = a.split('/')
  const bs = b.split('/')
  const n = Math.min(as.length, bs.length)
  for (let i = 0; i < n; i++) {
    const c = Buffer.compare(Buffer.from(as[i] as string), Buffer.from(bs[i] as string))
    if (c !== 0) return c
  }
  return as.length - bs.length
}

const NON_ASCII = /[\u0080-\uffff]/

/**
 * A string whose plain `<` order is exactly comparePaths' order, computed once per path instead
 * of once per comparison (comparePaths splits and encodes both sides on every call, which is most
 * of the cost of sorting tens of thousands of paths). '/' becomes '\0', which sorts below every
 * byte a name can hold, so comparing the joined strings bytewise compares segment by segment and
 * puts a path before its own extensions ("a" < "a/x" < "a.ts"). Non-ASCII text is spelled as its
 * UTF-8 bytes, one latin1 code unit per byte, so that code-unit order is byte order (UTF-16 order
 * differs from UTF-8 order above U+D7FF).
 */
export function pathSortKey (p: string): string {
  const joined = p.replaceAll('/', '\0')
  return NON_ASCII.test(joined) ? Buffer.from(joined, 'utf8').toString('latin1') : joined
}

/** Sorts paths in comparePaths order (in place) and returns the array. */
export function sortPaths (paths: string[]): string[] {
  const keyed = paths.map((p) => ({ p, k: pathSortKey(p) }))
  keyed.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
  for (let i = 0; i < keyed.length; i++) paths[i] = (keyed[i] as { p: string }).p
  return paths
}

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
