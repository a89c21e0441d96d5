/**
 * Per-workspace usage accounting and the quota checks (WORKSPACE_QUOTA_BYTES, WORKSPACE_MAX_FILES).
 *
 * What counts: `bytes` is the apparent size (st_size) of the regular files, a file with several
 * hard links counted once; `files` is every entry below the root: regular files, directories,
 * symlinks and anything else (each is an inode the host keeps for the tenant, and an upload's
 * entry limit counts the same way). Apparent size is what RLIMIT_FSIZE bounds and what a file
 * tool's write changes, so the three agree; a sparse file counts at its full length.
 *
 * The figure is kept cheaply: measured once by an fd walk (no path is followed, a tenant may swap
 * entries for symlinks while we count), then moved by the deltas the file tools report as they
 * write, and measured again after each bash command. A measure is bounded in time: when its budget
 * runs out the caller gets the partial count, marked inexact (a lower bound), while the walk goes
 * on in the background and its result replaces the figure when it ends. The walk works in slices
 * of a few milliseconds and yields to the event loop between them, so a huge tree never blocks it.
 *
 * Deltas that arrive while a walk runs may or may not be seen by it; the walk's result wins. The
 * error is bounded by one tool call's write and the next measure corrects it.
 */
import { closeSync, lstatSync, opendirSync, openSync } from 'node:fs'
import type { Dir, Dirent, Stats } from 'node:fs'
import { setImmediate as setImmediatePromise, setTimeout as sleep } from 'node:timers/promises'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { at, DIR_FLAGS, errnoOf } from './fd.js'
import { WALK_MAX_DEPTH } from './fd-walk.js'
import type { WorkspaceVolumes } from './volumes.js'

/** Synchronous work of a measure between two yields to the event loop. */
const SLICE_MS = 8
/**
 * Deeper directories than this are not entered: each level holds two fds during the walk (the
 * directory and its listing), and the gateway's fd limit may be as low as 1024. The same depth as
 * the other walkers (fd-walk.ts WALK_MAX_DEPTH). A tree that reaches it is reported inexact: what lies
 * deeper is not counted.
 */
const MEASURE_MAX_DEPTH = WALK_MAX_DEPTH

export interface UsageFigure {
  bytes: number
  files: number
}

export interface Measured extends UsageFigure {
  /** False when the walk ran out of time (partial count, a lower bound) or met the depth cap. */
  exact: boolean
}

export interface WorkspaceUsageOptions {
  quotaBytes: number
  maxFiles: number
  /** Time a measure may take before the caller gets a partial, inexact figure (default 2 s). */
  measureBudgetMs?: number
}

interface Entry {
  bytes: number
  files: number
  exact: boolean
  /** The walk in progress, shared by concurrent callers. */
  walking?: Promise<Measured>
  /** Its running count, for a caller whose budget ran out. */
  partial?: UsageFigure
  /** Bumped by forget(): a walk of an older generation does not write its result. */
  gen: number
  known: boolean
}

/** The tool error every quota refusal carries (`WORKSPACE_QUOTA_EXCEEDED` on the wire). */
function quotaError (message: string): ToolError {
  return new ToolError(message, 'quota')
}

function mib (n: number): string {
  return n >= 1024 * 1024 ? `${(n / (1024 * 1024)).toFixed(1)} MiB` : `${n} bytes`
}

export class WorkspaceUsage {
  readonly quotaBytes: number
  readonly maxFiles: number
  readonly #budgetMs: number
  readonly #entries = new Map<string, Entry>()
  #volumes: WorkspaceVolumes | undefined

  constructor (opts: WorkspaceUsageOptions) {
    if (!(opts.quotaBytes > 0) || !(opts.maxFiles > 0)) throw new Error('quotaBytes and maxFiles must be positive')
    this.quotaBytes = opts.quotaBytes
    this.maxFiles = opts.maxFiles
    this.#budgetMs = opts.measureBudgetMs ?? 2000
  }

  /** The quota images (WORKSPACE_QUOTA_MODE loop): a workspace that is one needs no watchdog. */
  useVolumes (volumes: WorkspaceVolumes): void {
    this.#volumes = volumes
  }

  /**
   * Whether the file system enforces the workspace's quota (a mounted image,
   * docs/ARCHITECTURE.md#workspace-quota): no write can pass it, so bash needs neither the
   * watchdog nor RLIMIT_FSIZE at the room left. False in watchdog mode and for a workspace made
   * before images (or an admin workspaceRoot).
   */
  enforcedByFs (ws: Workspace): boolean {
    return this.#volumes?.enforces(ws.root) === true
  }

  /** Whether the workspace's image is full (no block or no inode left); false without an image. */
  async fsFull (ws: Workspace): Promise<boolean> {
    return await (this.#volumes?.full(ws.root) ?? Promise.resolve(false))
  }

  #entry (ws: Workspace): Entry {
    let e = this.#entries.get(ws.root)
    if (e === undefined) {
      e = { bytes: 0, files: 0, exact: false, gen: 0, known: false }
      this.#entries.set(ws.root, e)
    }
    return e
  }

  /** The figure as it stands, without measuring; undefined before the first measure. */
  get (ws: Workspace): (UsageFigure & { exact: boolean }) | undefined {
    const e = this.#entries.get(ws.root)
    if (e === undefined || !e.known) return undefined
    return { bytes: e.bytes, files: e.files, exact: e.exact }
  }

  /**
   * Walks the workspace and makes the result the figure. Concurrent calls share one walk. Returns
   * within the time budget: the partial count (exact false) when the walk is still going.
   */
  async measure (ws: Workspace, budgetMs = this.#budgetMs): Promise<Measured> {
    const e = this.#entry(ws)
    if (e.walking === undefined) {
      const gen = e.gen
      const partial = { bytes: 0, files: 0 }
      e.partial = partial
      const walking = countTree(ws.root, partial).then((m) => {
        if (e.gen === gen) {
          e.bytes = m.bytes
          e.files = m.files
          e.exact = m.exact
          e.known = true
        }
        return m
      }).finally(() => {
        if (e.walking === walking) {
          e.walking = undefined
          e.partial = undefined
        }
      })
      e.walking = walking
      // A background walk that fails (the workspace was deleted) must not be an unhandled rejection.
      walking.catch(() => {})
    }
    const walking = e.walking
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<undefined>((resolve) => { timer = setTimeout(() => resolve(undefined), budgetMs) })
    try {
      const done = await Promise.race([walking, timeout])
      if (done !== undefined) return done
    } finally {
      clearTimeout(timer)
    }
    // Out of time: the larger of what was known and what the walk has counted so far.
    const p = e.partial ?? { bytes: 0, files: 0 }
    const bytes = Math.max(p.bytes, e.known ? e.bytes : 0)
    const files = Math.max(p.files, e.known ? e.files : 0)
    e.bytes = bytes
    e.files = files
    e.exact = false
    e.known = true
    return { bytes, files, exact: false }
  }

  /** The figure, measuring first when there is none yet. */
  async current (ws: Workspace): Promise<UsageFigure> {
    const e = this.#entries.get(ws.root)
    if (e !== undefined && e.known) return { bytes: e.bytes, files: e.files }
    const m = await this.measure(ws)
    return { bytes: m.bytes, files: m.files }
  }

  /**
   * Checks that growing the workspace by (deltaBytes, deltaFiles) stays within its quota and
   * counts the growth at once (so concurrent writers see it); throws the quota ToolError and
   * changes nothing otherwise. A delta that shrinks is always allowed. A write that then fails
   * gives its reservation back with `adjust(ws, -deltaBytes, -deltaFiles)`.
   */
  async reserve (ws: Workspace, deltaBytes: number, deltaFiles: number): Promise<void> {
    const cur = await this.current(ws)
    const e = this.#entry(ws)
    if (deltaBytes > 0 && cur.bytes + deltaBytes > this.quotaBytes) {
      throw quotaError(`Workspace quota exceeded (WORKSPACE_QUOTA_EXCEEDED): this write adds ${mib(deltaBytes)} to ${mib(cur.bytes)} in use, over the quota of ${mib(this.quotaBytes)}; nothing was written. Delete files to make room.`)
    }
    if (deltaFiles > 0 && cur.files + deltaFiles > this.maxFiles) {
      throw quotaError(`Workspace file limit exceeded (WORKSPACE_QUOTA_EXCEEDED): this write adds ${deltaFiles} entries to ${cur.files}, over the limit of ${this.maxFiles} files; nothing was written. Delete files to make room.`)
    }
    e.bytes = Math.max(0, cur.bytes + deltaBytes)
    e.files = Math.max(0, cur.files + deltaFiles)
  }

  /** Moves the figure by what a write (or delete) changed, unconditionally. No-op before a measure. */
  adjust (ws: Workspace, deltaBytes: number, deltaFiles: number): void {
    const e = this.#entries.get(ws.root)
    if (e === undefined || !e.known) return
    e.bytes = Math.max(0, e.bytes + deltaBytes)
    e.files = Math.max(0, e.files + deltaFiles)
  }

  /** Drops the figure (the workspace was deleted or replaced); the next use measures again. */
  forget (ws: Workspace | string): void {
    const root = typeof ws === 'string' ? ws : ws.root
    const e = this.#entries.get(root)
    if (e === undefined) return
    e.gen++
    this.#entries.delete(root)
  }

  /** Room left before either limit, never negative. */
  async remaining (ws: Workspace): Promise<UsageFigure> {
    const cur = await this.current(ws)
    return { bytes: Math.max(0, this.quotaBytes - cur.bytes), files: Math.max(0, this.maxFiles - cur.files) }
  }

  /** True when the figure passes either limit. */
  over (fig: UsageFigure): boolean {
    return fig.bytes > this.quotaBytes || fig.files > this.maxFiles
  }

  /**
   * Watches a running command (bash exec, a background process) and kills it once the workspace
   * passes its quota, counting only growth since `start` (a workspace already over it, after the
   * quota was lowered, can still be cleaned up by a command). The workspace is measured again at
   * an interval that follows the growth rate (a quarter of the time left at the current rate, never
   * more often than twice a measure's cost, at least every 2 s while it grows), and at once when
   * the command's write counter (`target.written`) moved by a quarter of the room left. A single
   * file cannot pass the quota anyway (RLIMIT_FSIZE is set to the room left); what the watchdog
   * bounds is many files or several writers.
   */
  watch (ws: Workspace, target: WatchTarget, start?: UsageFigure): QuotaWatch {
    const state: { stopped: boolean, tripped: UsageFigure | undefined } = { stopped: false, tripped: undefined }
    const loop = async (): Promise<void> => {
      const base = start ?? await this.current(ws)
      const passed = (fig: UsageFigure): boolean =>
        (fig.bytes > this.quotaBytes && fig.bytes > base.bytes) || (fig.files > this.maxFiles && fig.files > base.files)
      let last = { bytes: base.bytes, files: base.files, at: Date.now() }
      let writtenAtMeasure = await target.written?.()
      let lastWritten = writtenAtMeasure
      let interval = WATCH_FIRST_MS
      let floor = WATCH_MIN_GAP_MS
      let tick = WATCH_TICK_MS
      let nextMeasure = Date.now() + interval
      while (!state.stopped) {
        await sleep(tick, undefined, { ref: false })
        if (state.stopped) return
        let now = Date.now()
        let due = now >= nextMeasure
        let written: number | undefined
        if (target.written !== undefined) {
          const previous = lastWritten
          written = await target.written()
          lastWritten = written
          // Reading the counters costs more without a cgroup (a /proc scan): polled at most a third
          // of the time, but never less often than WATCH_MAX_TICK_MS while the command writes (at
          // 1 GB/s, 50 ms is 50 MB). One that writes nothing is polled less and less often.
          const floorTick = Math.min(WATCH_MAX_TICK_MS, Math.max(WATCH_TICK_MS, 3 * (Date.now() - now)))
          tick = written !== undefined && written === previous ? Math.min(WATCH_IDLE_TICK_MS, Math.max(floorTick, tick * 2)) : floorTick
          const room = Math.max(0, this.quotaBytes - last.bytes)
          const trigger = Math.min(WATCH_MAX_TRIGGER, Math.max(WATCH_MIN_TRIGGER, room / 4))
          if (written !== undefined && writtenAtMeasure !== undefined && written - writtenAtMeasure >= trigger && now - last.at >= floor) due = true
          writtenAtMeasure ??= written
        }
        if (!due) continue
        const t0 = Date.now()
        const fig = await this.measure(ws)
        if (state.stopped) return
        now = Date.now()
        if (passed(fig)) {
          state.tripped = { bytes: fig.bytes, files: fig.files }
          target.kill()
          return
        }
        const cost = now - t0
        floor = Math.max(WATCH_MIN_GAP_MS, 2 * cost)
        const quiet = Math.max(WATCH_QUIET_MS, 20 * cost)
        const dt = Math.max(1, now - last.at)
        const rateBytes = (fig.bytes - last.bytes) / dt
        const rateFiles = (fig.files - last.files) / dt
        const eta = Math.min(
          rateBytes > 0 ? Math.max(0, this.quotaBytes - fig.bytes) / rateBytes : Infinity,
          rateFiles > 0 ? Math.max(0, this.maxFiles - fig.files) / rateFiles : Infinity
        )
        interval = eta === Infinity
          ? Math.min(quiet, Math.max(floor, interval * 2))
          : Math.min(WATCH_GROWING_MS, Math.max(floor, eta / 4))
        nextMeasure = now + interval
        last = { bytes: fig.bytes, files: fig.files, at: now }
        if (written !== undefined) writtenAtMeasure = written
      }
    }
    // A workspace removed under a running command: nothing left to watch.
    loop().catch(() => {})
    return {
      get tripped () { return state.tripped },
      stop: () => { state.stopped = true }
    }
  }
}

/** What the watchdog watches: a running command it can stop, and how much it has written. */
export interface WatchTarget {
  kill: () => void
  /** A counter of bytes written that only grows while the command runs (undefined: unknown). */
  written?: () => Promise<number | undefined>
}

export interface QuotaWatch {
  /** Set once the watchdog stopped the command: the figure that passed the quota. */
  readonly tripped: UsageFigure | undefined
  stop: () => void
}

/** The watchdog's first measure comes this soon after the start. */
const WATCH_FIRST_MS = 50
/** Polling of the write counter: this often while the command writes, backing off to the idle tick. */
const WATCH_TICK_MS = 10
const WATCH_IDLE_TICK_MS = 100
const WATCH_MAX_TICK_MS = 50
/** Measures never come closer than this (or twice the last measure's cost). */
const WATCH_MIN_GAP_MS = 20
/** A growing workspace is measured at least this often. */
const WATCH_GROWING_MS = 2000
/** A quiet one backs off to this (or 20 times a measure's cost: a huge tree is not walked non-stop). */
const WATCH_QUIET_MS = 5000
/** Bytes written since the last measure that call for one now: a quarter of the room left, within these. */
const WATCH_MIN_TRIGGER = 256 * 1024
const WATCH_MAX_TRIGGER = 16 * 1024 * 1024

/**
 * Counts a tree by fd (see the module comment), updating `partial` as it goes. Directories are
 * opened beneath their parent's fd with O_NOFOLLOW|O_DIRECTORY (a directory swapped for a symlink
 * is not entered: a tenant cannot make us count, or walk, anything outside), entries are lstat-ed
 * through /proc/self/fd/<dir>/<name>. The work is synchronous in slices of SLICE_MS with a yield to
 * the event loop between them: per entry, a synchronous lstat costs a few microseconds where the
 * thread pool's round trip costs several times that (50,000 files: ~0.5 s against ~2.5 s).
 */
async function countTree (root: string, partial: UsageFigure): Promise<Measured> {
  const seenInodes = new Set<string>()
  let exact = true
  interface Level { fd: number, dir: Dir }
  const stack: Level[] = []
  const enter = (fd: number): void => {
    try {
      stack.push({ fd, dir: opendirSync(at(fd), { bufferSize: 256 }) })
    } catch {
      closeSync(fd)
    }
  }
  const leave = (): void => {
    const top = stack.pop()
    if (top === undefined) return
    try { top.dir.closeSync() } catch {}
    try { closeSync(top.fd) } catch {}
  }
  const rootFd = openSync(root, DIR_FLAGS)
  enter(rootFd)
  try {
    let sliceStart = performance.now()
    while (stack.length > 0) {
      if (performance.now() - sliceStart >= SLICE_MS) {
        await setImmediatePromise()
        sliceStart = performance.now()
      }
      const top = stack[stack.length - 1] as Level
      let d: Dirent | null
      try {
        d = top.dir.readSync()
      } catch {
        // A directory removed under us: what was read is all there is.
        d = null
      }
      if (d === null) { leave(); continue }
      partial.files++
      const entry = at(top.fd, d.name)
      // A dirent of unknown type (some filesystems report none) is typed by lstat.
      const known = d.isDirectory() || d.isFile() || d.isSymbolicLink() || d.isFIFO() || d.isSocket() || d.isCharacterDevice() || d.isBlockDevice()
      let st: Stats | undefined
      if (d.isFile() || !known) {
        try {
          st = lstatSync(entry, { throwIfNoEntry: false })
        } catch {
          st = undefined
        }
        if (st !== undefined && st.isFile()) addFile(st)
      }
      if (d.isDirectory() || st?.isDirectory() === true) {
        if (stack.length >= MEASURE_MAX_DEPTH) { exact = false; continue }
        let fd: number
        try {
          fd = openSync(entry, DIR_FLAGS)
        } catch {
          continue
        }
        enter(fd)
      }
    }
  } finally {
    while (stack.length > 0) leave()
  }
  return { bytes: partial.bytes, files: partial.files, exact }

  function addFile (st: Stats): void {
    if (!st.isFile()) return
    if (st.nlink > 1) {
      const key = `${st.dev}:${st.ino}`
      if (seenInodes.has(key)) return
      seenInodes.add(key)
    }
    partial.bytes += st.size
  }
}

/** A write's change to the figure, as fd-tree.ts's writeFileAtomic reports it. */
export interface WriteChange { deltaBytes: number, deltaFiles: number }

/**
 * Runs one write under the quota: `work` spreads the given options into writeFileAtomic (or calls
 * `beforeWrite` itself with the change it is about to make). The change is reserved there, before
 * anything is written; a write that fails afterwards gives it back. Without `usage`, no check.
 */
export async function withQuota<T> (
  usage: WorkspaceUsage | undefined,
  ws: Workspace,
  work: (opts: { beforeWrite?: (change: WriteChange) => Promise<void> }) => Promise<T>
): Promise<T> {
  if (usage === undefined) return await work({})
  let reserved: WriteChange | undefined
  try {
    return await work({
      beforeWrite: async (change) => {
        await usage.reserve(ws, change.deltaBytes, change.deltaFiles)
        reserved = change
      }
    })
  } catch (err) {
    if (reserved !== undefined) usage.adjust(ws, -reserved.deltaBytes, -reserved.deltaFiles)
    throw noSpaceError(err)
  }
}

/**
 * The file system's refusal of a write (ENOSPC, EDQUOT: the workspace's image is full, in blocks
 * or inodes) as the documented quota error; anything else as it is.
 */
function noSpaceError (err: unknown): unknown {
  const code = errnoOf(err)
  if (code !== 'ENOSPC' && code !== 'EDQUOT') return err
  return quotaError(
    'Workspace quota exceeded (WORKSPACE_QUOTA_EXCEEDED): the workspace\'s file system is full (WORKSPACE_QUOTA_BYTES or ' +
    'WORKSPACE_MAX_FILES reached); nothing was written. Delete files to make room.'
  )
}
