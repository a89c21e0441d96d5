import { realpath } from 'node:fs/promises'
import path from 'node:path'
import fg from 'fast-glob'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../types.js'
import { isInside, quoteInput, resolveReadPath } from '../workspace/paths.js'
import { mapLimit, objectSchema, optInt, optStr, str } from './schemas.js'

export const GLOB_DEFAULT_MAX_RESULTS = 1000
/** Entries collected before sorting; beyond it the walk stops and the result is marked truncated. */
const GLOB_SCAN_CAP = 200_000
const SKIP_DIRS = ['.git', 'node_modules']
/** realpath calls in flight for the containment check (each is one thread-pool job). */
const REALPATH_CONCURRENCY = 16

export interface GlobResult {
  pattern: string
  path: string
  matches: string[]
  count: number
  truncated: boolean
}

function checkPattern (pattern: string): void {
  if (pattern.length === 0) throw new ToolError('pattern must not be empty', 'invalid-arguments')
  if (pattern.length > 4096 || pattern.includes('\0')) throw new ToolError('pattern is too long or contains a NUL byte', 'invalid-arguments')
  const q = quoteInput(pattern)
  if (pattern.startsWith('/') || pattern.startsWith('\\') || /^[A-Za-z]:/.test(pattern)) {
    throw new ToolError(`Absolute glob patterns are not allowed (use path for the base directory): ${q}`, 'invalid-arguments')
  }
  if (pattern.split(/[\\/]/).some((seg) => seg === '..')) {
    throw new ToolError(`Path escapes workspace root: ${q}`, 'forbidden')
  }
}

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

/**
 * Collects fast-glob's stream through 'data' events: `for await` over the same stream costs an
 * extra promise per entry, which made the walk ~20-40% slower than fast-glob's own array API on
 * 20,000 matches. The stream (not the array API) is kept so the walk stops at GLOB_SCAN_CAP.
 */
function collect (stream: NodeJS.ReadableStream & { destroy: () => void }, signal: AbortSignal): Promise<{ found: string[], truncated: boolean }> {
  return new Promise((resolve, reject) => {
    const found: string[] = []
    let settled = false
    const finish = (truncated: boolean): void => {
      if (settled) return
      settled = true
      signal.removeEventListener('abort', onAbort)
      resolve({ found, truncated })
    }
    const onAbort = (): void => {
      stream.destroy()
      finish(false)
    }
    signal.addEventListener('abort', onAbort, { once: true })
    stream.on('data', (entry: unknown) => {
      if (settled) return
      found.push(String(entry))
      if (found.length >= GLOB_SCAN_CAP) {
        stream.destroy()
        finish(true)
      }
    })
    stream.on('end', () => finish(false))
    // With suppressErrors fast-glob does not emit walk errors; destroy() after the cap or an abort
    // may still surface one, and then the result is already settled.
    stream.on('error', (err) => {
      if (settled) return
      settled = true
      signal.removeEventListener('abort', onAbort)
      reject(err)
    })
    stream.on('close', () => finish(false))
    if (signal.aborted) onAbort()
  })
}

export const globTool: BuiltinTool = {
  name: 'glob',
  description: 'Find files by glob pattern (standard globstar: "**/*.ts" also matches "a.ts" at the base; braces {a,b} supported). ' +
    'Returns sorted workspace-relative paths of files only; .git and node_modules are skipped and symbolic links are not followed.',
  inputSchema: objectSchema({
    pattern: { type: 'string', description: 'Glob relative to path, e.g. "**/*.ts" or "src/**/*.{ts,tsx}". No ".." segments, not absolute.' },
    path: { type: 'string', description: 'Base directory relative to the workspace root (default: the root), or an absolute path inside an approved read-only root.' },
    maxResults: { type: 'integer', minimum: 1, description: `Maximum number of paths to return. Default ${GLOB_DEFAULT_MAX_RESULTS}.` }
  }, ['pattern']),
  mutates: () => false,
  async run (args, ctx): Promise<GlobResult> {
    const pattern = str(args, 'pattern')
    const baseInput = optStr(args, 'path') ?? '.'
    const maxResults = optInt(args, 'maxResults', 1) ?? GLOB_DEFAULT_MAX_RESULTS
    checkPattern(pattern)
    const base = await resolveReadPath(ctx.workspace, baseInput)
    const area = base.readOnly ? ctx.workspace.readRoots.find((r) => isInside(r.path, base.abs))?.path ?? base.abs : ctx.workspace.root

    const options = {
      cwd: base.abs,
      onlyFiles: true,
      dot: true,
      // fast-glob follows symlinks by default: that walks out of the workspace.
      followSymbolicLinks: false,
      ignore: SKIP_DIRS.map((d) => `**/${d}/**`),
      suppressErrors: true,
      unique: true
    }
    // The static part of a pattern ("link/etc/*") is opened with the kernel following symlinks:
    // check where every task's base really is before walking.
    for (const task of fg.generateTasks(pattern, options)) {
      const real = await realpath(path.resolve(base.abs, task.base)).catch(() => undefined)
      if (real !== undefined && !isInside(area, real)) throw new ToolError(`Path escapes workspace root: ${quoteInput(pattern)}`, 'forbidden')
    }

    const stream = fg.stream(pattern, options) as unknown as NodeJS.ReadableStream & { destroy: () => void }
    const { found, truncated: capped } = await collect(stream, ctx.signal)
    let truncated = capped
    if (ctx.signal.aborted) throw new ToolError('Cancelled')

    // Defence in depth: every match's directory must really be inside the area. The distinct
    // directories (one per ~20 matches on a source tree) are resolved concurrently: one after the
    // other, their thread-pool round trips were a quarter of the call. A match's directory is
    // taken from its relative path ("a/b/c.ts" -> "a/b") and resolved once per directory, which
    // is what path.dirname(path.resolve(base, match)) gives for a file entry, without resolving
    // every match.
    const dirOf = new Array<string>(found.length)
    const dirs = new Set<string>()
    for (let i = 0; i < found.length; i++) {
      const m = found[i] as string
      if (m.includes('..') && m.split('/').includes('..')) { dirOf[i] = ''; continue }
      const slash = m.lastIndexOf('/')
      const d = slash === -1 ? '.' : m.slice(0, slash)
      dirOf[i] = d
      dirs.add(d)
    }
    const dirList = [...dirs]
    const oks = await mapLimit(dirList, REALPATH_CONCURRENCY, async (d) => {
      const real = await realpath(path.resolve(base.abs, d)).catch(() => undefined)
      return real !== undefined && isInside(area, real)
    })
    const dirOk = new Map(dirList.map((d, i) => [d, oks[i] as boolean]))
    const kept: string[] = []
    for (let i = 0; i < found.length; i++) {
      if (dirOk.get(dirOf[i] as string) !== true) continue
      const m = found[i] as string
      kept.push(base.rel === '.' ? m : path.posix.join(base.rel, m))
    }
    sortPaths(kept)
    if (kept.length > maxResults) truncated = true
    const matches = kept.slice(0, maxResults)
    return { pattern, path: base.rel, matches, count: matches.length, truncated }
  }
}
