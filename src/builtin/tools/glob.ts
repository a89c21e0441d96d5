import { realpath } from 'node:fs/promises'
import path from 'node:path'
import fg from 'fast-glob'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../types.js'
import { isInside, quoteInput, resolveReadPath } from '../workspace/paths.js'
import { objectSchema, optInt, optStr, str } from './schemas.js'

export const GLOB_DEFAULT_MAX_RESULTS = 1000
/** Entries collected before sorting; beyond it the walk stops and the result is marked truncated. */
const GLOB_SCAN_CAP = 200_000
const SKIP_DIRS = ['.git', 'node_modules']

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

    let truncated = false
    const found: string[] = []
    const stream = fg.stream(pattern, options)
    const onAbort = (): void => { (stream as unknown as { destroy: () => void }).destroy() }
    ctx.signal.addEventListener('abort', onAbort, { once: true })
    try {
      for await (const entry of stream) {
        found.push(String(entry))
        if (found.length >= GLOB_SCAN_CAP) { truncated = true; break }
      }
    } finally {
      ctx.signal.removeEventListener('abort', onAbort)
    }
    if (ctx.signal.aborted) throw new ToolError('Cancelled')

    // Defence in depth: every match's directory must really be inside the area.
    const dirOk = new Map<string, boolean>()
    const kept: string[] = []
    for (const m of found) {
      if (m.split('/').includes('..')) continue
      const dir = path.dirname(path.resolve(base.abs, m))
      let ok = dirOk.get(dir)
      if (ok === undefined) {
        const real = await realpath(dir).catch(() => undefined)
        ok = real !== undefined && isInside(area, real)
        dirOk.set(dir, ok)
      }
      if (ok) kept.push(base.rel === '.' ? m : path.posix.join(base.rel, m))
    }
    kept.sort(comparePaths)
    if (kept.length > maxResults) truncated = true
    const matches = kept.slice(0, maxResults)
    return { pattern, path: base.rel, matches, count: matches.length, truncated }
  }
}
