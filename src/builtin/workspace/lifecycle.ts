/**
 * Workspaces as a managed resource: list, upload (replace or merge), download, one file, delete,
 * checkpoints, and the idle sweeper. Tenancy is the caller's business (the workspace facade): every
 * method here acts on the tenant it is given.
 *
 * Every change to a workspace's tree takes the workspace's write lock, the one BuiltinSource holds
 * around a mutating tool call (`workspaceWriteKey`), so no tool call interleaves with an upload's
 * swap, a restore or a delete.
 *
 * Gateway-private directories live under the manager's state directory (WORKSPACES_DIR/.tg, mode
 * 0700, root's): `staging/<random>` for uploads being extracted, `trash/<random>` for trees being
 * removed. A tree taken out of a workspace is first renamed there (atomic: the tenant's next call
 * gets a fresh directory) and then removed with GNU `rm -rf --one-file-system`, which walks by
 * directory fd and never follows a symlink, so a link swapped in by a process that still had the
 * tree open cannot redirect the removal.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import type { Stats } from 'node:fs'
import { chmod, lchown, lstat, mkdir, open, readdir, rename, rmdir } from 'node:fs/promises'
import type { FileHandle } from 'node:fs/promises'
import path from 'node:path'
import type { Readable } from 'node:stream'
import { promisify } from 'node:util'
import { HttpError } from '../../errors.js'
import type { Logger } from '../../logger.js'
import { LockUnavailableError, LockWaitAbortedError } from '../../cluster/index.js'
import type { WriteLock } from '../../cluster/index.js'
import { ToolError } from '../types.js'
import type { Workspace } from '../types.js'
import { extractArchive } from './archive-extract.js'
import { packWorkspace } from './archive-pack.js'
import type { CheckpointInfo, CheckpointStore } from './checkpoint-store.js'
import { at, DIR_FLAGS, errnoOf } from './fd.js'
import { openForRead } from './fd-tree.js'
import type { WorkspaceUsage } from './usage.js'
import { workspaceWriteKey } from './workspaces.js'
import type { WorkspaceManager } from './workspaces.js'

const execFileAsync = promisify(execFile)
/** Directories deeper than this in a merge are refused (each level holds two fds). */
const MERGE_MAX_DEPTH = 256

export interface WorkspaceSummary {
  workspaceId: string
  /** Apparent size of its regular files (a lower bound when the count ran out of time). */
  bytes: number
  /** Entries below its root. */
  files: number
  createdAt: string
  lastUsedAt: string
  /** When the idle sweeper will delete it; null without WORKSPACE_IDLE_TTL. */
  expiresAt: string | null
  quotaBytes: number
  /** Running background processes. */
  processes: number
}

export interface UploadOptions {
  /** replace (default): the workspace becomes the archive; merge: the archive is applied over it. */
  mode: 'replace' | 'merge'
  signal?: AbortSignal
}

export interface UploadResult {
  created: boolean
  bytes: number
  /** Entries (files, directories, symlinks), as usage.ts counts them. */
  files: number
  /** Where protected entries were skipped (archive-entries.ts ExtractResult), and how many. */
  skipped: string[]
  skippedEntries: number
}

/**
 * The background processes of a workspace as deletion and the summaries see them: the local
 * manager on one instance, every instance's with Redis (ProcessService).
 */
export interface WorkspaceProcesses {
  running: (ws: Workspace) => number | Promise<number>
  stopAll: (ws: Workspace) => Promise<void>
}

export interface WorkspaceLifecycleOptions {
  workspaces: WorkspaceManager
  processes: WorkspaceProcesses
  checkpoints: CheckpointStore
  usage: WorkspaceUsage
  /** The write lock BuiltinSource takes around mutating tool calls (cluster-wide with Redis). */
  writes: WriteLock
  /** WORKSPACE_IDLE_TTL in ms; undefined keeps workspaces forever. */
  idleTtlMs?: number
  /** TENANT_QUOTA_BYTES: a tenant's workspaces and checkpoints together (unlimited when unset). */
  tenantQuotaBytes?: number
  /** How often the sweeper looks (default: a quarter of the TTL, between 1 s and 10 min). */
  sweepEveryMs?: number
  logger: Logger
}

function notFound (workspaceId: string): HttpError {
  return new HttpError('GW_WORKSPACE_NOT_FOUND', `No workspace "${workspaceId}" for this tenant`)
}

export class WorkspaceLifecycle {
  readonly #ws: WorkspaceManager
  readonly #processes: WorkspaceProcesses
  readonly #checkpoints: CheckpointStore
  readonly #usage: WorkspaceUsage
  readonly #writes: WriteLock
  readonly #ttlMs: number | undefined
  readonly #tenantQuotaBytes: number
  readonly #logger: Logger
  readonly #timer: NodeJS.Timeout | undefined
  #sweeping: Promise<void> | undefined
  #closed = false

  constructor (opts: WorkspaceLifecycleOptions) {
    this.#ws = opts.workspaces
    this.#processes = opts.processes
    this.#checkpoints = opts.checkpoints
    this.#usage = opts.usage
    this.#writes = opts.writes
    this.#ttlMs = opts.idleTtlMs
    this.#tenantQuotaBytes = opts.tenantQuotaBytes ?? Infinity
    this.#logger = opts.logger
    if (this.#ttlMs !== undefined) {
      const every = opts.sweepEveryMs ?? Math.min(600_000, Math.max(1000, Math.floor(this.#ttlMs / 4)))
      this.#timer = setInterval(() => { this.sweep().catch(() => {}) }, every)
      this.#timer.unref()
    }
  }

  get quotaBytes (): number {
    return this.#usage.quotaBytes
  }

  /** Stops the sweeper and waits for a sweep in progress. */
  async close (): Promise<void> {
    this.#closed = true
    if (this.#timer !== undefined) clearInterval(this.#timer)
    await this.#sweeping
  }

  async #find (tenant: string, workspaceId: string): Promise<Workspace> {
    const ws = await this.#ws.find(tenant, workspaceId).catch(rethrow)
    if (ws === undefined) throw notFound(workspaceId)
    return ws
  }

  async #locked<T> (ws: Workspace, task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    try {
      return await this.#writes.run(workspaceWriteKey(ws), task, { signal })
    } catch (err) {
      // Fail closed: without the cluster-wide lock nothing was changed.
      if (err instanceof LockUnavailableError) throw new HttpError('GW_WORKSPACE_LOCK_UNAVAILABLE', err.message)
      if (err instanceof LockWaitAbortedError) {
        throw new HttpError('GW_BAD_REQUEST', 'Client disconnected while the upload waited for the workspace write lock; nothing was changed')
      }
      throw err
    }
  }

  // --- the tenant's bytes (TENANT_QUOTA_BYTES) ---------------------------------------------------

  /**
   * What the tenant holds: its workspaces' bytes (the figures usage.ts keeps, measured when
   * unknown) and its checkpoint store's bytes on disk.
   */
  async tenantBytes (tenant: string): Promise<number> {
    let total = await this.#checkpoints.storedBytes(tenant)
    for (const id of await this.#ws.workspaceIds(tenant)) {
      const ws = await this.#ws.find(tenant, id).catch(() => undefined)
      if (ws === undefined) continue
      const fig = this.#usage.get(ws) ?? await this.#usage.measure(ws, 1000).catch(() => ({ bytes: 0 }))
      total += fig.bytes
    }
    return total
  }

  #tenantRefusal (tenant: string, total: number, extra: number): string {
    const what = extra > 0 ? `this adds ${extra} bytes to the ${total} bytes` : `the ${total} bytes`
    return `Tenant byte limit reached (GW_TENANT_QUOTA_EXCEEDED): ${what} tenant ${tenant}'s workspaces and checkpoints hold, TENANT_QUOTA_BYTES is ${this.#tenantQuotaBytes}; nothing was changed. Delete workspaces or checkpoints to make room.`
  }

  /** Refuses (403) a change that adds `extra` bytes past TENANT_QUOTA_BYTES. */
  async #admitBytes (tenant: string, extra: number): Promise<void> {
    if (this.#tenantQuotaBytes === Infinity || extra <= 0) return
    const total = await this.tenantBytes(tenant)
    if (total + extra > this.#tenantQuotaBytes) throw new HttpError('GW_TENANT_QUOTA_EXCEEDED', this.#tenantRefusal(tenant, total, extra))
  }

  /** The manager's check before a tenant's new workspace: refused while the tenant is at its bytes. */
  async admitWorkspace (tenant: string): Promise<void> {
    if (this.#tenantQuotaBytes === Infinity) return
    const total = await this.tenantBytes(tenant)
    if (total >= this.#tenantQuotaBytes) throw new ToolError(this.#tenantRefusal(tenant, total, 0), 'tenant-quota')
  }

  /** A checkpoint just made that takes the tenant past its bytes is dropped again, and refused. */
  async #keepCheckpoint (ws: Workspace, checkpointId: string): Promise<void> {
    if (this.#tenantQuotaBytes === Infinity) return
    const total = await this.tenantBytes(ws.tenant)
    if (total <= this.#tenantQuotaBytes) return
    await this.#checkpoints.delete(ws, checkpointId).catch(() => {})
    throw new HttpError('GW_TENANT_QUOTA_EXCEEDED', this.#tenantRefusal(ws.tenant, total, 0))
  }

  // --- listing --------------------------------------------------------------------------------

  async list (tenant: string): Promise<WorkspaceSummary[]> {
    const out: WorkspaceSummary[] = []
    for (const id of await this.#ws.workspaceIds(tenant)) {
      const ws = await this.#ws.find(tenant, id)
      if (ws === undefined) continue
      const known = this.#usage.get(ws)
      const fig = known ?? await this.#usage.measure(ws, 1000).catch(() => ({ bytes: 0, files: 0 }))
      const { lastUsedAt, createdAt } = await this.#ws.usage(ws)
      out.push({
        workspaceId: id,
        bytes: fig.bytes,
        files: fig.files,
        createdAt: new Date(createdAt).toISOString(),
        lastUsedAt: new Date(lastUsedAt).toISOString(),
        expiresAt: this.#ttlMs === undefined ? null : new Date(lastUsedAt + this.#ttlMs).toISOString(),
        quotaBytes: this.#usage.quotaBytes,
        processes: await this.#processes.running(ws)
      })
    }
    return out
  }

  // --- upload ---------------------------------------------------------------------------------

  /**
   * Extracts the archive into a private staging directory (every entry checked before it is
   * written, limits at each header), then, under the write lock, swaps it in (replace) or moves
   * its entries over the existing tree (merge). A refused or truncated archive changes nothing,
   * and a workspace this upload would have created is not left behind. A replace stops the
   * workspace's background processes first: their tree is gone, and left running they would go on
   * writing into the trash (a merge keeps the tree, and them). Entries the file tools never write
   * are skipped and reported (archive-entries.ts).
   */
  async upload (tenant: string, workspaceId: string, body: Readable, opts: UploadOptions): Promise<UploadResult> {
    const existing = await this.#ws.find(tenant, workspaceId).catch(rethrow)
    let limits = { maxBytes: this.#usage.quotaBytes, maxFiles: this.#usage.maxFiles }
    if (opts.mode === 'merge' && existing !== undefined) {
      const cur = await this.#usage.current(existing)
      limits = { maxBytes: Math.max(0, limits.maxBytes - cur.bytes), maxFiles: Math.max(0, limits.maxFiles - cur.files) }
    }
    // A new workspace past the tenant's limits is refused before an image is made or a byte extracted.
    if (existing === undefined) await this.#ws.admitNew(tenant).catch(rethrow)
    const owner = existing?.owner ?? (await this.#ws.ownerFor(tenant))
    // With quota images (docs/ARCHITECTURE.md#workspace-quota) the archive is extracted on the
    // file system it ends up on: a new image for a replace (swapped in whole), the workspace's own
    // image for a merge (moved in by rename). The file system's quota bounds the extraction too.
    const vols = this.#ws.volumes
    const mergeInPlace = opts.mode === 'merge' && existing !== undefined
    const prepared = vols !== undefined && !mergeInPlace
      ? await vols.prepare(tenant, workspaceId, owner).catch((err: unknown) => { throw new HttpError('GW_INTERNAL', `cannot make the workspace image: ${String(err)}`) })
      : undefined
    const staging = prepared?.dir ??
      (vols !== undefined && existing !== undefined ? await vols.privateDir(existing.root, 'staging') : undefined) ??
      await this.#privateDir('staging')
    try {
      const extracted = await extractArchive(body, {
        stagingDir: staging,
        limits,
        ...(opts.signal !== undefined ? { signal: opts.signal } : {}),
        ...(owner !== undefined ? { owner } : {})
      }).catch(noSpace)
      // A replace frees what the workspace holds now (unknown when a concurrent upload swaps it: none).
      const freed = existing !== undefined && !mergeInPlace ? (await this.#usage.current(existing).catch(() => ({ bytes: 0 }))).bytes : 0
      await this.#admitBytes(tenant, extracted.bytes - freed)
      // Only now, with the whole archive good, does the workspace come to exist.
      const { ws, created } = await this.#ws.open(tenant, workspaceId).catch(rethrow)
      const skipped = { skipped: extracted.skipped, skippedEntries: extracted.skippedEntries }
      return await this.#locked(ws, async () => {
        if (prepared !== undefined) {
          await this.#processes.stopAll(ws)
          // A workspace from before images: its tree is moved out, not hidden under the mount.
          let legacy: string | undefined
          if (vols?.enforces(ws.root) !== true) {
            legacy = await this.#privateDir('trash', false)
            await rename(ws.root, legacy)
            await mkdir(ws.root, { mode: 0o700 })
          }
          await prepared.commit(ws.root)
          if (legacy !== undefined) this.#removePrivate(legacy).catch(() => {})
          this.#usage.forget(ws)
          return { created, bytes: extracted.bytes, files: extracted.files, ...skipped }
        }
        if (opts.mode === 'replace') {
          await this.#processes.stopAll(ws)
          if (ws.owner !== undefined) await lchown(staging, ws.owner.uid, ws.owner.gid)
          await chmod(staging, 0o700)
          const trash = await this.#privateDir('trash', false)
          let old = true
          await rename(ws.root, trash).catch((err: unknown) => {
            // Deleted meanwhile: the archive simply becomes the workspace.
            if (errnoOf(err) !== 'ENOENT') throw err
            old = false
          })
          try {
            await rename(staging, ws.root)
          } catch (err) {
            if (old) await rename(trash, ws.root).catch(() => {})
            throw err
          }
          this.#usage.forget(ws)
          // After the answer: the old tree may be large, and nothing refers to it any more.
          if (old) this.#removePrivate(trash).catch(() => {})
          return { created, bytes: extracted.bytes, files: extracted.files, ...skipped }
        }
        // On a quota image the tree is named by the image's own mount, where the staging is:
        // rename(2) never crosses mount points, and the workspace's root is a bind mount (EXDEV).
        const tree = vols?.treeDir(ws.root) ?? ws.root
        // Extracted before the lock: a replace upload or a delete may have swapped the
        // workspace's file system meanwhile (a new image, or none), and the staging with it.
        if (!(await sameFileSystem(staging, tree))) {
          throw new HttpError(
            'GW_WORKSPACE_BUSY',
            'The workspace was replaced or deleted while this merge upload was being extracted; nothing was changed: retry the upload'
          )
        }
        await mergeTree(staging, tree, (name) => this.#moveToTrash(name, ws.root)).catch(noSpace)
        this.#usage.forget(ws)
        const fig = await this.#usage.measure(ws)
        return { created, bytes: fig.bytes, files: fig.files, ...skipped }
      }, opts.signal)
    } finally {
      if (prepared !== undefined) await prepared.discard()
      else await this.#removePrivate(staging)
    }
  }

  /** A fresh directory under the state directory (made, 0700, unless `make` is false). */
  async #privateDir (kind: 'staging' | 'trash', make = true): Promise<string> {
    const parent = path.join(this.#ws.stateDir, kind)
    await mkdir(parent, { recursive: true, mode: 0o700 })
    const dir = path.join(parent, randomBytes(12).toString('hex'))
    if (make) await mkdir(dir, { mode: 0o700 })
    return dir
  }

  /** Moves an entry out of a workspace (dir fd, name) into the trash and removes it there. */
  async #moveToTrash (from: { dir: FileHandle, name: string }, root: string): Promise<void> {
    // On a quota image the trash is on the image (a rename never leaves its file system).
    const trash = await this.#ws.volumes?.privateDir(root, 'trash') ?? await this.#privateDir('trash', false)
    await rename(at(from.dir, from.name), trash)
    await this.#removePrivate(trash)
  }

  /** Removes a tree under the state directory; failures are logged (the trash is swept again at start-up). */
  async #removePrivate (dir: string): Promise<void> {
    try {
      await execFileAsync('rm', ['-rf', '--one-file-system', '--', dir], { timeout: 600_000, maxBuffer: 1024 * 1024 })
    } catch (err) {
      this.#logger.warn({ err, dir }, 'could not remove a private workspace tree')
    }
  }

  /** Empties the trash and staging left by a previous process (a crash mid-upload or mid-delete). */
  async cleanLeftovers (): Promise<void> {
    for (const kind of ['staging', 'trash']) {
      const dir = path.join(this.#ws.stateDir, kind)
      const names = await readdir(dir).catch(() => [] as string[])
      for (const n of names) await this.#removePrivate(path.join(dir, n))
    }
  }

  // --- download -------------------------------------------------------------------------------

  async archive (tenant: string, workspaceId: string, subPath: string | undefined, signal?: AbortSignal): Promise<Readable> {
    const ws = await this.#find(tenant, workspaceId)
    return await packWorkspace(ws, subPath ?? '.', signal !== undefined ? { signal } : {})
  }

  /** One regular file, opened by the tools' resolver (in-tree symlinks followed beneath the root). */
  async file (tenant: string, workspaceId: string, filePath: string): Promise<{ fh: FileHandle, size: number, rel: string }> {
    const ws = await this.#find(tenant, workspaceId)
    try {
      const { fh, st, rel } = await openForRead(ws, filePath)
      return { fh, size: st.size, rel }
    } catch (err) {
      if (err instanceof ToolError) {
        if (/^File does not exist/.test(err.message)) throw new HttpError('GW_NOT_FOUND', err.message)
        // An escape, a directory, a FIFO: the path the request named is wrong.
        throw new HttpError('GW_BAD_REQUEST', err.message)
      }
      throw err
    }
  }

  // --- delete ---------------------------------------------------------------------------------

  /** Stops the workspace's background processes, then removes it and its checkpoints. */
  async delete (tenant: string, workspaceId: string): Promise<void> {
    const ws = await this.#find(tenant, workspaceId)
    await this.#remove(ws)
  }

  async #remove (ws: Workspace, stillIdle?: () => Promise<boolean>): Promise<boolean> {
    const trash = await this.#privateDir('trash', false)
    const vols = this.#ws.volumes
    let viaImage = false
    const removed = await this.#locked(ws, async () => {
      if (stillIdle !== undefined && !(await stillIdle())) return false
      await this.#processes.stopAll(ws)
      if (vols?.enforces(ws.root) === true) {
        // A quota image goes whole: unmounted (lazily) and its file removed, however much it
        // holds; its directory with it.
        await vols.remove(ws.tenant, ws.workspaceId, ws.root)
        this.#usage.forget(ws)
        await this.#checkpoints.deleteAll(ws)
        await this.#ws.forgetUse(ws.tenant, ws.workspaceId)
        viaImage = true
        return true
      }
      vols?.forget(ws.root)
      try {
        await rename(ws.root, trash)
      } catch (err) {
        if (errnoOf(err) === 'ENOENT') throw notFound(ws.workspaceId)
        throw err
      }
      this.#usage.forget(ws)
      await this.#checkpoints.deleteAll(ws)
      await this.#ws.forgetUse(ws.tenant, ws.workspaceId)
      return true
    })
    if (removed && !viaImage) await this.#removePrivate(trash)
    return removed
  }

  // --- checkpoints ----------------------------------------------------------------------------

  async createCheckpoint (tenant: string, workspaceId: string, label?: string): Promise<CheckpointInfo> {
    const ws = await this.#find(tenant, workspaceId)
    const { work: _work, ...info } = await this.#locked(ws, async () => {
      const made = await this.#checkpoints.create(ws, label !== undefined ? { label } : {})
      await this.#keepCheckpoint(ws, made.checkpointId)
      return made
    })
    return info
  }

  /** A checkpoint taken by a tool call that already holds the write lock (context.checkpoint). */
  async checkpointHeld (ws: Workspace): Promise<string> {
    const info = await this.#checkpoints.create(ws, { label: 'auto' })
    try {
      await this.#keepCheckpoint(ws, info.checkpointId)
    } catch (err) {
      throw new ToolError((err as Error).message, 'tenant-quota')
    }
    return info.checkpointId
  }

  async listCheckpoints (tenant: string, workspaceId: string): Promise<CheckpointInfo[]> {
    const ws = await this.#find(tenant, workspaceId)
    return await this.#checkpoints.list(ws)
  }

  async restoreCheckpoint (tenant: string, workspaceId: string, checkpointId: string): Promise<{ restored: true, checkpointId: string }> {
    const ws = await this.#find(tenant, workspaceId)
    return await this.#locked(ws, async () => {
      try {
        return await this.#checkpoints.restore(ws, checkpointId)
      } finally {
        this.#usage.forget(ws)
      }
    })
  }

  async deleteCheckpoint (tenant: string, workspaceId: string, checkpointId: string): Promise<void> {
    const ws = await this.#find(tenant, workspaceId)
    await this.#checkpoints.delete(ws, checkpointId)
  }

  // --- idle expiry ----------------------------------------------------------------------------

  /** Deletes every workspace unused for longer than WORKSPACE_IDLE_TTL (one sweep at a time). */
  async sweep (): Promise<number> {
    if (this.#ttlMs === undefined || this.#closed) return 0
    if (this.#sweeping !== undefined) {
      await this.#sweeping
      return 0
    }
    let n = 0
    const run = (async () => {
      const ttl = this.#ttlMs as number
      for (const tenant of await this.#ws.tenants()) {
        for (const id of await this.#ws.workspaceIds(tenant)) {
          if (this.#closed) return
          try {
            const ws = await this.#ws.find(tenant, id)
            if (ws === undefined) continue
            const idle = async (): Promise<boolean> => Date.now() - (await this.#ws.usage(ws)).lastUsedAt > ttl
            if (!(await idle())) continue
            // Checked again under the lock: a tool call may have used it meanwhile.
            if (await this.#remove(ws, idle)) {
              n++
              this.#logger.info({ tenant, workspaceId: id }, 'idle workspace deleted (WORKSPACE_IDLE_TTL)')
            }
          } catch (err) {
            this.#logger.warn({ err, tenant, workspaceId: id }, 'idle workspace could not be deleted')
          }
        }
      }
    })()
    this.#sweeping = run.catch((err: unknown) => { this.#logger.warn({ err }, 'workspace sweep failed') }).finally(() => { this.#sweeping = undefined })
    await this.#sweeping
    return n
  }
}

/** A ToolError from the manager (bad id) is the request's fault. */
function rethrow (err: unknown): never {
  if (err instanceof ToolError && err.reason === 'tenant-quota') throw new HttpError('GW_TENANT_QUOTA_EXCEEDED', err.message)
  if (err instanceof ToolError) throw new HttpError('GW_BAD_REQUEST', err.message)
  throw err
}

/** Whether both exist on one file system (a rename between them cannot meet EXDEV for that reason). */
async function sameFileSystem (a: string, b: string): Promise<boolean> {
  try {
    return (await lstat(a)).dev === (await lstat(b)).dev
  } catch {
    return false
  }
}

/** A write that met the end of a quota image (ENOSPC: no block or no inode left) is the upload's size. */
function noSpace (err: unknown): never {
  const c = errnoOf(err)
  if (c === 'ENOSPC' || c === 'EDQUOT') {
    throw new HttpError(
      'GW_PAYLOAD_TOO_LARGE',
      'The archive does not fit in the workspace quota (WORKSPACE_QUOTA_BYTES, WORKSPACE_MAX_FILES); nothing was changed'
    )
  }
  throw err
}

/**
 * Moves the entries of the private tree `staging` over the workspace's directory `tree` (on the
 * same mount as `staging`), by directory fd on the
 * workspace's side (the tenant may swap any of its entries for a symlink meanwhile: nothing there
 * is followed). A directory missing in the workspace moves in whole with one rename; one present
 * is entered and merged, and takes the archive's mode; a file or symlink replaces what is there
 * (a directory in its way is moved out to the trash first, like tar's overwrite).
 */
async function mergeTree (staging: string, tree: string, trash: (e: { dir: FileHandle, name: string }) => Promise<void>): Promise<void> {
  const dst = await open(tree, DIR_FLAGS)
  try {
    await mergeDir(staging, dst, trash, 0)
  } finally {
    await dst.close()
  }
}

async function mergeDir (src: string, dst: FileHandle, trash: (e: { dir: FileHandle, name: string }) => Promise<void>, depth: number): Promise<void> {
  if (depth > MERGE_MAX_DEPTH) throw new HttpError('GW_BAD_ARCHIVE', `The archive is nested deeper than ${MERGE_MAX_DEPTH} directories`)
  for (const name of await readdir(src)) {
    const from = path.join(src, name)
    const st: Stats = await lstat(from)
    if (st.isDirectory()) {
      let sub: FileHandle | undefined
      try {
        sub = await open(at(dst, name), DIR_FLAGS)
      } catch (err) {
        const c = errnoOf(err)
        if (c === 'ELOOP' || c === 'ENOTDIR') await trash({ dir: dst, name })
        else if (c !== 'ENOENT') throw err
      }
      if (sub === undefined) {
        await rename(from, at(dst, name))
        continue
      }
      try {
        await mergeDir(from, sub, trash, depth + 1)
        await sub.chmod(st.mode & 0o777)
        await sub.utimes(st.atime, st.mtime)
      } finally {
        await sub.close()
      }
      await rmdir(from).catch(() => {})
      continue
    }
    try {
      await rename(from, at(dst, name))
    } catch (err) {
      const c = errnoOf(err)
      if (c !== 'EISDIR' && c !== 'ENOTEMPTY' && c !== 'EEXIST' && c !== 'ENOTDIR') throw err
      await trash({ dir: dst, name })
      await rename(from, at(dst, name))
    }
  }
}
