import type { FileHandle } from 'node:fs/promises'
import path from 'node:path'
import picomatch from 'picomatch'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../tool.js'
import { quoteInput } from '../workspace/paths.js'
import { lstatAt, openForRead } from '../workspace/fd-tree.js'
import { sortPaths, walkDirs } from './walk.js'
import { objectSchema, optInt, optStr, str } from './args.js'
import { isComplexGlob, matchInWorker } from './glob-match.js'
import { regexBudget } from './grep/regex-worker.js'

const GLOB_DEFAULT_MAX_RESULTS = 1000
/** Entries collected before sorting; beyond it the walk stops and the result is marked truncated. */
const GLOB_SCAN_CAP = 200_000
/** Directory entries visited (matching or not); beyond it the walk stops, truncated (bounds the work). */
const GLOB_WALK_CAP = 2_000_000
const SKIP_NAMES: ReadonlySet<string> = new Set(['.git', 'node_modules'])
/**
 * Matching time one call may spend on the event loop (glob-match.ts): past it, the paths still to
 * come are matched in the regex workers, so a bounded pattern over many adversarial paths (each
 * test up to ~1M steps) cannot hold the loop either.
 */
const GLOB_IN_PROCESS_MS = 100

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

/** Unescapes a static glob segment ("a\\*b" names the directory "a*b"). */
function unescapeGlob (s: string): string {
  return s.replace(/\\(.)/g, '$1')
}

function isMissing (err: unknown): boolean {
  return err instanceof ToolError && /^(File does not exist|Not a directory):/.test(err.message)
}

export const globTool: BuiltinTool = {
  name: 'glob',
  description: 'Find files by glob pattern (standard globstar: "**/*.ts" also matches "a.ts" at the base; braces {a,b} supported). ' +
    'Returns sorted workspace-relative paths of files only; .git and node_modules are skipped and symbolic links are not followed.',
  inputSchema: objectSchema({
    pattern: { type: 'string', description: 'Glob relative to path, e.g. "**/*.ts" or "src/**/*.{ts,tsx}". No ".." segments, not absolute.' },
    path: {
      type: 'string',
      description: 'Base directory relative to the workspace root (default: the root), or an absolute path inside an approved read-only root.'
    },
    maxResults: { type: 'integer', minimum: 1, description: `Maximum number of paths to return. Default ${GLOB_DEFAULT_MAX_RESULTS}.` }
  }, ['pattern']),
  mutates: () => false,
  async run (args, ctx): Promise<GlobResult> {
    const pattern = str(args, 'pattern')
    const baseInput = optStr(args, 'path') ?? '.'
    const maxResults = optInt(args, 'maxResults', 1) ?? GLOB_DEFAULT_MAX_RESULTS
    checkPattern(pattern)
    let glob = pattern
    while (glob.startsWith('./')) glob = glob.slice(2)
    if (glob === '' || glob === '.') return { pattern, path: baseInput, matches: [], count: 0, truncated: false }

    // The base directory is opened beneath the root with no symlink followed out of it (docs/ARCHITECTURE.md#fd-layer):
    // an escape is refused here, and the walk below only ever goes down by directory fd.
    const scan = picomatch.scan(glob)
    const prefix = scan.isGlob ? unescapeGlob(scan.base) : ''
    // A literal path: one entry, listed when it is a regular file (not a link to one).
    const literal = scan.isGlob ? '' : unescapeGlob(glob).replace(/\/+$/, '')
    const slash = literal.lastIndexOf('/')
    const parentRel = slash === -1 ? '' : literal.slice(0, slash)
    // The directory the search starts in is the base itself (`**/*.ts`, `a.txt`): the base stays open for it
    // instead of being opened a second time (each open is a walk from the root, several round trips).
    const startsAtBase = scan.isGlob ? prefix === '' : parentRel === ''
    const base = await openForRead(ctx.workspace, baseInput, { allowDirectory: true })
    const baseRel = base.rel
    if (!startsAtBase) await base.fh.close()
    const join = (rel: string): string => (baseRel === '.' ? rel : path.posix.join(baseRel, rel))
    const inBase = (sub: string): string => path.posix.join(baseRel, sub)

    if (!scan.isGlob) {
      const name = literal.slice(slash + 1)
      const none = { pattern, path: baseRel, matches: [], count: 0, truncated: false }
      let parent
      try {
        parent = startsAtBase ? base : await openForRead(ctx.workspace, inBase(parentRel), { allowDirectory: true })
      } catch (err) {
        if (isMissing(err)) return none
        throw err
      }
      try {
        if (!parent.st.isDirectory() || name === '' || name === '.') return none
        const st = await lstatAt(parent.fh, name)
        const matches = st?.isFile() === true ? [join(literal)] : []
        return { pattern, path: baseRel, matches, count: matches.length, truncated: false }
      } finally {
        await parent.fh.close()
      }
    }

    let dir: FileHandle
    try {
      const opened = startsAtBase ? base : await openForRead(ctx.workspace, inBase(prefix), { allowDirectory: true })
      if (!opened.st.isDirectory()) {
        await opened.fh.close()
        return { pattern, path: baseRel, matches: [], count: 0, truncated: false }
      }
      dir = opened.fh
    } catch (err) {
      if (prefix !== '' && isMissing(err)) return { pattern, path: baseRel, matches: [], count: 0, truncated: false }
      throw err
    }

    const rest = scan.glob
    const maxDepth = rest.includes('**') ? undefined : rest.split('/').length
    const isMatch = picomatch(glob, { dot: true })
    const found: string[] = []
    // Paths left to the regex workers: all of them for a pattern that may backtrack without bound,
    // else those that come after GLOB_IN_PROCESS_MS of matching here.
    const offloaded: string[] = []
    let inWorker = isComplexGlob(glob)
    let matchingMs = 0
    let truncated = false
    let walked = 0
    try {
      // Directory by directory (see walkDirs): entered by fd, never through a symlink; files only.
      truncated = await walkDirs(dir, { skip: SKIP_NAMES, signal: ctx.signal, ...(maxDepth !== undefined ? { maxDepth } : {}) }, (sub, entries) => {
        walked += entries.length
        const started = inWorker ? 0 : performance.now()
        for (const d of entries) {
          if (!d.isFile()) continue
          const rel = prefix === '' ? (sub === '' ? d.name : `${sub}/${d.name}`) : (sub === '' ? `${prefix}/${d.name}` : `${prefix}/${sub}/${d.name}`)
          if (inWorker) {
            offloaded.push(rel)
            if (offloaded.length >= GLOB_SCAN_CAP) return false
            continue
          }
          if (!isMatch(rel)) continue
          found.push(join(rel))
          if (found.length >= GLOB_SCAN_CAP) return false
        }
        if (!inWorker) {
          matchingMs += performance.now() - started
          inWorker = matchingMs > GLOB_IN_PROCESS_MS
        }
        return walked < GLOB_WALK_CAP
      })
      if (offloaded.length > 0) {
        const call = { tenant: ctx.workspace.tenant, budget: regexBudget(), signal: ctx.signal }
        const matched = await matchInWorker(picomatch.makeRe(glob, { dot: true }), offloaded, call)
        for (const rel of matched) found.push(join(rel))
      }
    } finally {
      await dir.close().catch(() => {})
    }
    if (ctx.signal.aborted) throw new ToolError('Cancelled')
    sortPaths(found)
    if (found.length > maxResults) truncated = true
    const matches = found.slice(0, maxResults)
    return { pattern, path: baseRel, matches, count: matches.length, truncated }
  }
}
