/**
 * The ripgrep engine, run INSIDE the tenant's sandbox (docs/ARCHITECTURE.md#fd-layer). rg opens files by
 * path: run as root on host paths, a directory swapped for a symlink during its walk made it read
 * the host's /etc. In the sandbox its mount namespace holds only the workspace and the read roots
 * (bound at their host paths, so its output paths are host paths) and it runs as the tenant's
 * uid: whatever a swap makes it read, the tenant's own bash could read too.
 *
 * rg's lines are taken as they are: no JavaScript confirmation of them (a backtracking RegExp on
 * the event loop froze the gateway for every tenant). rgPortable only lets through patterns whose
 * meaning is the same in both syntaxes; see there for the remaining differences.
 */
import { execFile } from 'node:child_process'
import type { FileHandle } from 'node:fs/promises'
import { closeSync, constants as fsConstants, fstatSync, openSync, readSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { setImmediate as setImmediatePromise } from 'node:timers/promises'
import path from 'node:path'
import type { Sandbox } from '../../sandbox/index.js'
import { ToolError } from '../../types.js'
import type { Workspace } from '../../types.js'
import { at, DIR_FLAGS, READ_FLAGS } from '../../workspace/fd.js'
import { BINARY_SNIFF_BYTES, looksBinary } from '../args.js'
import { pathSortKey } from '../walk.js'
import { RgOutputParser } from './rg-output.js'

/** rg output kept in memory; past it rg is killed and the Node engine answers instead. */
const RG_OUTPUT_CAP = 32 * 1024 * 1024
/** Wall-clock bound on one rg run (the sandbox's CPU rlimit bounds its CPU time too). */
const RG_TIMEOUT_MS = 30_000

export type RgSandbox = Pick<Sandbox, 'mode' | 'spawn'>

export interface RgQuery {
  pattern: string
  caseInsensitive: boolean
  includeGlob: string | undefined
  signal: AbortSignal
}

export interface RgOutcome {
  /** Matches in path order (file display path, line, cut content). */
  matches: Array<{ file: string, line: number, content: string }>
  filesSearched: number
}

/**
 * Whether ripgrep's regex engine matches what the JS RegExp matches for this pattern (ASCII
 * patterns without the escapes, classes and groups whose meaning differs). Escapes whose meaning
 * differs (\s, \b, \p, \u, back-references, ...), look-around and named groups (rg has none / other
 * syntax), non-ASCII text, nested or set-operation classes, and negated classes under -i keep the
 * search in Node. Known remaining differences, on text only: rg's `.` and negated classes match a
 * whole astral-plane character (JS: one UTF-16 unit), and under -i rg also folds `k` with U+212A and
 * `s` with U+017F.
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
    // "(?" starts look-around, a named group or an inline flag: none is the same in both engines.
    if (ch === '(' && pattern[i + 1] === '?' && pattern[i + 2] !== ':') return false
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

/** A word for `sh -c`: single-quoted, so nothing in it is expanded or split. */
export function shellQuote (s: string): string {
  return `'${s.replaceAll("'", "'\\''")}'`
}

/** rg's argv for a query (exported for the benchmark's floor rows, which run the same command). */
export function rgArgs (q: Omit<RgQuery, 'signal'>, baseAbs: string): string[] {
  // Every value is glued to its flag ("--glob=x") and paths follow "--", so a pattern such as
  // "--pre=sh" or a path "-x" is never parsed as an option. --no-config ignores RIPGREP_CONFIG_PATH.
  const args = ['--no-config', '--hidden', '--no-ignore', '--no-follow', '--max-filesize=10M']
  if (q.includeGlob !== undefined) args.push(`--glob=${q.includeGlob}`)
  // The exclusions come last: with rg the last matching glob wins.
  args.push('--glob=!.git', '--glob=!node_modules')
  args.push('--text', '--encoding=none', '--no-heading', '--with-filename', '--line-number', '--null', '--color=never', '--stats',
    q.caseInsensitive ? '--ignore-case' : '--case-sensitive', `--regexp=${q.pattern}`, '--', baseAbs)
  return args
}

interface RunResult { code: number | null, overflow: boolean, timedOut: boolean }

/** Runs rg in the sandbox, handing each stdout chunk to `onData` as it arrives. */
async function runRg (sandbox: RgSandbox, ws: Workspace, args: string[], signal: AbortSignal, onData: (d: Buffer) => void): Promise<RunResult> {
  const command = `exec rg ${args.map(shellQuote).join(' ')}`
  const proc = sandbox.spawn({ workspace: ws, command, cwd: ws.root, stdin: 'ignore' })
  let size = 0
  let overflow = false
  let timedOut = false
  const onAbort = (): void => { proc.kill() }
  signal.addEventListener('abort', onAbort, { once: true })
  const timer = setTimeout(() => { timedOut = true; proc.kill() }, RG_TIMEOUT_MS)
  proc.stdout.on('data', (d: Buffer) => {
    if (overflow) return
    size += d.length
    if (size > RG_OUTPUT_CAP) {
      overflow = true
      proc.kill()
      return
    }
    onData(d)
  })
  proc.stderr.resume()
  const stdoutDone = new Promise<void>((resolve) => {
    proc.stdout.once('close', resolve)
    proc.stdout.once('error', () => { resolve() })
  })
  try {
    const info = await proc.exited
    // Every byte rg wrote must be parsed before its stats are read.
    await stdoutDone
    return { code: proc.spawnError !== undefined ? null : info.exitCode, overflow, timedOut }
  } finally {
    clearTimeout(timer)
    signal.removeEventListener('abort', onAbort)
  }
}

const FILE_FLAGS = READ_FLAGS | fsConstants.O_NOCTTY

/** Synchronous sniffing between two yields to the event loop (as usage.ts's walk does). */
const SNIFF_SLICE_MS = 4

/** Whether `name` in the open directory is a regular file with a NUL in its first 8 KiB (or unreadable). */
function sniffIn (dirFd: number, name: string, buf: Buffer): boolean {
  let fd: number
  try {
    fd = openSync(at(dirFd, name), FILE_FLAGS)
  } catch {
    return true
  }
  try {
    if (!fstatSync(fd).isFile()) return true
    return looksBinary(buf, readSync(fd, buf, 0, buf.length, 0))
  } catch {
    return true
  } finally {
    closeSync(fd)
  }
}

/**
 * Which of the files (paths relative to the open base directory) are binary (a NUL in the first
 * 8 KiB). The directories are visited in sorted order with a stack of open ancestors, so each is
 * opened once, component by component beneath the base's fd with no symlink followed (rg followed
 * none either), and its files are opened beneath it. Anything else there now (a link swapped in,
 * gone) counts as binary, i.e. dropped. Synchronous calls in slices of SNIFF_SLICE_MS with a yield
 * to the event loop between them, as usage.ts's walk: rg has just read these files, so each call is
 * a few microseconds, while through the libuv pool each cost a round trip (1,000 matched files in
 * 1,000 directories: ~25 ms of wall and CPU time here, against ~85 ms wall and ~110 ms CPU with
 * callback fs and 16 in flight; FileHandles cost more still). Run after rg exits: sniffing while
 * its output streams in measured no faster (rg keeps both cores busy) and cost about twice the CPU.
 */
async function sniffBinary (base: FileHandle, rels: ReadonlyArray<string | undefined>, signal: AbortSignal): Promise<boolean[]> {
  const out = new Array<boolean>(rels.length).fill(true)
  const byDir = new Map<string, Array<{ i: number, name: string }>>()
  rels.forEach((rel, i) => {
    if (rel === undefined) return
    const parts = rel.split('/')
    if (parts.some((p) => p === '' || p === '.' || p === '..')) return
    const d = parts.slice(0, -1).join('/')
    let list = byDir.get(d)
    if (list === undefined) { list = []; byDir.set(d, list) }
    list.push({ i, name: parts[parts.length - 1] as string })
  })
  const buf = Buffer.allocUnsafe(BINARY_SNIFF_BYTES)
  // The open directories from the base down: names[k] is open as fds[k] (undefined: it could not
  // be opened, i.e. it is not there any more or is a link now, and its files stay "binary").
  const names: string[] = []
  const fds: Array<number | undefined> = []
  let sliceStart = performance.now()
  try {
    for (const d of [...byDir.keys()].sort()) {
      const parts = d === '' ? [] : d.split('/')
      let k = 0
      while (k < names.length && k < parts.length && names[k] === parts[k]) k++
      while (names.length > k) {
        names.pop()
        const fd = fds.pop()
        if (fd !== undefined) closeSync(fd)
      }
      for (; k < parts.length; k++) {
        const parent = k === 0 ? base.fd : fds[k - 1]
        let fd: number | undefined
        if (parent !== undefined) {
          try { fd = openSync(at(parent, parts[k] as string), DIR_FLAGS) } catch {}
        }
        names.push(parts[k] as string)
        fds.push(fd)
      }
      const dirFd = parts.length === 0 ? base.fd : fds[parts.length - 1]
      if (dirFd === undefined) continue
      for (const f of byDir.get(d) ?? []) {
        out[f.i] = sniffIn(dirFd, f.name, buf)
        if (performance.now() - sliceStart >= SNIFF_SLICE_MS) {
          await setImmediatePromise()
          if (signal.aborted) return out
          sliceStart = performance.now()
        }
      }
    }
  } finally {
    for (const fd of fds) if (fd !== undefined) closeSync(fd)
  }
  return out
}

/**
 * Searches the directory `baseAbs` (open as `base`) with rg in the sandbox. Returns undefined when
 * rg cannot answer exactly (an error exit, unreadable files, the output cap, unexpected output):
 * the Node engine answers then. A timeout is a tool error.
 */
export async function rgSearchDir (
  sandbox: RgSandbox, ws: Workspace, q: RgQuery, base: FileHandle, baseAbs: string, baseDisplay: string
): Promise<RgOutcome | undefined> {
  const parser = new RgOutputParser()
  const run = await runRg(sandbox, ws, rgArgs(q, baseAbs), q.signal, (d) => { parser.push(d) })
  if (q.signal.aborted) throw new ToolError('Cancelled')
  if (run.timedOut) throw new ToolError(`grep took longer than ${RG_TIMEOUT_MS / 1000} s; narrow the path or the pattern`)
  if (run.overflow || (run.code !== 0 && run.code !== 1)) return undefined
  const searched = parser.end()
  if (searched === undefined) return undefined

  // rg prints each path as the search path it was given ("baseAbs", normalized by path.resolve),
  // '/', then the names it walked through: the common case needs no path.relative (which resolves
  // both sides on every call), and any other shape still goes through it.
  const prefix = baseAbs.endsWith('/') ? baseAbs : `${baseAbs}/`
  const relOf = (file: string): string | undefined => {
    if (file.startsWith(prefix)) {
      const rel = file.slice(prefix.length)
      if (rel !== '' && !rel.split('/').some((p) => p === '' || p === '.' || p === '..')) return rel
    }
    const rel = path.relative(baseAbs, file)
    if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) return undefined
    return rel.split(path.sep).join('/')
  }
  // rg searched with --text; binary files (a NUL in the first 8 KiB) are dropped here, as the
  // Node engine drops them.
  const rels = parser.files.map(relOf)
  const binary = await sniffBinary(base, rels, q.signal)
  if (q.signal.aborted) throw new ToolError('Cancelled')

  // Per kept file, its display path, sort key and lines: files sorted by key, lines by number.
  const byFile = new Map<string, { file: string, key: string, lines: Array<{ line: number, content: string }> }>()
  parser.files.forEach((f, i) => {
    const rel = rels[i]
    if (binary[i] !== false || rel === undefined) return
    const file = baseDisplay === '.' ? rel : `${baseDisplay}/${rel}`
    byFile.set(f, { file, key: pathSortKey(file), lines: [] })
  })
  for (const m of parser.found) byFile.get(m.file)?.lines.push(m)
  const groups = [...byFile.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
  const matches: RgOutcome['matches'] = []
  for (const g of groups) {
    g.lines.sort((a, b) => a.line - b.line)
    for (const m of g.lines) matches.push({ file: g.file, line: m.line, content: m.content })
  }
  return { matches, filesSearched: searched }
}

let rgProbe: Map<string, Promise<boolean>> | undefined
/** Whether rg is installed; checked once per PATH, asynchronously (spawnSync would stall the loop). */
export async function rgInstalled (searchPath: string): Promise<boolean> {
  rgProbe ??= new Map()
  let ok = rgProbe.get(searchPath)
  if (ok === undefined) {
    ok = new Promise<boolean>((resolve) => {
      execFile('rg', ['--version'], { env: { PATH: searchPath }, timeout: 5000 }, (err) => { resolve(err === null) })
    })
    rgProbe.set(searchPath, ok)
  }
  return await ok
}

let privateSandbox: Promise<RgSandbox> | undefined
/** A bwrap sandbox of the tool's own, for engine 'rg' without one (tests). */
export async function ownSandbox (): Promise<RgSandbox> {
  privateSandbox ??= import('../../sandbox/index.js').then(async ({ createSandbox }) => await createSandbox({ mode: 'bwrap' }))
  return await privateSandbox
}
