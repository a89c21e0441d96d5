import { spawn, spawnSync } from 'node:child_process'
import { close as fsClose, constants as fsConstants, fstat as fsFstat, open as fsOpen, read as fsRead, readFile as fsReadFile } from 'node:fs'
import { lstat, readdir } from 'node:fs/promises'
import path from 'node:path'
import picomatch from 'picomatch'
import { ToolError } from '../types.js'
import type { BuiltinTool } from '../types.js'
import { fsError, quoteInput, resolveReadPath } from '../workspace/paths.js'
import { pathSortKey } from './glob.js'
import { looksBinary, mapLimit, objectSchema, optBool, optInt, optStr, str, BINARY_SNIFF_BYTES } from './schemas.js'

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

/** What one file contributes, computed as soon as it is read so its buffer can be dropped. */
interface FileOutcome {
  searched: boolean
  /** The file's first matches, already cut; at most the collector's free slots when it was searched. */
  matches: Array<{ line: number, content: string }>
  total: number
}

const NOT_SEARCHED: FileOutcome = { searched: false, matches: [], total: 0 }

function searchBuffer (q: Query, buf: Buffer, room: number): FileOutcome {
  const out: FileOutcome = { searched: true, matches: [], total: 0 }
  if (looksBinary(buf)) return out
  const lines = splitLines(buf)
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]
    if (line === undefined || !q.re.test(line)) continue
    out.total++
    if (out.matches.length < room) out.matches.push({ line: i + 1, content: cutLine(line) })
  }
  return out
}

function addOutcome (c: Collector, display: string, o: FileOutcome): void {
  if (o.searched) c.filesSearched++
  if (o.total === 0) return
  c.filesMatched++
  c.totalMatches += o.total
  for (const m of o.matches) {
    if (c.matches.length >= c.max) break
    c.matches.push({ file: display, line: m.line, content: m.content })
  }
}

/** Files read and searched ahead of the one being collected (Node engine). */
const NODE_FILES_IN_FLIGHT = 32
/** Bytes of file contents held by those reads at once; one file is always let through. */
const NODE_BYTES_IN_FLIGHT = 32 * 1024 * 1024

/** A FIFO byte budget: keeps 32 reads ahead from holding 32 x 10 MiB on a tree of big files. */
class ByteBudget {
  private used = 0
  private readonly waiting: Array<{ n: number, go: () => void }> = []
  constructor (private readonly cap: number) {}
  async take (n: number): Promise<void> {
    if (this.waiting.length === 0 && (this.used === 0 || this.used + n <= this.cap)) {
      this.used += n
      return
    }
    await new Promise<void>((resolve) => { this.waiting.push({ n, go: resolve }) })
  }

  give (n: number): void {
    this.used -= n
    for (;;) {
      const w = this.waiting[0]
      if (w === undefined || (this.used !== 0 && this.used + w.n > this.cap)) return
      this.waiting.shift()
      this.used += w.n
      w.go()
    }
  }
}

interface WalkEntry { abs: string, display: string }

/** Files under dirAbs in sorted walk order (bytewise names), no symlinks, .git/node_modules skipped. */
async function * walkFiles (q: Query, dirAbs: string, display: string): AsyncGenerator<WalkEntry> {
  if (q.signal.aborted) throw new ToolError('Cancelled')
  let entries
  try {
    entries = await readdir(dirAbs, { withFileTypes: true })
  } catch {
    return
  }
  // Bytewise name order; the key is computed once per name, not once per comparison.
  const keyed = entries.map((e) => ({ e, k: pathSortKey(e.name) }))
  keyed.sort((a, b) => (a.k < b.k ? -1 : a.k > b.k ? 1 : 0))
  for (const { e } of keyed) {
    if (SKIP_NAMES.has(e.name)) continue
    const abs = path.join(dirAbs, e.name)
    const disp = display === '.' ? e.name : `${display}/${e.name}`
    // Dirent types come from the directory itself (lstat semantics): a symlink is neither.
    if (e.isDirectory()) {
      yield * walkFiles(q, abs, disp)
    } else if (e.isFile()) {
      if (q.include !== undefined && !q.include(e.name)) continue
      yield { abs, display: disp }
    }
  }
}

/**
 * Pure-Node engine: sorted walk, no symlinks followed, same filters as the rg command line. Each
 * file costs several thread-pool round trips (open, stat, read, close); awaiting them one file at
 * a time left the CPU idle most of the walk, so up to NODE_FILES_IN_FLIGHT files are read and
 * searched ahead while results are still collected strictly in walk order.
 */
async function nodeSearchDir (q: Query, c: Collector, dirAbs: string, display: string): Promise<void> {
  const budget = new ByteBudget(NODE_BYTES_IN_FLIGHT)
  const window: Array<{ display: string, outcome: Promise<FileOutcome> }> = []
  const drainOne = async (): Promise<void> => {
    const head = window.shift() as { display: string, outcome: Promise<FileOutcome> }
    addOutcome(c, head.display, await head.outcome)
  }
  // On cancellation (the walk throws) the reads still in flight finish on their own and close
  // their descriptors.
  for await (const f of walkFiles(q, dirAbs, display)) {
    // Slots still free when the file is searched: by the time it is collected there are no more.
    const outcome = loadAndSearch(q, f.abs, budget, () => c.max - c.matches.length)
    // A search that throws (a RegExp running out of backtracking stack) fails the call when its
    // turn comes; if the call has already failed, it must not become an unhandled rejection.
    outcome.catch(() => undefined)
    window.push({ display: f.display, outcome })
    if (window.length >= NODE_FILES_IN_FLIGHT) await drainOne()
  }
  while (window.length > 0) await drainOne()
}

async function nodeSearchFile (q: Query, c: Collector, abs: string, display: string): Promise<void> {
  addOutcome(c, display, await loadAndSearch(q, abs, new ByteBudget(NODE_BYTES_IN_FLIGHT), () => c.max - c.matches.length))
}

/**
 * Reads one file and searches it. Never rejects. The file is opened first and checked with
 * fstat on the open descriptor (one path lookup instead of lstat + open): O_NOFOLLOW refuses a
 * final symlink, O_NONBLOCK keeps a FIFO swapped in from hanging the open, and only a regular file
 * of at most GREP_MAX_FILE_BYTES is read. Counting matches the former lstat-first order: a regular
 * file within the size cap counts as searched even when it cannot be opened or read.
 */
async function loadAndSearch (q: Query, abs: string, budget: ByteBudget, room: () => number): Promise<FileOutcome> {
  const r = await loadFile(abs, budget)
  if (r === 'unopenable') {
    // Not openable (permissions, gone, a symlink swapped in): count it as lstat would have.
    const st = await lstat(abs).catch(() => undefined)
    return st !== undefined && st.isFile() && st.size <= GREP_MAX_FILE_BYTES ? { searched: true, matches: [], total: 0 } : NOT_SEARCHED
  }
  if (r === 'skip') return NOT_SEARCHED
  if (r === 'unreadable') return { searched: true, matches: [], total: 0 }
  try {
    return searchBuffer(q, r.buf, Math.max(0, room()))
  } finally {
    budget.give(r.held)
  }
}

type Loaded = 'unopenable' | 'skip' | 'unreadable' | { buf: Buffer, held: number }

/**
 * open, fstat, read, close with callback fs: a FileHandle costs about three times the CPU per
 * file (measured on the 50,000-file tree), and the walk is CPU-bound once reads overlap. The
 * descriptor is closed on every path; the budget is held from allocation until the caller has
 * searched the buffer (the caller gives it back).
 */
function loadFile (abs: string, budget: ByteBudget): Promise<Loaded> {
  return new Promise((resolve) => {
    fsOpen(abs, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK | fsConstants.O_NOCTTY, (openErr, fd) => {
      if (openErr !== null) { resolve('unopenable'); return }
      const done = (result: Loaded): void => { fsClose(fd, () => { resolve(result) }) }
      fsFstat(fd, (statErr, st) => {
        if (statErr !== null || !st.isFile() || st.size > GREP_MAX_FILE_BYTES) { done('skip'); return }
        if (st.size === 0) {
          // Size unknown to stat (empty, or a procfs-like file): read to EOF as readFile does.
          fsReadFile(fd, (err, buf) => { done(err !== null ? 'unreadable' : { buf, held: 0 }) })
          return
        }
        const size = st.size
        budget.take(size).then(() => {
          const buf = Buffer.allocUnsafe(size)
          const readFrom = (got: number): void => {
            fsRead(fd, buf, got, size - got, got, (err, n) => {
              if (err !== null) { budget.give(size); done('unreadable'); return }
              if (n === 0 || got + n === size) { done({ buf: buf.subarray(0, got + n), held: size }); return }
              readFrom(got + n)
            })
          }
          readFrom(0)
        }, () => { done('unreadable') })
      })
    })
  })
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

interface RunResult { code: number | null, overflow: boolean }

/** Runs rg, handing each stdout chunk to `onData` as it arrives (so parsing overlaps the search). */
function runRg (args: string[], searchPath: string, signal: AbortSignal, onData: (d: Buffer) => void): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = spawn('rg', args, { env: { PATH: searchPath }, stdio: ['ignore', 'pipe', 'pipe'] })
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
      onData(d)
    })
    child.stderr.resume()
    child.on('error', (err) => { signal.removeEventListener('abort', onAbort); reject(err) })
    child.on('close', (code) => {
      signal.removeEventListener('abort', onAbort)
      resolve({ code, overflow })
    })
  })
}

/** Binary sniffs (open, read 8 KiB, close) in flight at once for the files rg matched. */
const SNIFF_CONCURRENCY = 16

/**
 * ripgrep's --stats block, printed after the last match (which always starts with the absolute
 * search path, never with '\n'). rg 13 prints "\n<n> matches\n<n> matched lines\n<n> files
 * contained matches\n<n> files searched\n..." (the header lines are fixed); anything else
 * means the output is not what this parser expects and the Node engine answers instead.
 */
const RG_STATS = /^\n\d+ matches\n\d+ matched lines\n\d+ files contained matches\n(\d+) files searched\n/

interface RgMatch { file: string, line: number, content: string }

/**
 * Incremental parser of `rg --null --line-number --with-filename --stats` output: records
 * "<abs path>\0<line>:<content>\n" (the path is read up to its NUL first, so a name holding '\n'
 * parses; content may hold NULs under --text), then the stats block. Lines that are not valid
 * UTF-8 or that the JS RegExp rejects are dropped here; `onFile` sees each file with a kept line
 * once. Parsing as the output arrives keeps only the kept lines in memory, not the whole output.
 */
class RgOutputParser {
  readonly found: RgMatch[] = []
  /** Chunks of the record being received; joined only once a '\n' arrives (linear in the output). */
  private pending: Buffer[] = []
  private stats: Buffer[] | undefined
  private bad = false
  private readonly seen = new Set<string>()
  constructor (private readonly q: Query, private readonly onFile: (fileAbs: string) => void) {}

  push (d: Buffer): void {
    if (this.bad) return
    if (this.stats !== undefined) { this.stats.push(d); return }
    this.pending.push(d)
    // Every record and the stats block end in '\n': without one nothing can complete yet.
    if (d.indexOf(0x0a) === -1) return
    const buf = this.pending.length === 1 ? d : Buffer.concat(this.pending)
    this.pending = []
    let pos = 0
    while (pos < buf.length) {
      if (buf[pos] === 0x0a) {
        this.stats = [buf.subarray(pos)]
        return
      }
      const nul = buf.indexOf(0, pos)
      if (nul === -1) break
      const colon = buf.indexOf(0x3a, nul + 1)
      if (colon === -1) break
      const nl = buf.indexOf(0x0a, colon + 1)
      if (nl === -1) break
      this.record(buf.subarray(pos, nul), buf.subarray(nul + 1, colon), buf.subarray(colon + 1, nl))
      if (this.bad) return
      pos = nl + 1
    }
    if (pos < buf.length) this.pending.push(buf.subarray(pos))
  }

  private record (pathBytes: Buffer, lineBytes: Buffer, raw: Buffer): void {
    const lineNo = Number(lineBytes.toString('latin1'))
    if (!Number.isSafeInteger(lineNo) || lineNo < 1) { this.bad = true; return }
    let text: string
    try {
      text = fatalUtf8.decode(raw)
    } catch {
      return
    }
    if (!this.q.re.test(text)) return
    const file = pathBytes.toString('utf8')
    this.found.push({ file, line: lineNo, content: text })
    if (!this.seen.has(file)) {
      this.seen.add(file)
      this.onFile(file)
    }
  }

  /** filesSearched from the stats block; undefined when the output was not as expected. */
  end (): number | undefined {
    if (this.bad || this.stats === undefined || this.pending.length > 0) return undefined
    const m = RG_STATS.exec(Buffer.concat(this.stats).toString('latin1'))
    return m === null ? undefined : Number(m[1])
  }
}

/** ripgrep engine. Returns false when rg cannot answer exactly (error, output cap): Node then does. */
async function rgSearchDir (q: Query, c: Collector, baseAbs: string, baseDisplay: string, searchPath: string): Promise<boolean> {
  // One rg run: --stats counts the files it searched, with the same filters (size cap, globs,
  // hidden, no symlinks) as the matches, so no second `rg --files` walk is needed for filesSearched.
  // Unreadable files do not count there, but they make rg exit 2, and then Node answers anyway.
  const searchArgs = [...rgFilterArgs(q), '--text', '--encoding=none', '--no-heading', '--with-filename', '--line-number',
    '--null', '--color=never', '--stats', q.caseInsensitive ? '--ignore-case' : '--case-sensitive', `--regexp=${q.pattern}`, '--', baseAbs]
  const files: string[] = []
  const parser = new RgOutputParser(q, (file) => { files.push(file) })
  const search = await runRg(searchArgs, searchPath, q.signal, (d) => parser.push(d))
  if (q.signal.aborted) throw new ToolError('Cancelled')
  if (search.overflow || (search.code !== 0 && search.code !== 1)) return false
  const searched = parser.end()
  if (searched === undefined) return false
  // rg searched with --text; binary files (a NUL in the first 8 KiB) are dropped here, as the
  // Node engine drops them. The sniffs are independent and run side by side (one by one they
  // added ~15% to the call). They start once rg has exited: started as files appeared in its
  // output they overlapped the search but, on two cores, slowed rg by more than they saved.
  const binary = await mapLimit(files, SNIFF_CONCURRENCY, sniffBinary)
  const isBinary = new Map(files.map((f, i) => [f, binary[i] as boolean]))
  if (q.signal.aborted) throw new ToolError('Cancelled')

  const kept: Array<{ file: string, key: string, line: number, content: string }> = []
  for (const m of parser.found) {
    if (isBinary.get(m.file) === true) continue
    const rel = path.relative(baseAbs, m.file).split(path.sep).join('/')
    const file = baseDisplay === '.' ? rel : `${baseDisplay}/${rel}`
    kept.push({ file, key: pathSortKey(file), line: m.line, content: m.content })
  }
  kept.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : a.line - b.line))
  let last: string | undefined
  for (const m of kept) {
    if (m.file !== last) { c.filesMatched++; last = m.file }
    c.add(m.file, m.line, m.content)
  }
  c.filesSearched = searched
  return true
}

/**
 * Whether a file's first 8 KiB hold a NUL byte (unreadable counts as binary). Callback fs rather
 * than a FileHandle: for the ~1,000 sniffs of a big search that is half the time and a third of
 * the CPU, which rg, still searching on the same cores, gets instead.
 */
function sniffBinary (abs: string): Promise<boolean> {
  return new Promise((resolve) => {
    fsOpen(abs, fsConstants.O_RDONLY | fsConstants.O_NOFOLLOW | fsConstants.O_NONBLOCK, (err, fd) => {
      if (err !== null) { resolve(true); return }
      const buf = Buffer.allocUnsafe(BINARY_SNIFF_BYTES)
      fsRead(fd, buf, 0, buf.length, 0, (readErr, bytesRead) => {
        fsClose(fd, () => { resolve(readErr !== null ? true : looksBinary(buf, bytesRead)) })
      })
    })
  })
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
