/**
 * The workspace quota enforced by the file system (docs/ARCHITECTURE.md#workspace-quota): each
 * tenant workspace is its own ext4 image, loop-mounted, sized to WORKSPACE_QUOTA_BYTES and holding
 * exactly WORKSPACE_MAX_FILES free inodes. A write past either fails in the kernel (ENOSPC) at
 * once, however many writers race (fallocate, parallel `head > f &`, a file creator): there is no
 * polling to outrun, and the host's disk gives the workspace at most the image.
 *
 * Layout, all below the gateway's private state directory (mode 0700, out of every sandbox):
 * - `images/<tenant>/<workspaceId>.img`: the image, a sparse file (it takes on the host only the
 *   blocks written);
 * - `mnt/<tenant>/<workspaceId>`: where the image is mounted (nodev, nosuid). Its root holds
 *   `lost+found`, the inodes and blocks held back to pin the capacity (`.reserve`), the staging
 *   and trash of merge uploads (`.staging`, `.trash`: same file system, so they move in by
 *   rename and count against the quota) and `ws`, the workspace itself;
 * - `ws` is bind-mounted at the workspace's usual directory (WORKSPACES_DIR/<tenant>/<id>), so the
 *   file tools' fd walks and the bwrap sandbox see the same path as without images, and nothing
 *   of the image's root (lost+found, .reserve, staging) is reachable from the workspace.
 *
 * Mounts outlive the gateway process: at start-up, mounts of a previous instance (one SIGKILLed)
 * are adopted when they are the image's, replaced otherwise; `close()` unmounts (lazily: a
 * process still inside keeps its view until it ends) on shutdown, and a deleted workspace's image
 * is unmounted and removed, which is instant whatever it holds.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { closeSync, constants as fsConstants, openSync } from 'node:fs'
import { chown, lstat, mkdir, readdir, readFile, rename, rm, rmdir, statfs, truncate } from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import type { Logger } from '../../logger.js'
import { KeyedMutex } from '../../cluster/index.js'
import { errnoOf } from './fd.js'

const execFileAsync = promisify(execFile)

const MiB = 1024 * 1024
/** ext4 block size of the images: 1 KiB keeps the rounding of small files (and so the gap between apparent bytes and blocks) small. */
const BLOCK = 1024
const INODE_SIZE = 256
/** Inodes of the image's root the workspace cannot use: the reserved ones (1-10), lost+found, ws, .reserve, .staging, .trash. */
const LAYOUT_INODES = 15
/** Time any one mkfs, mount or umount may take. */
const COMMAND_TIMEOUT_MS = 30_000
/** What `close()` waits for all unmounts together. */
const CLOSE_BUDGET_MS = 10_000

const WS = 'ws'
const RESERVE = '.reserve'
const STAGING = '.staging'
const TRASH = '.trash'
/** Names a replace upload's image until it is swapped in; never a workspace id (those start with a letter or digit). */
const NEW_PREFIX = '.new-'

export type QuotaMode = 'loop' | 'watchdog'

/** mkfs.ext4 as the probe found it (PATH may lack /usr/sbin). */
let mkfsPath: string | undefined

export interface WorkspaceVolumesOptions {
  /** The gateway's private state directory (WorkspaceManager.stateDir). */
  stateDir: string
  /** WORKSPACES_DIR (real path): where each workspace is bind-mounted. */
  workspacesDir: string
  quotaBytes: number
  maxFiles: number
  logger?: Pick<Logger, 'info' | 'warn'>
}

/** The room the file system gives a workspace's bytes beyond the quota: block rounding (directories, the tail block of each file). */
export function blockSlack (quotaBytes: number): number {
  return Math.min(64 * MiB, Math.max(MiB, Math.floor(quotaBytes / 16)))
}

/**
 * Whether loop-mounted images work here (root, mkfs.ext4, a loop mount): a real image is made,
 * mounted and removed. Resolves with the reason when not.
 */
export async function probeLoopVolumes (stateDir: string): Promise<{ ok: true } | { ok: false, reason: string }> {
  if (process.getuid?.() !== 0) return { ok: false, reason: 'the gateway does not run as root (a loop mount needs it)' }
  mkfsPath = undefined
  for (const candidate of ['mkfs.ext4', '/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4']) {
    try {
      await execFileAsync(candidate, ['-V'], { timeout: COMMAND_TIMEOUT_MS })
      mkfsPath = candidate
      break
    } catch {}
  }
  if (mkfsPath === undefined) return { ok: false, reason: 'mkfs.ext4 is missing (install e2fsprogs)' }
  const dir = path.join(stateDir, 'probe', randomBytes(6).toString('hex'))
  const image = `${dir}.img`
  try {
    await mkdir(dir, { recursive: true, mode: 0o700 })
    closeSync(openSync(image, 'w', 0o600))
    await truncate(image, 4 * MiB)
    await mkfs(image, 64)
    await mountImage(image, dir)
    await umount(dir, false)
    return { ok: true }
  } catch (err) {
    return { ok: false, reason: `a loop mount failed: ${firstLine(err)}` }
  } finally {
    await rm(image, { force: true }).catch(() => {})
    await rmdir(dir).catch(() => {})
  }
}

interface Volume {
  image: string
  mnt: string
}

export class WorkspaceVolumes {
  readonly #stateDir: string
  readonly #workspacesDir: string
  readonly quotaBytes: number
  readonly maxFiles: number
  readonly #logger: WorkspaceVolumesOptions['logger']
  /** Mounted workspaces, by root (WORKSPACES_DIR/<tenant>/<id>). */
  readonly #mounted = new Map<string, Volume>()
  /** Workspaces that hold files from before images (a watchdog mode run): left unmounted, the watchdog covers them. */
  readonly #legacy = new Set<string>()
  /** One change of a workspace's volume at a time. */
  readonly #busy = new KeyedMutex()
  /** Mount points of replace uploads' new images, until committed or discarded (close() unmounts them too). */
  readonly #prepared = new Set<string>()
  #closed = false

  constructor (opts: WorkspaceVolumesOptions) {
    this.#stateDir = opts.stateDir
    this.#workspacesDir = opts.workspacesDir
    this.quotaBytes = opts.quotaBytes
    this.maxFiles = opts.maxFiles
    this.#logger = opts.logger
  }

  /** Whether the workspace at `root` is a mounted image (its quota is the file system's). */
  enforces (root: string): boolean {
    return this.#mounted.has(root)
  }

  #image (tenant: string, workspaceId: string): string {
    return path.join(this.#stateDir, 'images', tenant, `${workspaceId}.img`)
  }

  #mnt (tenant: string, workspaceId: string): string {
    return path.join(this.#stateDir, 'mnt', tenant, workspaceId)
  }

  /**
   * Makes the workspace at `root` (an existing directory, made by the caller) a mounted image,
   * before anything uses it: the image when there is one, a new one when the directory is empty.
   * A directory with files and no image (made before images were used) is left as it is: the
   * watchdog covers it. Returns whether the file system enforces the quota there.
   */
  async ensure (tenant: string, workspaceId: string, root: string, owner: { uid: number, gid: number } | undefined): Promise<boolean> {
    if (this.#mounted.has(root)) return true
    if (this.#legacy.has(root)) return false
    return await this.#busy.run(root, async () => {
      if (this.#mounted.has(root)) return true
      // After close() nothing is mounted any more (it would outlive the gateway); the workspace is
      // not used bare either (its files would land under the mount point).
      this.#assertOpen()
      const image = this.#image(tenant, workspaceId)
      const mnt = this.#mnt(tenant, workspaceId)
      const exists = await lstat(image).then(() => true, () => false)
      if (!exists) {
        if ((await readdir(root)).length > 0 && !(await isMountPoint(root))) {
          this.#legacy.add(root)
          this.#logger?.warn(
            { tenant, workspaceId },
            'workspace made before quota images: its quota is kept by the watchdog (upload it again to move it into an image)'
          )
          return false
        }
        const t0 = performance.now()
        await this.#create(image, mnt, owner)
        this.#logger?.info({ tenant, workspaceId, ms: Math.round(performance.now() - t0) }, 'workspace image made')
      } else {
        await this.#mount(image, mnt)
      }
      await this.#bind(mnt, root)
      this.#mounted.set(root, { image, mnt })
      return true
    })
  }

  #assertOpen (): void {
    if (this.#closed) throw new Error('the gateway is shutting down')
  }

  /** Makes, formats and mounts a new image at `mnt`, its `ws` owned by `owner`; removed again on failure. */
  async #create (image: string, mnt: string, owner: { uid: number, gid: number } | undefined): Promise<void> {
    await mkdir(path.dirname(image), { recursive: true, mode: 0o700 })
    await rm(image, { force: true })
    closeSync(openSync(image, fsConstants.O_WRONLY | fsConstants.O_CREAT | fsConstants.O_EXCL, 0o600))
    try {
      const capacity = this.quotaBytes + blockSlack(this.quotaBytes)
      // The inode tables, bitmaps and group descriptors come out of the image: it is made larger
      // by an estimate of them, and what is left over is held back in .reserve (below).
      let size = roundUp(capacity + (this.maxFiles + LAYOUT_INODES) * INODE_SIZE + Math.ceil(capacity / 64) + 4 * MiB, MiB)
      // mke2fs gives each block group (8,192 blocks of 1 KiB) the same number of inodes, rounded
      // down to a multiple of 8: ask for a whole number per group that covers the need, so the
      // first mkfs is enough; the surplus (under 8 per group) goes to the reserve.
      const groups = Math.ceil(size / BLOCK / (8 * BLOCK))
      let inodes = roundUp(Math.ceil((this.maxFiles + LAYOUT_INODES) / groups), 8) * groups
      for (let attempt = 0; ; attempt++) {
        await truncate(image, size)
        await mkfs(image, inodes)
        await mkdir(mnt, { recursive: true, mode: 0o700 })
        await mountImage(image, mnt)
        const fs = await statfs(mnt)
        const freeInodes = Number(fs.ffree) - (LAYOUT_INODES - 11)
        const freeBytes = Number(fs.bavail) * Number(fs.bsize)
        if (freeInodes >= this.maxFiles && freeBytes >= capacity) break
        await umount(mnt, false)
        if (attempt >= 3) throw new Error(`cannot lay out an image of ${capacity} bytes and ${this.maxFiles} inodes`)
        // mkfs rounds the inodes to whole groups (down, too): ask for what was missing and more room.
        inodes += Math.max(0, this.maxFiles - freeInodes) + 64
        size = roundUp(size + Math.max(0, capacity - freeBytes) + MiB + 64 * INODE_SIZE, MiB)
      }
      await rm(path.join(mnt, 'lost+found'), { recursive: true, force: true })
      await mkdir(path.join(mnt, STAGING), { mode: 0o700 })
      await mkdir(path.join(mnt, TRASH), { mode: 0o700 })
      await mkdir(path.join(mnt, WS), { mode: 0o700 })
      if (owner !== undefined) await chown(path.join(mnt, WS), owner.uid, owner.gid)
      await this.#pin(mnt, capacity)
    } catch (err) {
      await umount(mnt, true).catch(() => {})
      await rm(image, { force: true })
      throw err
    }
  }

  /**
   * Holds back what the image has beyond the workspace's share: inodes (empty files) down to
   * WORKSPACE_MAX_FILES free, blocks (one preallocated file, which takes no room on the host: its
   * extents are unwritten) down to the capacity.
   */
  async #pin (mnt: string, capacity: number): Promise<void> {
    const reserve = path.join(mnt, RESERVE)
    await mkdir(reserve, { mode: 0o700 })
    const blocks = path.join(reserve, 'blocks')
    closeSync(openSync(blocks, 'w', 0o600))
    const fs = await statfs(mnt)
    const extraInodes = Number(fs.ffree) - this.maxFiles
    for (let i = 0; i < extraInodes; i++) closeSync(openSync(path.join(reserve, String(i)), 'w', 0o600))
    const after = await statfs(mnt)
    const extraBytes = Number(after.bavail) * Number(after.bsize) - capacity
    if (extraBytes >= BLOCK) {
      await execFileAsync('fallocate', ['-l', String(Math.floor(extraBytes / BLOCK) * BLOCK), blocks], { timeout: COMMAND_TIMEOUT_MS })
    }
  }

  async #mount (image: string, mnt: string): Promise<void> {
    await mkdir(mnt, { recursive: true, mode: 0o700 })
    if (await isMountPoint(mnt)) {
      // Left by a previous instance of the gateway: adopted when it is this image's file system.
      if (await mountedImage(mnt) === image) return
      await umount(mnt, true)
    }
    await mountImage(image, mnt)
  }

  async #bind (mnt: string, root: string): Promise<void> {
    if (await isMountPoint(root)) await umount(root, true)
    await execFileAsync('mount', ['--bind', '-o', 'nodev,nosuid', path.join(mnt, WS), root], { timeout: COMMAND_TIMEOUT_MS })
  }

  /**
   * Mounts every existing image at start-up (before any tool call), adopting the mounts of a
   * previous instance. An image whose workspace directory is gone is removed.
   */
  async mountAll (): Promise<number> {
    const base = path.join(this.#stateDir, 'images')
    let n = 0
    for (const tenant of await readdir(base).catch(() => [] as string[])) {
      for (const file of await readdir(path.join(base, tenant)).catch(() => [] as string[])) {
        if (!file.endsWith('.img')) continue
        const image = path.join(base, tenant, file)
        const workspaceId = file.slice(0, -4)
        if (workspaceId.startsWith(NEW_PREFIX)) {
          // A replace upload interrupted by a crash (no workspace id starts with a dot).
          await umount(this.#mnt(tenant, workspaceId), true).catch(() => {})
          await rmdir(this.#mnt(tenant, workspaceId)).catch(() => {})
          await rm(image, { force: true })
          continue
        }
        const root = path.join(this.#workspacesDir, tenant, workspaceId)
        try {
          await mkdir(root, { recursive: false, mode: 0o700 }).catch((err: unknown) => { if (errnoOf(err) !== 'EEXIST') throw err })
          await this.ensure(tenant, workspaceId, root, undefined)
          n++
        } catch (err) {
          this.#logger?.warn({ err, tenant, workspaceId }, 'workspace image could not be mounted')
        }
      }
    }
    return n
  }

  /**
   * Unmounts and removes the workspace's image, and its (now empty) directory: in one step, so a
   * first use waiting meanwhile (ensure) finds the directory gone, and makes the workspace anew,
   * instead of mounting a new image the removal's rmdir would then meet.
   */
  async remove (tenant: string, workspaceId: string, root: string): Promise<void> {
    await this.#busy.run(root, async () => {
      const vol = this.#mounted.get(root) ?? { image: this.#image(tenant, workspaceId), mnt: this.#mnt(tenant, workspaceId) }
      this.#mounted.delete(root)
      this.#legacy.delete(root)
      await umount(root, true).catch(() => {})
      await umount(vol.mnt, true).catch(() => {})
      await rmdir(vol.mnt).catch(() => {})
      await rm(vol.image, { force: true })
      await rmdir(root).catch((err: unknown) => { if (errnoOf(err) !== 'ENOENT') throw err })
    })
  }

  /** Forgets a legacy workspace (it was deleted or replaced): its next use makes an image. */
  forget (root: string): void {
    this.#legacy.delete(root)
  }

  /**
   * A fresh image for a replace upload, mounted at a private place: `dir` (its future workspace
   * root, empty) is filled by the caller, then `commit` swaps it in for the workspace's current
   * image (the old one is unmounted lazily: a process still inside keeps the old tree until it
   * ends, writing nowhere else), or `discard` drops it.
   */
  async prepare (tenant: string, workspaceId: string, owner: { uid: number, gid: number } | undefined): Promise<PreparedVolume> {
    const tag = `${NEW_PREFIX}${randomBytes(6).toString('hex')}-${workspaceId}`
    const image = this.#image(tenant, tag)
    const mnt = this.#mnt(tenant, tag)
    // Serialised (by its own mount point) so that close() waits for it and unmounts it.
    await this.#busy.run(mnt, async () => {
      this.#assertOpen()
      await this.#create(image, mnt, owner)
      this.#prepared.add(mnt)
    })
    let done = false
    return {
      dir: path.join(mnt, WS),
      commit: async (root: string) => {
        await this.#busy.run(root, async () => {
          this.#assertOpen()
          done = true
          this.#prepared.delete(mnt)
          const canonical = this.#image(tenant, workspaceId)
          const canonicalMnt = this.#mnt(tenant, workspaceId)
          await umount(mnt, false).catch(async () => await umount(mnt, true))
          await rmdir(mnt).catch(() => {})
          await umount(root, true).catch(() => {})
          await umount(canonicalMnt, true).catch(() => {})
          this.#mounted.delete(root)
          this.#legacy.delete(root)
          await rename(image, canonical)
          await this.#mount(canonical, canonicalMnt)
          await this.#bind(canonicalMnt, root)
          this.#mounted.set(root, { image: canonical, mnt: canonicalMnt })
        })
      },
      discard: async () => {
        if (done) return
        done = true
        this.#prepared.delete(mnt)
        await umount(mnt, true).catch(() => {})
        await rmdir(mnt).catch(() => {})
        await rm(image, { force: true })
      }
    }
  }

  /**
   * A private directory on the workspace's own file system (its image's root, out of the
   * tenant's reach) for a merge upload's staging or trash: what is extracted there counts against
   * the workspace's quota and moves into it by rename. Undefined for a workspace without image.
   */
  async privateDir (root: string, kind: 'staging' | 'trash'): Promise<string | undefined> {
    const vol = this.#mounted.get(root)
    if (vol === undefined) return undefined
    const dir = path.join(vol.mnt, kind === 'staging' ? STAGING : TRASH, randomBytes(12).toString('hex'))
    if (kind === 'staging') await mkdir(dir, { mode: 0o700 })
    return dir
  }

  /**
   * The workspace's tree as its image's own mount shows it (`mnt/<tenant>/<id>/ws`), or undefined
   * without an image. rename(2) never crosses mount points, even two of one file system (EXDEV):
   * whatever moves between the tree and the image's private directories (privateDir) must name
   * the tree by this path, not by the bind mount at the workspace's root. The path is root's
   * alone (below the state directory); the tenant cannot swap any part of it.
   */
  treeDir (root: string): string | undefined {
    const vol = this.#mounted.get(root)
    return vol === undefined ? undefined : path.join(vol.mnt, WS)
  }

  /** Whether the workspace's file system is full (no block or no inode left for it). */
  async full (root: string): Promise<boolean> {
    if (!this.#mounted.has(root)) return false
    try {
      const fs = await statfs(root)
      return Number(fs.ffree) === 0 || Number(fs.bavail) * Number(fs.bsize) < 64 * 1024
    } catch {
      return false
    }
  }

  /**
   * Unmounts every image this instance mounted (lazily), within a bounded time; no new mount is
   * made afterwards. Mounts in progress (a workspace's first use, a replace upload's new image)
   * end first and are unmounted with the others.
   */
  async close (): Promise<void> {
    this.#closed = true
    let timer: NodeJS.Timeout | undefined
    const budget = new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_BUDGET_MS) })
    await Promise.race([this.#busy.settled(), budget])
    const all = [...this.#mounted.entries()]
    this.#mounted.clear()
    const prepared = [...this.#prepared]
    this.#prepared.clear()
    const work = Promise.all([
      ...all.map(async ([root, vol]) => {
        await umount(root, true).catch(() => {})
        await umount(vol.mnt, true).catch(() => {})
      }),
      ...prepared.map(async (mnt) => { await umount(mnt, true).catch(() => {}) })
    ])
    await Promise.race([work, budget])
    clearTimeout(timer)
  }
}

export interface PreparedVolume {
  dir: string
  commit: (root: string) => Promise<void>
  discard: () => Promise<void>
}

function roundUp (n: number, to: number): number {
  return Math.ceil(n / to) * to
}

function firstLine (err: unknown): string {
  const e = err as { stderr?: string, message?: string }
  return String((e.stderr !== undefined && e.stderr !== '' ? e.stderr : e.message) ?? err).trim().split('\n')[0] ?? ''
}

/**
 * ext4 without reserved blocks, without the online-resize reservation, with a 1 MiB journal
 * (crash consistency of the metadata); inode tables are not zeroed (lazy init, and the mount says
 * noinit_itable), so the sparse image takes on the host only what is written.
 */
async function mkfs (image: string, inodes: number): Promise<void> {
  await execFileAsync(mkfsPath ?? 'mkfs.ext4', [
    '-q', '-F', '-b', String(BLOCK), '-I', String(INODE_SIZE), '-N', String(inodes), '-m', '0',
    '-O', '^resize_inode', '-J', 'size=1', '-E', 'lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0', image
  ], { timeout: COMMAND_TIMEOUT_MS })
}

async function mountImage (image: string, mnt: string): Promise<void> {
  await execFileAsync('mount', ['-t', 'ext4', '-o', 'loop,nodev,nosuid,noinit_itable', image, mnt], { timeout: COMMAND_TIMEOUT_MS })
}

/** Unmounts `target`, every mount stacked there (a bound number). */
async function umount (target: string, lazy: boolean): Promise<void> {
  for (let i = 0; i < 8 && await isMountPoint(target); i++) {
    await execFileAsync('umount', lazy ? ['-l', target] : [target], { timeout: COMMAND_TIMEOUT_MS })
  }
}

/** Mount points of this mount namespace, from /proc/self/mountinfo (octal escapes decoded). */
async function mountPoints (): Promise<Array<{ target: string, source: string }>> {
  const text = await readFile('/proc/self/mountinfo', 'utf8')
  const out: Array<{ target: string, source: string }> = []
  for (const line of text.split('\n')) {
    const f = line.split(' ')
    const dash = f.indexOf('-')
    if (f.length < 5 || dash < 0) continue
    out.push({ target: unescapeMount(f[4] as string), source: unescapeMount(f[dash + 2] ?? '') })
  }
  return out
}

function unescapeMount (s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_m, o: string) => String.fromCharCode(parseInt(o, 8)))
}

async function isMountPoint (target: string): Promise<boolean> {
  return (await mountPoints()).some((m) => m.target === target)
}

/** The image file behind a loop mount at `mnt` (via /sys/block/loopN/loop/backing_file), or undefined. */
async function mountedImage (mnt: string): Promise<string | undefined> {
  const m = (await mountPoints()).findLast((p) => p.target === mnt)
  const dev = m !== undefined ? /^\/dev\/(loop\d+)$/.exec(m.source) : null
  if (dev === null) return undefined
  try {
    return (await readFile(`/sys/block/${dev[1] as string}/loop/backing_file`, 'utf8')).trim()
  } catch {
    return undefined
  }
}
