import { spawn, spawnSync } from 'node:child_process'
import { constants as fsConstants } from 'node:fs'
import { lstat, open, readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import picomatch from 'picomatch'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../types.js'
import { fsError, quoteInput, resolveReadPath } from '../workspace/paths.js'
import { comparePaths } from './glob.js'
import { looksBinary, objectSchema, optBool, optInt, optStr, str, BINARY_SNIFF_BYTES } from './schemas.js'

export const GREP_DEFAULT_MAX_RESULTS = 100
export const GREP_MAX_FILE_BYTES = 10 * 1024 * 1024
export const GREP_MAX_LINE_CHARS = 500
/** rg output kept in memory; past it rg is killed and the Node engine answers instead. */
const RG_OUTPUT_CAP = 32 * 1024 * 1024
const SKIP_NAMES = new Set(['.git', 'node_modules'])

export interface GrepMatch { file: string, line: number, content: string }
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
  /** 'auto' uses ripgrep when it is on PATH and the pattern allows it; 'node' never spawns. */
  engine?: 'auto' | 'rg' | 'node'
  /** PATH used to find rg and given to it as its only environment variable. */
  searchPath?: string
}

interface Query {
  re: RegExp
  pattern: string
  caseInsensitive: boolean
  include: picomatch.Matcher | undefined
  includeGlob: string | undefined
  max: number
  signal: AbortSignal
}

/** Accumulates matches in path order; the first `max` are kept, the rest only counted. */
class Collector {
  matches: GrepMatch[] = []
  filesSearched = 0
  filesMatched = 0
  totalMatches = 0
  constructor (readonly max: number) {}
  add (file: string, line: number, content: string): void {
    this.totalMatches++
    if (this.matches.length < this.max) this.matches.push({ file, line, content: cutLine(content) })
  }
}

function cutLine (line: string): string {
  const s = line.endsWith('\r') ? line.slice(0, -1) : line
  return s.length > GREP_MAX_LINE_CHARS ? `${s.slice(0, GREP_MAX_LINE_CHARS)}...` : s
}

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const lenientUtf8 = new TextDecoder('utf-8', { ignoreBOM: true })

/**
 * Lines of a text file, split on '\n' ('\r' kept, as ripgrep sees them). A line that is not
 * valid UTF-8 is yielded as undefined: neither engine matches it.
 */
function splitLines (buf: Buffer): Array<string | undefined> {
  const text = lenientUtf8.decode(buf)
  let lines: Array<string | undefined>
  if (!text.includes('\uFFFD')) {
    lines = text.split('\n')
  } else {
    lines = []
    let from = 0
    for (;;) {
      const nl = buf.indexOf(0x0a, from)
      const end = nl === -1 ? buf.length : nl
      try {
        lines.push(fatalUtf8.decode(buf.subarray(from, end)))
      } catch {
        lines.push(undefined)
      }
      if (nl === -1) break
      from = nl + 1
    }
  }
  if (lines.length > 0 && lines[lines.length - 1] === '') lines.pop()
  return lines
}

function searchBuffer (q: Query, c: Collector, display: string, buf: Buffer): void {
  if (looksBinary(buf)) return
  const lines = splitLines(buf)
  let hit = false
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (line === undefined || !q.re.test(line)) continue
    hit = true
    c.add(display, i + 1, line)
  }
  if (hit) c.filesMatched++
}

function byName (a: string, b: string): number {
  return Buffer.compare(Buffer.from(a), Buffer.from(b))
}

/** Pure-Node engine: sorted walk, no symlinks followed, same filters as the rg command line. */
async function nodeSearchDir (q: Query, c: Collector, dirAbs: string, display: string): Promise<void> {
  if (q.signal.aborted) throw new ToolError('Cancelled')
  let entries
  try {
    entries = await readdir(dirAbs, { withFileTypes: true })
  } catch {
    return
  }
  entries.sort((a, b) => byName(a.name, b.name))
  for (const e of entries) {
    if (SKIP_NAMES.has(e.name)) continue
    const abs = path.join(dirAbs, e.name)
    const disp = display === '.' ? e.name : `${display}/${e.name}`
    if (e.isDirectory()) {
      await nodeSearchDir(q, c, abs, disp)
    } else if (e.isFile()) {
      if (q.include !== undefined && !q.include(e.name)) continue
      await nodeSearchFile(q, c, abs, disp)
    }
  }
}

async function nodeSearchFile (q: Query, c: Collector, abs: string, display: string): Promise<void> {
  const st = await lstat(abs).catch(() => undefined)
  if (st === undefined || !st.isFile() || st.size > GREP_MAX_FILE_BYTES) return
  c.filesSearched++
  const buf = await readFile(abs, { flag: fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW }).catch(() => undefined)
  if (buf !== undefined) searchBuffer(q, c, display, buf)
}

/**
 * Whether ripgrep's regex engine matches a superset of what the JS RegExp matches for this
 * pattern. rg then only pre-filters lines and every candidate is confirmed with the JS RegExp,
 * so both engines return identical results. Escapes whose meaning differs (\s, \b, \p, \u, ...),
 * non-ASCII text, nested or set-operation classes, and negated classes under -i (Unicode case
 * folding makes them narrower in Rust) keep the search in Node.
 */
export function rgPortable (pattern: string, caseInsensitive: boolean): boolean {
  if (/[^\x20-\x7e]/.test(pattern)) return false
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] as string
    if (ch === '\\') {
      const next = pattern[i + 1]
      if (next === undefined || 'sSDWbBpPuUcCkKaAzZeEgGhHQ0123456789'.includes(next)) return false
      if (next === 'x' && !/^[0-9A-Fa-f]{2}$/.test(pattern.slice(i + 2, i + 4))) return false
      i++
      continue
    }
    if (inClass) {
      if (ch === '[') return false
      if (ch === ']') inClass = false
      else if ((ch === '&' || ch === '-' || ch === '~') && pattern[i + 1] === ch) return false
      continue
    }
    if (ch === '[') {
      inClass = true
      if (pattern[i + 1] === '^') {
        if (caseInsensitive) return false
        i++
      }
      if (pattern[i + 1] === ']') return false
    }
  }
  return true
}

let rgProbe: Map<string, boolean> | undefined
function rgAvailable (searchPath: string): boolean {
  rgProbe ??= new Map()
  let ok = rgProbe.get(searchPath)
  if (ok === undefined) {
    const r = spawnSync('rg', ['--version'], { env: { PATH: searchPath }, stdio: ['ignore', 'pipe', 'ignore'], timeout: 5000 })
    ok = r.status === 0
    rgProbe.set(searchPath, ok)
  }
  return ok
}

function rgFilterArgs (q: Query): string[] {
  // Every value is glued to its flag ("--glob=x") and paths follow "--", so a pattern such as
  // "--pre=sh" or a path "-x" is never parsed as an option. --no-config ignores RIPGREP_CONFIG_PATH.
  const args = ['--no-config', '--hidden', '--no-ignore', '--no-follow', '--max-filesize=10M']
  if (q.includeGlob !== undefined) args.push(`--glob=${q.includeGlob}`)
  // The exclusions come last: with rg the last matching glob wins.
  args.push('--glob=!.git', '--glob=!node_modules')
  return args
}

interface RunResult { code: number | null, out: Buffer, overflow: boolean }

function runRg (args: string[], searchPath: string, signal: AbortSignal): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('rg', args, { env: { PATH: searchPath }, stdio: ['ignore', 'pipe', 'pipe'] })
    const chunks: Buffer[] = []
    let size = 0
    let overflow = false
    const onAbort = (): void => { child.kill('SIGKILL') }
    signal.addEventListener('abort', onAbort, { once: true })
    child.stdout.on('data', (d: Buffer) => {
      if (overflow) return
      size += d.length
      if (size > RG_OUTPUT_CAP) {
        overflow = true
        child.kill('SIGKILL')
        return
      }
      chunks.push(d)
    })
    child.stderr.resume()
    child.on('error', (err) => { signal.removeEventListener('abort', onAbort); reject(err) })
    child.on('close', (code) => {
      signal.removeEventListener('abort', onAbort)
      resolve({ code, out: Buffer.concat(chunks), overflow })
    })
  })
}

/** ripgrep engine. Returns undefined when rg cannot answer exactly (error, output cap): Node then does. */
async function rgSearchDir (q: Query, c: Collector, baseAbs: string, baseDisplay: string, searchPath: string): Promise<boolean> {
  const common = rgFilterArgs(q)
  const searchArgs = [...common, '--text', '--encoding=none', '--no-heading', '--with-filename', '--line-number',
    '--null', '--color=never', q.caseInsensitive ? '--ignore-case' : '--case-sensitive', `--regexp=${q.pattern}`, '--', baseAbs]
  const listArgs = [...common, '--files', '--null', '--', baseAbs]
  const [search, list] = await Promise.all([runRg(searchArgs, searchPath, q.signal), runRg(listArgs, searchPath, q.signal)])
  if (q.signal.aborted) throw new ToolError('Cancelled')
  if (search.overflow || list.overflow || (search.code !== 0 && search.code !== 1) || (list.code !== 0 && list.code !== 1)) return false

  const found: Array<{ file: string, line: number, content: string }> = []
  const out = search.out
  const binary = new Map<string, boolean>()
  let pos = 0
  while (pos < out.length) {
    const nul = out.indexOf(0, pos)
    if (nul === -1) return false
    const fileAbs = out.subarray(pos, nul).toString('utf8')
    const colon = out.indexOf(0x3a, nul + 1)
    if (colon === -1) return false
    const lineNo = Number(out.subarray(nul + 1, colon).toString('latin1'))
    let nl = out.indexOf(0x0a, colon + 1)
    if (nl === -1) nl = out.length
    const raw = out.subarray(colon + 1, nl)
    pos = nl + 1
    let text: string
    try {
      text = fatalUtf8.decode(raw)
    } catch {
      continue
    }
    if (!q.re.test(text)) continue
    let isBin = binary.get(fileAbs)
    if (isBin === undefined) {
      isBin = await sniffBinary(fileAbs)
      binary.set(fileAbs, isBin)
    }
    if (isBin) continue
    const rel = path.relative(baseAbs, fileAbs).split(path.sep).join('/')
    found.push({ file: baseDisplay === '.' ? rel : `${baseDisplay}/${rel}`, line: lineNo, content: text })
  }
  found.sort((a, b) => comparePaths(a.file, b.file) || a.line - b.line)
  let last: string | undefined
  for (const m of found) {
    if (m.file !== last) { c.filesMatched++; last = m.file }
    c.add(m.file, m.line, m.content)
  }
  let files = 0
  for (const b of list.out) if (b === 0) files++
  c.filesSearched = files
  return true
}

async function sniffBinary (abs: string): Promise<boolean> {
  let fh
  try {
    fh = await open(abs, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK)
    const buf = Buffer.alloc(BINARY_SNIFF_BYTES)
    const { bytesRead } = await fh.read(buf, 0, buf.length, 0)
    return looksBinary(buf, bytesRead)
  } catch {
    return true
  } finally {
    await fh?.close()
  }
}

export function createGrepTool (opts: GrepToolOptions = {}): BuiltinTool {
  const engine = opts.engine ?? 'auto'
  const searchPath = opts.searchPath ?? process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin'
  return {
    name: 'grep',
    description: 'Search file contents with a regular expression (JavaScript RegExp syntax, e.g. "foo\\\\(\\\\d+\\\\)", "^import .* from"). ' +
      'Returns matching lines as {file, line, content}, sorted by file and line. Binary files, files over 10 MiB, .git and ' +
      'node_modules are skipped; symbolic links are not followed; long lines are cut.',
    inputSchema: objectSchema({
      pattern: { type: 'string', description: 'Regular expression in JavaScript syntax (no flags; use caseInsensitive for /i). Matched against each line.' },
      path: { type: 'string', description: 'Directory or file to search, relative to the workspace root (default: the root), or an absolute path inside an approved read-only root.' },
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
      let re: RegExp
      try {
        re = new RegExp(pattern, caseInsensitive ? 'i' : '')
      } catch (err) {
        throw new ToolError(`Invalid regular expression (JavaScript syntax): ${(err as Error).message}`, 'invalid-arguments')
      }
      let include: picomatch.Matcher | undefined
      if (includeGlob !== undefined) {
        if (includeGlob.length === 0 || includeGlob.includes('/') || includeGlob.includes('\\') || includeGlob.includes('\0') || includeGlob.length > 1024) {
          throw new ToolError(`include must be a file-name glob without "/": ${quoteInput(includeGlob)}`, 'invalid-arguments')
        }
        include = picomatch(includeGlob, { dot: true })
      }
      const base = await resolveReadPath(ctx.workspace, baseInput)
      const q: Query = { re, pattern, caseInsensitive, include, includeGlob, max, signal: ctx.signal }
      const c = new Collector(max)
      const st = await lstat(base.abs).catch((err: unknown) => {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new ToolError(`Path does not exist: ${base.rel}`)
        throw fsError(err, base.rel)
      })
      if (st.isFile()) {
        await nodeSearchFile(q, c, base.abs, base.rel)
      } else if (st.isDirectory()) {
        const useRg = engine !== 'node' && rgPortable(pattern, caseInsensitive) && rgAvailable(searchPath)
        if (engine === 'rg' && !useRg) throw new ToolError('ripgrep engine requested but unavailable for this pattern')
        let done = false
        if (useRg) done = await rgSearchDir(q, c, base.abs, base.rel, searchPath)
        if (!done) {
          if (engine === 'rg') throw new ToolError('ripgrep could not complete the search')
          const fresh = new Collector(max)
          await nodeSearchDir(q, fresh, base.abs, base.rel)
          Object.assign(c, fresh)
        }
      } else {
        throw new ToolError(`Not a regular file or directory: ${base.rel}`)
      }
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
