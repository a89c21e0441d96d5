/**
 * The Node engine of grep: walks an open directory by fd (no symlink followed), reads files ahead
 * of the collection within a byte budget, and runs the regex only in the worker pool
 * (regex-worker.ts), within the call's time budget. It answers every search ripgrep cannot (a
 * single file, a pattern whose meaning differs in rg, no bwrap sandbox, rg failing).
 */
import { close as fsClose, constants as fsConstants, fstat as fsFstat, open as fsOpen, read as fsRead } from 'node:fs'
import type { FileHandle } from 'node:fs/promises'
import { ToolError } from '../../types.js'
import { at, READ_FLAGS } from '../../workspace/fd.js'
import { lstatAt } from '../../workspace/fd-tree.js'
import { BINARY_SNIFF_BYTES } from '../args.js'
import { walkBytewise } from '../walk.js'
import type { Collector, Query } from './query.js'
import { regexPool } from './regex-worker.js'
import type { FileMatches } from './regex-worker.js'

const GREP_MAX_FILE_BYTES = 10 * 1024 * 1024
const SKIP_NAMES = new Set(['.git', 'node_modules'])

/** What one file contributes. */
interface FileOutcome { searched: boolean, matches: FileMatches }

const NO_MATCHES: FileMatches = { m: [], t: 0 }
const NOT_SEARCHED: FileOutcome = { searched: false, matches: NO_MATCHES }
const SEARCHED_EMPTY: FileOutcome = { searched: true, matches: NO_MATCHES }

function addOutcome (c: Collector, display: string, o: FileOutcome): void {
  if (o.searched) c.filesSearched++
  if (o.matches.t === 0) return
  c.filesMatched++
  c.totalMatches += o.matches.t
  for (const [line, content] of o.matches.m) {
    if (c.matches.length >= c.max) break
    c.matches.push({ file: display, line, content })
  }
}

/** Files being read at once (each holds a descriptor until its read is done). */
const NODE_READS_IN_FLIGHT = 32
/** Files walked ahead of the one being collected (read, or waiting in a batch for a worker). */
const NODE_FILES_AHEAD = 1024
/** Bytes of file contents held at once (reads ahead plus batches at the workers); one file always passes. */
const NODE_BYTES_IN_FLIGHT = 32 * 1024 * 1024
/** A batch goes to a worker once it holds this many bytes or files (fewer round trips, bounded latency). */
const BATCH_BYTES = 1024 * 1024
const BATCH_FILES = 256

/** A FIFO byte budget: keeps reads ahead from holding 32 x 10 MiB on a tree of big files. */
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

/** A file read for matching: its bytes own their ArrayBuffer (they are transferred to a worker). */
type Loaded = FileOutcome | { bytes: Uint8Array, held: number }

async function closeFd (fd: number): Promise<void> {
  await new Promise<void>((resolve) => { fsClose(fd, () => { resolve() }) })
}

const OPEN_FLAGS = READ_FLAGS | fsConstants.O_NOCTTY

/**
 * fd-tree.ts's openFileIn with callback fs on a plain descriptor: `name` opened beneath the open
 * directory `dir` through /proc/self/fd/N/name with O_NOFOLLOW (never a path from the root, never
 * a link followed), then checked with fstat on the descriptor to be a regular file. A FileHandle
 * costs about three times the CPU per file, and on a big tree the walk is CPU-bound. The caller
 * closes the descriptor.
 */
function openRegularIn (dir: FileHandle, name: string): Promise<{ fd: number, size: number } | undefined> {
  return new Promise((resolve) => {
    fsOpen(at(dir, name), OPEN_FLAGS, (err, fd) => {
      if (err !== null) { resolve(undefined); return }
      fsFstat(fd, (statErr, st) => {
        if (statErr === null && st.isFile()) { resolve({ fd, size: st.size }); return }
        fsClose(fd, () => { resolve(undefined) })
      })
    })
  })
}

/**
 * Reads an open regular file (checked on the fd: at most GREP_MAX_FILE_BYTES) and closes it.
 * Binary files (a NUL in the first 8 KiB) are answered here. Never rejects. Callback fs on the
 * descriptor: a FileHandle read costs several times the CPU per file on a big tree.
 */
async function loadOpened (fd: number, size: number, budget: ByteBudget, close: () => Promise<void> = async () => { await closeFd(fd) }): Promise<Loaded> {
  if (size > GREP_MAX_FILE_BYTES) { await close(); return NOT_SEARCHED }
  if (size === 0) { await close(); return SEARCHED_EMPTY }
  await budget.take(size)
  const bytes = await new Promise<Uint8Array | undefined>((resolve) => {
    // allocUnsafeSlow: never a slice of Buffer's shared pool, whose ArrayBuffer cannot be transferred.
    const buf = Buffer.allocUnsafeSlow(size)
    const readFrom = (got: number): void => {
      fsRead(fd, buf, got, size - got, got, (err, n) => {
        if (err !== null) { resolve(undefined); return }
        if (n === 0 || got + n === size) { resolve(buf.subarray(0, got + n)); return }
        readFrom(got + n)
      })
    }
    readFrom(0)
  })
  await close()
  if (bytes === undefined) { budget.give(size); return SEARCHED_EMPTY }
  if (bytes.subarray(0, BINARY_SNIFF_BYTES).includes(0)) { budget.give(size); return SEARCHED_EMPTY }
  return { bytes, held: size }
}

/** Batches of one call at the workers at once: enough to keep them busy, few enough to coalesce. */
const BATCHES_IN_FLIGHT = 2

/**
 * Sends text files to the regex workers in batches and hands back each file's outcome. The regex
 * runs only in the workers, within the call's budget. A batch goes when it is full, or when the
 * collector is waiting for one of its files (`urgent`); while BATCHES_IN_FLIGHT are out, files
 * accumulate and go together, so batches stay large when the workers are the bottleneck.
 */
class Matcher {
  private files: Uint8Array[] = []
  private held = 0
  private bytes = 0
  private resolvers: Array<{ resolve: (m: FileMatches) => void, reject: (e: unknown) => void }> = []
  private inFlight = 0
  /** > 0 while the collector waits, or once the walk is over: nothing waits for a full batch. */
  urgent = 0
  constructor (private readonly q: Query, private readonly budget: ByteBudget, private readonly room: () => number) {}

  add (bytes: Uint8Array, held: number): Promise<FileMatches> {
    const p = new Promise<FileMatches>((resolve, reject) => { this.resolvers.push({ resolve, reject }) })
    this.files.push(bytes)
    this.held += held
    this.bytes += bytes.length
    this.kick()
    return p
  }

  kick (): void {
    if (this.files.length === 0 || this.inFlight >= BATCHES_IN_FLIGHT) return
    if (this.urgent === 0 && this.bytes < BATCH_BYTES && this.files.length < BATCH_FILES) return
    const files = this.files
    const resolvers = this.resolvers
    const held = this.held
    this.files = []
    this.resolvers = []
    this.held = 0
    this.bytes = 0
    this.inFlight++
    const q = this.q
    regexPool().match(
      { source: q.source, flags: q.flags, room: Math.max(0, this.room()), files },
      { tenant: q.tenant, budget: q.budget, signal: q.signal }
    ).then((out) => {
      resolvers.forEach((r, i) => { r.resolve(out[i] ?? NO_MATCHES) })
    }, (err: unknown) => {
      for (const r of resolvers) r.reject(err)
    }).finally(() => {
      this.budget.give(held)
      this.inFlight--
      this.kick()
    }).catch(() => {})
  }
}

/** A counter of free slots; `take` waits for one. */
class Slots {
  private readonly waiting: Array<() => void> = []
  constructor (private free: number) {}
  async take (): Promise<void> {
    if (this.free > 0) { this.free--; return }
    await new Promise<void>((resolve) => { this.waiting.push(resolve) })
  }

  give (): void {
    const next = this.waiting.shift()
    if (next !== undefined) next()
    else this.free++
  }
}

/**
 * Pure-Node engine over an open directory: the walk enters directories by fd with no symlink
 * followed, and each file is opened beneath its directory's fd (openFileIn) before the walk moves
 * on (that fd is only valid until then). Reads then run ahead of the collection (at most
 * NODE_READS_IN_FLIGHT at once, within NODE_BYTES_IN_FLIGHT), contents go to the regex workers in
 * batches, and outcomes are collected strictly in walk order.
 */
export async function nodeSearchDir (q: Query, c: Collector, base: FileHandle, display: string): Promise<void> {
  const budget = new ByteBudget(NODE_BYTES_IN_FLIGHT)
  const reads = new Slots(NODE_READS_IN_FLIGHT)
  const matcher = new Matcher(q, budget, () => c.max - c.matches.length)
  const window: Array<{ display: string, outcome: Promise<FileOutcome> }> = []
  const drainOne = async (): Promise<void> => {
    const head = window.shift() as { display: string, outcome: Promise<FileOutcome> }
    // Waiting on the head: what is batched goes now, and so does every file read meanwhile.
    matcher.urgent++
    matcher.kick()
    try {
      addOutcome(c, head.display, await head.outcome)
    } finally {
      matcher.urgent--
    }
  }
  // Opens run several at once (each is a thread-pool round trip); a directory's fd is closed only
  // once every open beneath it has finished (onLeave), never while one may still use its number.
  const opening = new Map<FileHandle, Set<Promise<unknown>>>()
  const settle = async (dir: FileHandle): Promise<void> => {
    const pending = opening.get(dir)
    if (pending === undefined) return
    opening.delete(dir)
    await Promise.allSettled([...pending])
  }
  try {
    for await (const e of walkBytewise(base, { skip: SKIP_NAMES, signal: q.signal, onLeave: settle })) {
      if (e.kind !== 'file') continue
      if (q.include !== undefined) {
        const included = q.include(e.name)
        if (included === false || (included !== true && !await included)) continue
      }
      const disp = display === '.' ? e.rel : `${display}/${e.rel}`
      const { dir, name } = e
      await reads.take()
      const opened = (async (): Promise<FileOutcome | { fd: number, size: number }> => {
        const r = await openRegularIn(dir, name)
        if (r !== undefined) return r
        // Not openable as a regular file now (gone, a symlink swapped in, unreadable): counted as
        // searched only when a regular file within the cap is still there.
        const st = await lstatAt(dir, name).catch(() => undefined)
        return st !== undefined && st.isFile() && st.size <= GREP_MAX_FILE_BYTES ? SEARCHED_EMPTY : NOT_SEARCHED
      })()
      let set = opening.get(dir)
      if (set === undefined) { set = new Set(); opening.set(dir, set) }
      set.add(opened)
      const outcome = opened.then(async (o) => {
        if (!('fd' in o)) { reads.give(); return o }
        const r = await loadOpened(o.fd, o.size, budget)
        reads.give()
        if (!('bytes' in r)) return r
        return { searched: true, matches: await matcher.add(r.bytes, r.held) }
      })
      // A batch that fails (the budget ran out) fails the call when its turn comes; if the call has
      // already failed, it must not become an unhandled rejection.
      outcome.catch(() => undefined)
      window.push({ display: disp, outcome })
      if (window.length >= NODE_FILES_AHEAD) await drainOne()
    }
    if (q.signal.aborted) throw new ToolError('Cancelled')
    matcher.urgent++
    while (window.length > 0) await drainOne()
  } finally {
    // The base's own opens (the caller closes it), and on failure everything still in flight.
    await Promise.allSettled([...opening.values()].flatMap((set) => [...set]))
    // On failure, files still batched get their answer (or the failure) instead of waiting forever.
    matcher.urgent++
    matcher.kick()
  }
}

export async function nodeSearchFile (q: Query, c: Collector, fh: FileHandle, size: number, display: string): Promise<void> {
  const budget = new ByteBudget(NODE_BYTES_IN_FLIGHT)
  // The handle closes its own descriptor (closing the number behind its back could close a reuse).
  const r = await loadOpened(fh.fd, size, budget, async () => { await fh.close().catch(() => {}) })
  if (!('bytes' in r)) { addOutcome(c, display, r); return }
  const matcher = new Matcher(q, budget, () => c.max - c.matches.length)
  matcher.urgent++
  const p = matcher.add(r.bytes, r.held)
  addOutcome(c, display, { searched: true, matches: await p })
}
