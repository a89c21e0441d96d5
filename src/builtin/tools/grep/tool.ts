/**
 * The grep tool: its schema, argument checks, the choice of engine (ripgrep in the sandbox when
 * it can answer exactly, else the Node engine) and the result's shape. The engines are
 * node-engine.ts and rg.ts; both gather into the same Collector (query.ts).
 */
import path from 'node:path'
import picomatch from 'picomatch'
import { ToolError } from '../../types.js'
import type { Workspace } from '../../types.js'
import type { BuiltinTool } from '../../tool.js'
import { quoteInput } from '../../workspace/paths.js'
import { openForRead } from '../../workspace/fd-tree.js'
import { objectSchema, optBool, optInt, optStr, str } from '../args.js'
import { includeInWorker, isComplexGlob } from '../glob-match.js'
import { nodeSearchDir, nodeSearchFile } from './node-engine.js'
import { Collector } from './query.js'
import type { GrepMatch, Query } from './query.js'
import { GREP_REGEX_BUDGET_MS, regexBudget } from './regex-worker.js'
import { ownSandbox, rgInstalled, rgPortable, rgSearchDir } from './rg.js'
import type { RgSandbox } from './rg.js'

const GREP_DEFAULT_MAX_RESULTS = 100

export interface GrepResult {
  pattern: string
  path: string
  matches: GrepMatch[]
  filesSearched: number
  filesMatched: number
  totalMatches: number
  truncated: boolean
}

export interface GrepToolOptions {
  /**
   * 'auto' uses ripgrep in the sandbox when the sandbox is bwrap, rg is installed and the pattern
   * allows it; 'node' never spawns; 'rg' insists on ripgrep (tests).
   */
  engine?: 'auto' | 'rg' | 'node'
  /**
   * The sandbox rg runs in. rg is never run outside one: it opens files by path, and a tenant can
   * swap any directory of its tree for a symlink while rg walks it. Without a bwrap sandbox,
   * 'auto' uses the Node engine; 'rg' makes a private bwrap sandbox on first use (tests).
   */
  sandbox?: RgSandbox
  /** PATH used to check that rg is installed (the sandbox binds the host's /usr). */
  searchPath?: string
}

function baseAbsOf (ws: Workspace, rel: string): string {
  return path.isAbsolute(rel) ? rel : path.resolve(ws.root, rel)
}

export function createGrepTool (opts: GrepToolOptions = {}): BuiltinTool {
  const engine = opts.engine ?? 'auto'
  const searchPath = opts.searchPath ?? process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'
  return {
    name: 'grep',
    description: 'Search file contents with a regular expression (JavaScript RegExp syntax, e.g. "foo\\\\(\\\\d+\\\\)", "^import .* from"). ' +
      'Returns matching lines as {file, line, content}, sorted by file and line. Binary files, files over 10 MiB, .git and ' +
      `node_modules are skipped; symbolic links are not followed; long lines are cut. A pattern that takes more than ${GREP_REGEX_BUDGET_MS / 1000} s ` +
      'of matching (catastrophic backtracking) is an error.',
    inputSchema: objectSchema({
      pattern: { type: 'string', description: 'Regular expression in JavaScript syntax (no flags; use caseInsensitive for /i). Matched against each line.' },
      path: {
        type: 'string',
        description: 'Directory or file to search, relative to the workspace root (default: the root), or an absolute path inside an approved read-only root.'
      },
      include: { type: 'string', description: 'Only search files whose name matches this glob, e.g. "*.ts" or "*.{js,jsx}" (a file-name glob, no "/").' },
      caseInsensitive: { type: 'boolean', description: 'Match without regard to case. Default false.' },
      maxResults: { type: 'integer', minimum: 1, description: `Maximum number of matching lines to return. Default ${GREP_DEFAULT_MAX_RESULTS}.` }
    }, ['pattern']),
    mutates: () => false,
    async run (args, ctx): Promise<GrepResult> {
      const pattern = str(args, 'pattern')
      const baseInput = optStr(args, 'path') ?? '.'
      const includeGlob = optStr(args, 'include')
      const caseInsensitive = optBool(args, 'caseInsensitive') ?? false
      const max = optInt(args, 'maxResults', 1) ?? GREP_DEFAULT_MAX_RESULTS
      if (pattern.length === 0) throw new ToolError('pattern must not be empty', 'invalid-arguments')
      if (pattern.length > 4096 || pattern.includes('\0')) throw new ToolError('pattern is too long or contains a NUL byte', 'invalid-arguments')
      const flags = caseInsensitive ? 'i' : ''
      try {
        // Compiling is linear and never runs the pattern: safe on the event loop.
        new RegExp(pattern, flags) // eslint-disable-line no-new
      } catch (err) {
        throw new ToolError(`Invalid regular expression (JavaScript syntax): ${(err as Error).message}`, 'invalid-arguments')
      }
      let include: Query['include']
      if (includeGlob !== undefined) {
        if (includeGlob.length === 0 || includeGlob.includes('/') || includeGlob.includes('\\') || includeGlob.includes('\0') || includeGlob.length > 1024) {
          throw new ToolError(`include must be a file-name glob without "/": ${quoteInput(includeGlob)}`, 'invalid-arguments')
        }
        include = isComplexGlob(includeGlob)
          ? includeInWorker(picomatch.makeRe(includeGlob, { dot: true }), { tenant: ctx.workspace.tenant, budget: regexBudget(), signal: ctx.signal })
          : picomatch(includeGlob, { dot: true })
      }
      const q: Query = {
        source: pattern, flags, pattern, caseInsensitive, include, includeGlob, max, signal: ctx.signal, budget: regexBudget(), tenant: ctx.workspace.tenant
      }
      const c = new Collector(max)
      const base = await openForRead(ctx.workspace, baseInput, { allowDirectory: true })
      let closeBase = true
      try {
        if (base.st.isFile()) {
          closeBase = false
          await nodeSearchFile(q, c, base.fh, base.st.size, base.rel)
        } else {
          let sandbox = opts.sandbox?.mode === 'bwrap' ? opts.sandbox : undefined
          const portable = rgPortable(pattern, caseInsensitive) && await rgInstalled(searchPath)
          if (engine === 'rg') {
            if (!portable) throw new ToolError('ripgrep engine requested but unavailable for this pattern')
            sandbox ??= await ownSandbox()
          }
          let done = false
          if (engine !== 'node' && portable && sandbox !== undefined) {
            const r = await rgSearchDir(sandbox, ctx.workspace, q, base.fh, baseAbsOf(ctx.workspace, base.rel), base.rel)
            if (r !== undefined) {
              let last: string | undefined
              for (const m of r.matches) {
                if (m.file !== last) { c.filesMatched++; last = m.file }
                c.totalMatches++
                if (c.matches.length < max) c.matches.push(m)
              }
              c.filesSearched = r.filesSearched
              done = true
            }
          }
          if (!done) {
            if (engine === 'rg') throw new ToolError('ripgrep could not complete the search')
            await nodeSearchDir(q, c, base.fh, base.rel)
          }
        }
      } finally {
        if (closeBase) await base.fh.close().catch(() => {})
      }
      if (ctx.signal.aborted) throw new ToolError('Cancelled')
      return {
        pattern,
        path: base.rel,
        matches: c.matches,
        filesSearched: c.filesSearched,
        filesMatched: c.filesMatched,
        totalMatches: c.totalMatches,
        truncated: c.totalMatches > c.matches.length
      }
    }
  }
}

export const grepTool: BuiltinTool = createGrepTool()
