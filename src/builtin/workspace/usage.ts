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
 * on in the background and its result replaces the figure when it ends. The walk is async I/O
 * throughout and awaits between batches, so a huge tree never blocks the event loop.
 *
 * Deltas that arrive while a walk runs may or may not be seen by it; the walk's result wins. The
 * error is bounded by one tool call's write and the next measure corrects it.
 */
import { constants as fsConstants } from 'node:fs'
import type { Stats } from 'node:fs'
import { lstat, open } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { at, walk } from './tree.js'

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW } = fsConstants
const O_CLOEXEC = 0o2000000

/** stat calls in flight at once during a measure (libuv's pool runs 4; more only queues). */
const STAT_BATCH = 64
/**
 * Deeper directories than this are not entered (each level holds an fd during the walk). A tree
 * that reaches it is reported inexact.
 */
const MEASURE_MAX_DEPTH = 1024

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
export function quotaError (message: string): ToolError {
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

  constructor (opts: WorkspaceUsageOptions) {
    if (!(opts.quotaBytes > 0) || !(opts.maxFiles > 0)) throw new Error('quotaBytes and maxFiles must be positive')
    this.quotaBytes = opts.quotaBytes
    this.maxFiles = opts.maxFiles
    this.#budgetMs = opts.measureBudgetMs ?? 2000
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
}

/**
 * Counts a tree by fd (see the module comment), updating `partial` as it goes. The stats of one
 * batch run concurrently; every stat of entries in a directory is awaited before that directory's
 * fd is closed (walk's onLeave), since a closed fd number can be reused by an unrelated open.
 */
async function countTree (root: string, partial: UsageFigure): Promise<Measured> {
  const base: FileHandle = await open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
  const seenInodes = new Set<string>()
  let exact = true
  let pending: Array<Promise<void>> = []
  const flush = async (): Promise<void> => {
    if (pending.length === 0) return
    const batch = pending
    pending = []
    await Promise.all(batch)
  }
  const addFile = (st: Stats | undefined): void => {
    if (st === undefined || !st.isFile()) return
    if (st.nlink > 1) {
      const key = `${st.dev}:${st.ino}`
      if (seenInodes.has(key)) return
      seenInodes.add(key)
    }
    partial.bytes += st.size
  }
  try {
    for await (const entry of walk(base, { maxDepth: MEASURE_MAX_DEPTH, onLeave: flush })) {
      partial.files++
      if (entry.kind === 'dir' && entry.rel.split('/').length >= MEASURE_MAX_DEPTH) exact = false
      // Dirents of an unknown type are stat-ed too: 'other' may be a file on such filesystems.
      if (entry.kind === 'file' || entry.kind === 'other') {
        pending.push(lstat(at(entry.dir, entry.name)).then(addFile, () => {}))
        if (pending.length >= STAT_BATCH) await flush()
      }
    }
    await flush()
  } finally {
    await flush().catch(() => {})
    await base.close().catch(() => {})
  }
  return { bytes: partial.bytes, files: partial.files, exact }
}

/** A write's change to the figure, as tree.ts's writeFileAtomic reports it. */
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
    throw err
  }
}
