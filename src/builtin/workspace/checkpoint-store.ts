/**
 * Checkpoints of a workspace: a per-tenant store of snapshots that share unchanged content.
 *
 * Layout under `<dir>/<tenant>/` (the gateway's own directory, mode 0700, outside every workspace):
 * - `objects/`, `trees/`, `tmp/`: the content-addressed store (checkpoint-objects.ts); a
 *   checkpoint is the hash of its root tree.
 * - `ws/<workspaceId>/index.json`: that workspace's checkpoints, newest first (id, createdAt,
 *   label, bytes, files, root tree).
 *
 * A checkpoint is taken by checkpoint-snapshot.ts and put back by checkpoint-restore.ts; this file
 * keeps the index, the stat memory of the last few workspaces (what makes both cheap), and the
 * garbage collection of objects no checkpoint reaches any more.
 *
 * Callers hold the workspace's write lock (no tool call interleaves). Within the store, every
 * change of one tenant's objects (create, restore, delete, garbage collection) runs one at a time,
 * so an object is never collected while a checkpoint that reuses it is being written.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import path from 'node:path'
import { promisify } from 'node:util'
import { HttpError } from '../../errors.js'
import { KeyedMutex } from '../../cluster/index.js'
import type { Workspace } from '../types.js'
import { ObjectStore, TreeCache } from './checkpoint-objects.js'
import type { TreeEntry } from './checkpoint-objects.js'
import { restoreTree } from './checkpoint-restore.js'
import { maybeTurn, newPass, snapshotTree } from './checkpoint-snapshot.js'
import type { CheckpointWork, Memo, Pass } from './checkpoint-snapshot.js'
import { errnoOf } from './fd.js'

const execFileAsync = promisify(execFile)
const CHECKPOINT_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
const DEFAULT_CHECKPOINTS_PER_WORKSPACE = 20
const LABEL_MAX = 200
/** Parsed trees kept in memory, all tenants together (about 1,000 for a 50,000-file workspace). */
const TREE_CACHE_SIZE = 20_000

export interface CheckpointInfo {
  checkpointId: string
  /** ISO 8601. */
  createdAt: string
  label: string | null
  /** Total size of the checkpoint's regular files (each name of a hard-linked file: a restore writes them apart). */
  bytes: number
  /**
   * Entries in it: files, directories, symlinks; counted as an upload's answer and the workspace
   * listing count them (usage.ts), so the same tree gives the same figure everywhere.
   */
  files: number
}

export interface CheckpointStoreOptions {
  /** Parent of the per-tenant stores, e.g. `<WORKSPACES_DIR>/.tg/checkpoints`; created mode 0700. */
  dir: string
  /** CHECKPOINTS_PER_WORKSPACE: creating one more drops the oldest. Default 20. */
  checkpointsPerWorkspace?: number
  /** Workspaces whose stat memory is kept (each holds a record per file). Default 8. */
  cachedWorkspaces?: number
  /** Failures of the background collection after a create (the next collection retries them). */
  onError?: (err: unknown) => void
}

interface IndexRecord extends CheckpointInfo {
  tree: string
}

function newId (): string {
  // Time-sortable: 9 base-36 digits of milliseconds (fixed width until the year 5188), then randomness.
  return `${Date.now().toString(36).padStart(9, '0')}-${randomBytes(5).toString('hex')}`
}

function checkId (id: unknown): asserts id is string {
  if (typeof id !== 'string' || !CHECKPOINT_ID_RE.test(id)) {
    throw new HttpError('GW_BAD_REQUEST', 'checkpointId must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$')
  }
}

function hasControl (s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i)
    if (c < 0x20 || c === 0x7f) return true
  }
  return false
}

export class CheckpointStore {
  readonly #dir: string
  readonly #limit: number
  readonly #cacheSize: number
  readonly #onError: (err: unknown) => void
  readonly #mutex = new KeyedMutex()
  /** Stat memory per workspace, least recently used first. */
  readonly #memos = new Map<string, Memo>()
  /** Parsed trees of every tenant: restore and collection read them without a file read each. */
  readonly #trees = new TreeCache(TREE_CACHE_SIZE)
  /** Tenants whose last collection failed: the next one sweeps the whole store, not only what was dropped. */
  readonly #dirty = new Set<string>()

  constructor (opts: CheckpointStoreOptions) {
    const limit = opts.checkpointsPerWorkspace ?? DEFAULT_CHECKPOINTS_PER_WORKSPACE
    if (!Number.isInteger(limit) || limit < 1) throw new Error('CHECKPOINTS_PER_WORKSPACE must be a positive integer')
    mkdirSync(opts.dir, { recursive: true, mode: 0o700 })
    this.#dir = opts.dir
    this.#limit = limit
    this.#cacheSize = opts.cachedWorkspaces ?? 8
    this.#onError = opts.onError ?? (() => {})
  }

  /** Takes a checkpoint of the workspace's current tree. */
  async create (ws: Workspace, opts: { label?: string } = {}): Promise<CheckpointInfo & { work: CheckpointWork }> {
    const label = opts.label ?? null
    if (label !== null && (typeof label !== 'string' || label.length > LABEL_MAX || hasControl(label))) {
      throw new HttpError('GW_BAD_REQUEST', `label must be a string of at most ${LABEL_MAX} characters without control characters`)
    }
    return await this.#mutex.run(this.#tenantDir(ws), async () => {
      const store = this.#objects(ws)
      const pass = this.#pass(ws)
      const tree = await snapshotTree(store, pass)
      const info: IndexRecord = { checkpointId: newId(), createdAt: new Date().toISOString(), label, bytes: pass.bytes, files: pass.files, tree }
      const index = this.#readIndex(ws)
      index.unshift(info)
      const dropped = index.splice(this.#limit)
      this.#writeIndex(ws, index)
      this.#remember(ws, pass.next)
      if (dropped.length > 0) {
        // Collected after the answer, still in the tenant's queue: nothing can reuse an object meanwhile.
        this.#mutex.run(this.#tenantDir(ws), async () => { await this.#collect(store, ws.tenant, dropped) }).catch(this.#onError)
      }
      const { tree: _tree, ...pub } = info
      return { ...pub, work: pass.work }
    })
  }

  /** Newest first. */
  async list (ws: Workspace): Promise<CheckpointInfo[]> {
    return this.#readIndex(ws).map(({ tree: _tree, ...pub }) => pub)
  }

  /**
   * Makes the workspace's tree exactly the checkpoint's. Files that still match what the store
   * knows of them are left alone; the others are written beside their target and renamed over it.
   */
  async restore (ws: Workspace, checkpointId: string): Promise<{ restored: true, checkpointId: string }> {
    checkId(checkpointId)
    return await this.#mutex.run(this.#tenantDir(ws), async () => {
      const rec = this.#find(ws, checkpointId)
      const store = this.#objects(ws)
      const pass = this.#pass(ws)
      // Whatever happens, the memory of this workspace is stale from here on.
      this.#memos.delete(this.#memoKey(ws))
      this.#remember(ws, await restoreTree(ws, store, rec, pass))
      return { restored: true as const, checkpointId }
    })
  }

  async delete (ws: Workspace, checkpointId: string): Promise<void> {
    checkId(checkpointId)
    await this.#mutex.run(this.#tenantDir(ws), async () => {
      const rec = this.#find(ws, checkpointId)
      this.#writeIndex(ws, this.#readIndex(ws).filter((r) => r.checkpointId !== checkpointId))
      await this.#collect(this.#objects(ws), ws.tenant, [rec])
    })
  }

  /** Removes every checkpoint of the workspace (the workspace is being deleted), then sweeps the tenant's store. */
  async deleteAll (ws: Workspace): Promise<void> {
    await this.#mutex.run(this.#tenantDir(ws), async () => {
      this.#memos.delete(this.#memoKey(ws))
      rmSync(this.#wsDir(ws), { recursive: true, force: true })
      await this.#collect(this.#objects(ws), ws.tenant, 'all')
    })
  }

  /** Resolves once the tenant's queued work (a collection after a create) is done. */
  async whenIdle (ws: Workspace): Promise<void> {
    await this.#mutex.run(this.#tenantDir(ws), async () => {})
  }

  /**
   * Bytes the tenant's checkpoints take on disk (objects, trees, indexes: what TENANT_QUOTA_BYTES
   * counts), by GNU du in a child process: the store may hold hundreds of thousands of objects.
   */
  async storedBytes (tenant: string): Promise<number> {
    const dir = path.join(this.#dir, tenant)
    try {
      const { stdout } = await execFileAsync('du', ['-s', '-B1', '-x', '--', dir], { timeout: 60_000 })
      const n = Number(stdout.split('\t')[0])
      return Number.isFinite(n) ? n : 0
    } catch {
      // No checkpoint yet (no directory), or du failed: nothing to count.
      return 0
    }
  }

  // --- layout -------------------------------------------------------------------------------

  #tenantDir (ws: Workspace): string {
    return path.join(this.#dir, ws.tenant)
  }

  #wsDir (ws: Workspace): string {
    return path.join(this.#tenantDir(ws), 'ws', ws.workspaceId)
  }

  #objects (ws: Workspace): ObjectStore {
    const store = new ObjectStore(this.#tenantDir(ws), this.#trees)
    store.init()
    return store
  }

  #readIndex (ws: Workspace): IndexRecord[] {
    return this.#readIndexAt(path.join(this.#wsDir(ws), 'index.json'))
  }

  #readIndexAt (file: string): IndexRecord[] {
    try {
      return JSON.parse(readFileSync(file, 'utf8')) as IndexRecord[]
    } catch (err) {
      if (errnoOf(err) === 'ENOENT') return []
      throw err
    }
  }

  #writeIndex (ws: Workspace, index: readonly IndexRecord[]): void {
    const dir = this.#wsDir(ws)
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    const tmp = path.join(dir, `.index.${randomBytes(6).toString('hex')}`)
    writeFileSync(tmp, JSON.stringify(index), { mode: 0o600 })
    renameSync(tmp, path.join(dir, 'index.json'))
  }

  #find (ws: Workspace, checkpointId: string): IndexRecord {
    const rec = this.#readIndex(ws).find((r) => r.checkpointId === checkpointId)
    if (rec === undefined) throw new HttpError('GW_CHECKPOINT_NOT_FOUND', `No checkpoint ${checkpointId} for workspace ${ws.workspaceId}`)
    return rec
  }

  // --- stat memory --------------------------------------------------------------------------

  #memoKey (ws: Workspace): string {
    return `${ws.tenant}\0${ws.workspaceId}\0${ws.root}`
  }

  #pass (ws: Workspace): Pass {
    return newPass(ws.root, this.#memos.get(this.#memoKey(ws)))
  }

  #remember (ws: Workspace, memo: Memo): void {
    const key = this.#memoKey(ws)
    this.#memos.delete(key)
    this.#memos.set(key, memo)
    while (this.#memos.size > this.#cacheSize) this.#memos.delete(this.#memos.keys().next().value as string)
  }

  // --- garbage collection -------------------------------------------------------------------

  /**
   * Mark and sweep over one tenant's store. Marks everything the remaining checkpoints (every
   * workspace of the tenant) reach; sweeps what the dropped ones reached and nothing marked, or,
   * with 'all', every object and tree not marked (also what a crashed create left behind).
   */
  async #collect (store: ObjectStore, tenant: string, dropped: readonly IndexRecord[] | 'all'): Promise<void> {
    const full = dropped === 'all' || this.#dirty.has(tenant)
    this.#dirty.add(tenant)
    await this.#markAndSweep(store, tenant, full ? 'all' : dropped)
    this.#dirty.delete(tenant)
  }

  async #markAndSweep (store: ObjectStore, tenant: string, dropped: readonly IndexRecord[] | 'all'): Promise<void> {
    const liveTrees = new Set<string>()
    const liveObjects = new Set<string>()
    const wsRoot = path.join(this.#dir, tenant, 'ws')
    let wsDirs: string[] = []
    try {
      wsDirs = readdirSync(wsRoot)
    } catch (err) {
      if (errnoOf(err) !== 'ENOENT') throw err
    }
    const readTree = (sha: string): readonly TreeEntry[] | undefined => {
      try {
        return store.readTree(sha)
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') return undefined
        throw err
      }
    }
    const clock = { lastTurn: performance.now() }
    const mark = async (sha: string): Promise<void> => {
      if (liveTrees.has(sha)) return
      liveTrees.add(sha)
      await maybeTurn(clock)
      for (const e of readTree(sha) ?? []) {
        if (e[1] === 'f') liveObjects.add(e[5])
        else if (e[1] === 'd') await mark(e[5])
      }
    }
    for (const w of wsDirs) {
      for (const rec of this.#readIndexAt(path.join(wsRoot, w, 'index.json'))) await mark(rec.tree)
    }

    if (dropped === 'all') {
      for (const [kind, sub] of [['object', 'objects'], ['tree', 'trees']] as const) {
        const live = kind === 'object' ? liveObjects : liveTrees
        const base = path.join(store.dir, sub)
        for (const prefix of readdirSync(base)) {
          for (const rest of readdirSync(path.join(base, prefix))) {
            if (!live.has(prefix + rest)) store.remove(kind, prefix + rest)
          }
          await maybeTurn(clock)
        }
      }
      for (const t of readdirSync(path.join(store.dir, 'tmp'))) rmSync(path.join(store.dir, 'tmp', t), { force: true })
      return
    }

    const seen = new Set<string>()
    const sweep = async (sha: string): Promise<void> => {
      if (liveTrees.has(sha) || seen.has(sha)) return
      seen.add(sha)
      await maybeTurn(clock)
      for (const e of readTree(sha) ?? []) {
        if (e[1] === 'f' && !liveObjects.has(e[5])) store.remove('object', e[5])
        else if (e[1] === 'd') await sweep(e[5])
      }
      store.remove('tree', sha)
    }
    for (const rec of dropped) await sweep(rec.tree)
  }
}
