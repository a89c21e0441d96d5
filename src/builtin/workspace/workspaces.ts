/**
 * Turns a request's workspace context (docs/ARCHITECTURE.md#workspaces) into a resolved Workspace: the tenant's
 * directory under WORKSPACES_DIR (or an admin's root under WORKSPACE_BASES), the named read roots
 * the server exposes, and limits that can only be lowered.
 */
import { execFile } from 'node:child_process'
import { chmodSync, lstatSync, mkdirSync, realpathSync, statSync } from 'node:fs'
import type { Stats } from 'node:fs'
import { lchown, lstat, mkdir, readdir, readFile, realpath, rm, stat, utimes, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import type { Caller, WorkspaceLimits, WorkspaceRequest } from '../../routing/types.js'
import { ToolError } from '../types.js'
import type { ReadRoot, Workspace } from '../types.js'
import { errnoOf } from './fd.js'
import { isInside } from './paths.js'
import type { WorkspaceVolumes } from './volumes.js'
import { KeyedMutex } from '../../cluster/index.js'

/** The key of a workspace's write lock: mutating tool calls, uploads, restores and deletes take it. */
export function workspaceWriteKey (ws: Pick<Workspace, 'tenant' | 'root'>): string {
  return `${ws.tenant}\u0000${ws.root}`
}

export interface WorkspaceManagerOptions {
  /** Root of tenant workspaces (WORKSPACES_DIR); created when missing. */
  workspacesDir: string
  /** Where an admin `workspaceRoot` may point (WORKSPACE_BASES). */
  workspaceBases: string[]
  /** Named read-only roots (READ_ROOTS): name -> host path. */
  readRoots: Record<string, string>
  /** Server maxima; requests may only lower them. */
  maxLimits: WorkspaceLimits
  /**
   * Host uid/gid sandboxed commands run as; created directories are chowned to it. With
   * `ownerFor`, only the start-up checks use it (any non-root uid must be able to traverse).
   */
  owner?: { uid: number, gid: number }
  /**
   * The tenant's own host uid/gid (one per tenant, from the registry store: docs/ARCHITECTURE.md#isolation). Its
   * workspaces are owned by it; ones owned by another uid are handed over on first use.
   */
  ownerFor?: (tenant: string) => Promise<{ uid: number, gid: number }>
  /**
   * Where to put the workspaces instead when `workspacesDir` is the default and the sandbox uid
   * cannot reach it (a clone under /root, any mode-700 parent): tried in order, the first one the
   * sandbox can traverse is used (see `usedFallback`). An explicit WORKSPACES_DIR gets none, so
   * an unusable one still stops start-up.
   */
  fallbackDirs?: string[]
  /** TENANT_MAX_WORKSPACES: a tool call or upload naming one more workspace is refused (unlimited when unset). */
  maxWorkspacesPerTenant?: number
}

/** How often a workspace's last use is written to disk at most (memory has the exact time). */
const TOUCH_EVERY_MS = 60_000
/** The gateway's private state below WORKSPACES_DIR; tenant ids never start with '.'. */
const STATE_DIR = '.tg'

const execFileAsync = promisify(execFile)

const WORKSPACE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/
const TENANT_RE = /^(?:[A-Za-z0-9][A-Za-z0-9-]{0,63}|_)$/
const LIMIT_KEYS = ['readMaxChars', 'commandTimeoutMs', 'bashLogChars', 'maxProcessOutputChars', 'outputMaxChars'] as const

export class WorkspaceManager {
  readonly #workspacesDir: string
  readonly #bases: readonly string[]
  readonly #readRoots: ReadonlyMap<string, string>
  readonly #maxLimits: WorkspaceLimits
  readonly #owner: { uid: number, gid: number } | undefined
  readonly #ownerFor: ((tenant: string) => Promise<{ uid: number, gid: number }>) | undefined
  /** Hand-overs in progress, by directory: concurrent calls wait for the same one. */
  readonly #migrations = new Map<string, Promise<void>>()
  /** Last use of each workspace (tenant NUL id -> ms), and when it was last written to disk. */
  readonly #used = new Map<string, { at: number, written: number }>()
  /** The default directory the sandbox could not reach, when a fallback is used instead. */
  readonly usedFallback: { from: string } | undefined
  readonly #maxWorkspaces: number
  /** New workspaces of a tenant are made one at a time (the count and the bytes are checked before each). */
  readonly #creating = new KeyedMutex()
  /** Loop-mounted images (WORKSPACE_QUOTA_MODE loop): each new workspace becomes one before any use. */
  #volumes: WorkspaceVolumes | undefined
  /** Refuses a new workspace when the tenant is at its bytes (TENANT_QUOTA_BYTES); set by the lifecycle. */
  #admit: ((tenant: string) => Promise<void>) | undefined

  constructor (opts: WorkspaceManagerOptions) {
    // Configuration is validated once, at start-up, so a typo fails fast instead of per call.
    // The sandbox runs as another uid and must traverse every directory down to the workspace
    // it binds; execute-only (no read) keeps the tenant list private.
    let dir = opts.workspacesDir
    if (opts.owner && opts.fallbackDirs !== undefined && opts.fallbackDirs.length > 0 && !reachable(path.resolve(dir), opts.owner.uid)) {
      const uid = opts.owner.uid
      const usable = opts.fallbackDirs.find((d) => {
        try {
          mkdirSync(d, { recursive: true, mode: 0o711 })
          return reachable(realpathSync(d), uid)
        } catch {
          return false
        }
      })
      if (usable !== undefined) {
        this.usedFallback = { from: path.resolve(dir) }
        dir = usable
      }
    }
    mkdirSync(dir, { recursive: true, mode: opts.owner ? 0o711 : 0o700 })
    this.#workspacesDir = realpathSync(dir)
    if (opts.owner) {
      const mode = statSync(this.#workspacesDir).mode & 0o777
      if ((mode & 0o011) !== 0o011) chmodSync(this.#workspacesDir, mode | 0o011)
      assertTraversable(this.#workspacesDir, opts.owner.uid)
    }
    // Gateway-private state (staging of uploads, checkpoints, last-use marks): root's alone.
    mkdirSync(path.join(this.#workspacesDir, STATE_DIR), { recursive: true, mode: 0o700 })
    chmodSync(path.join(this.#workspacesDir, STATE_DIR), 0o700)
    this.#bases = opts.workspaceBases.map((b) => realDir(b, `WORKSPACE_BASES entry ${b}`))
    const roots = new Map<string, string>()
    for (const [name, hostPath] of Object.entries(opts.readRoots)) {
      if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/.test(name)) throw new Error(`READ_ROOTS: invalid root name "${name}"`)
      roots.set(name, realDir(hostPath, `READ_ROOTS entry ${name}`))
    }
    this.#readRoots = roots
    for (const key of LIMIT_KEYS) {
      const v = opts.maxLimits[key]
      if (!Number.isFinite(v) || v <= 0) throw new Error(`maxLimits.${key} must be a positive number`)
    }
    this.#maxLimits = { ...opts.maxLimits }
    this.#owner = opts.owner
    this.#ownerFor = opts.ownerFor
    this.#maxWorkspaces = opts.maxWorkspacesPerTenant ?? Infinity
  }

  /** Makes every tenant workspace a loop-mounted image (docs/ARCHITECTURE.md#workspace-quota). */
  useVolumes (volumes: WorkspaceVolumes): void {
    this.#volumes = volumes
  }

  /** The images, when the file system enforces the quota. */
  get volumes (): WorkspaceVolumes | undefined {
    return this.#volumes
  }

  /** A check run before a tenant's new workspace is made (it throws to refuse). */
  setAdmission (admit: (tenant: string) => Promise<void>): void {
    this.#admit = admit
  }

  /** Names of the configured read roots (never their host paths). */
  get readRootNames (): string[] {
    return [...this.#readRoots.keys()]
  }

  /** WORKSPACES_DIR as used (real path; a fallback when the default was out of the sandbox's reach). */
  get dir (): string {
    return this.#workspacesDir
  }

  /** The gateway's private directory below WORKSPACES_DIR (mode 0700, never inside a workspace). */
  get stateDir (): string {
    return path.join(this.#workspacesDir, STATE_DIR)
  }

  /** A tenant's existing workspace, or undefined; nothing is created or marked as used. */
  async find (tenant: string, workspaceId: string): Promise<Workspace | undefined> {
    checkIds(tenant, workspaceId)
    const root = path.join(this.#workspacesDir, tenant, workspaceId)
    try {
      const st = await lstat(root)
      if (!st.isDirectory()) return undefined
    } catch {
      return undefined
    }
    const ws: Workspace = { tenant, workspaceId, root, readRoots: [], limits: { ...this.#maxLimits } }
    const owner = await this.#ownerOf(tenant)
    if (owner !== undefined) ws.owner = { ...owner }
    return ws
  }

  /** A tenant's workspace, created when missing (like a tool call's first use); `created` says which. */
  async open (tenant: string, workspaceId: string): Promise<{ ws: Workspace, created: boolean }> {
    checkIds(tenant, workspaceId)
    const existed = await this.find(tenant, workspaceId) !== undefined
    const ws = await this.resolve({ workspaceId }, { userId: tenant === '_' ? undefined : tenant, isAdmin: false })
    return { ws, created: !existed }
  }

  /** The ids of a tenant's workspaces (directories below its tenant directory), sorted. */
  async workspaceIds (tenant: string): Promise<string[]> {
    checkIds(tenant, 'default')
    try {
      const entries = await readdir(path.join(this.#workspacesDir, tenant), { withFileTypes: true })
      return entries.filter((e) => e.isDirectory() && WORKSPACE_ID_RE.test(e.name)).map((e) => e.name).sort()
    } catch {
      return []
    }
  }

  /** Every tenant that has a directory (the idle sweeper's walk). */
  async tenants (): Promise<string[]> {
    const entries = await readdir(this.#workspacesDir, { withFileTypes: true })
    return entries.filter((e) => e.isDirectory() && TENANT_RE.test(e.name)).map((e) => e.name).sort()
  }

  /**
   * When a tool call last resolved the workspace (ms), and when it was made. Kept in memory and in
   * a mark file under the state directory (its mtime, written at most once a minute), so it
   * survives a restart; a workspace without a mark (made by an older version) counts from its
   * directory's own times.
   */
  async usage (ws: Workspace): Promise<{ lastUsedAt: number, createdAt: number }> {
    const mark = this.#markPath(ws.tenant, ws.workspaceId)
    let disk: { mtimeMs: number, created: number } | undefined
    try {
      const st = await stat(mark)
      const created = Number((await readFile(mark, 'utf8')).trim())
      disk = { mtimeMs: st.mtimeMs, created: Number.isFinite(created) && created > 0 ? created : st.birthtimeMs }
    } catch {}
    let dirSt: Stats | undefined
    if (disk === undefined) dirSt = await stat(ws.root).catch(() => undefined)
    const mem = this.#used.get(`${ws.tenant}\u0000${ws.workspaceId}`)?.at ?? 0
    const lastUsedAt = Math.max(mem, disk?.mtimeMs ?? dirSt?.mtimeMs ?? 0)
    const born = disk?.created ?? (dirSt !== undefined && dirSt.birthtimeMs > 0 ? dirSt.birthtimeMs : dirSt?.mtimeMs ?? lastUsedAt)
    return { lastUsedAt: Math.round(lastUsedAt), createdAt: Math.round(born) }
  }

  /** The tenant's host uid/gid (its workspaces are owned by it), or undefined without a sandbox user. */
  async ownerFor (tenant: string): Promise<{ uid: number, gid: number } | undefined> {
    return await this.#ownerOf(tenant)
  }

  /** Drops the workspace's last-use record (it was deleted). */
  async forgetUse (tenant: string, workspaceId: string): Promise<void> {
    this.#used.delete(`${tenant}\u0000${workspaceId}`)
    await rm(this.#markPath(tenant, workspaceId), { force: true })
  }

  #markPath (tenant: string, workspaceId: string): string {
    return path.join(this.#workspacesDir, STATE_DIR, 'used', tenant, workspaceId)
  }

  /** Records a use: memory always, the mark file when its time is a minute old (or missing). */
  async #touch (tenant: string, workspaceId: string, created: boolean): Promise<void> {
    const key = `${tenant}\u0000${workspaceId}`
    const now = Date.now()
    const rec = this.#used.get(key)
    if (rec !== undefined) rec.at = now
    else this.#used.set(key, { at: now, written: 0 })
    const r = this.#used.get(key) as { at: number, written: number }
    if (!created && now - r.written < TOUCH_EVERY_MS) return
    r.written = now
    const mark = this.#markPath(tenant, workspaceId)
    try {
      const t = new Date(now)
      if (!created) {
        try {
          await utimes(mark, t, t)
          return
        } catch {}
      }
      await mkdir(path.dirname(mark), { recursive: true, mode: 0o700 })
      await writeFile(mark, `${now}\n`, { mode: 0o600 })
    } catch {
      // Last use is advisory: a failed mark never fails the call (memory still has it).
    }
  }

  async resolve (req: WorkspaceRequest, caller: Caller): Promise<Workspace> {
    const workspaceId = req.workspaceId ?? 'default'
    if (typeof workspaceId !== 'string' || !WORKSPACE_ID_RE.test(workspaceId) || workspaceId === '.' || workspaceId === '..') {
      throw new ToolError('workspaceId must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$', 'invalid-arguments')
    }
    const tenant = caller.userId ?? '_'
    // Validated upstream too; checked again because it becomes a directory name.
    if (!TENANT_RE.test(tenant)) throw new ToolError('Invalid tenant id', 'invalid-arguments')

    const readRoots = this.#pickReadRoots(req.readRoots)
    const limits = this.#limits(req.limits)
    const owner = await this.#ownerOf(tenant)
    let root: string
    if (req.workspaceRoot !== undefined) {
      root = await this.#adminRoot(req.workspaceRoot, caller)
    } else {
      const made = { created: false }
      root = await this.#tenantRoot(tenant, workspaceId, owner, made)
      await this.#touch(tenant, workspaceId, made.created)
    }

    const ws: Workspace = { tenant, workspaceId, root, readRoots, limits }
    if (owner !== undefined) ws.owner = { ...owner }
    return ws
  }

  async #ownerOf (tenant: string): Promise<{ uid: number, gid: number } | undefined> {
    if (this.#ownerFor === undefined) return this.#owner
    try {
      return await this.#ownerFor(tenant)
    } catch {
      // The store is unreachable or the range is full: never fall back to a shared uid.
      throw new ToolError('Cannot allocate the tenant\'s sandbox user (registry unavailable or SANDBOX_UID_RANGE exhausted)', 'sandbox')
    }
  }

  #pickReadRoots (names: unknown): ReadRoot[] {
    if (names === undefined) return []
    if (!Array.isArray(names)) throw new ToolError('readRoots must be an array of root names', 'invalid-arguments')
    const out: ReadRoot[] = []
    for (const name of names) {
      if (typeof name !== 'string') throw new ToolError('readRoots must be an array of root names', 'invalid-arguments')
      const p = this.#readRoots.get(name)
      if (p === undefined) {
        const shown = name.length > 64 ? `${name.slice(0, 64)}...` : name
        throw new ToolError(`Read root "${shown}" is not configured on this server`, 'forbidden')
      }
      if (!out.some((r) => r.name === name)) out.push({ name, path: p })
    }
    return out
  }

  #limits (requested: Partial<WorkspaceLimits> | undefined): WorkspaceLimits {
    const limits = { ...this.#maxLimits }
    if (requested === undefined || requested === null) return limits
    if (typeof requested !== 'object') throw new ToolError('limits must be an object', 'invalid-arguments')
    for (const key of LIMIT_KEYS) {
      const v: unknown = requested[key]
      if (v === undefined) continue
      if (typeof v !== 'number' || !Number.isFinite(v) || Math.floor(v) <= 0) {
        throw new ToolError(`limits.${key} must be a positive integer`, 'invalid-arguments')
      }
      limits[key] = Math.min(Math.floor(v), this.#maxLimits[key])
    }
    return limits
  }

  async #adminRoot (requested: unknown, caller: Caller): Promise<string> {
    if (!caller.isAdmin) throw new ToolError('workspaceRoot is accepted only for admin callers', 'forbidden')
    if (typeof requested !== 'string' || !path.isAbsolute(requested) || requested.includes('\0') || requested.length > 4096) {
      throw new ToolError('workspaceRoot must be an absolute path', 'invalid-arguments')
    }
    const denied = new ToolError('workspaceRoot must be an existing directory under a configured WORKSPACE_BASES entry', 'forbidden')
    let real: string
    try {
      real = await realpath(requested)
      if (!(await stat(real)).isDirectory()) throw denied
    } catch {
      throw denied
    }
    if (!this.#bases.some((b) => isInside(b, real))) throw denied
    return real
  }

  async #tenantRoot (
    tenant: string, workspaceId: string, owner: { uid: number, gid: number } | undefined, made: { created: boolean }, attempt = 1
  ): Promise<string> {
    const tenantDir = path.join(this.#workspacesDir, tenant)
    const wsDir = path.join(tenantDir, workspaceId)
    await this.#ensureDir(tenantDir, owner, false)
    const seen = lookAt(wsDir, () => undefined)
    const missing = seen === undefined
    let real = ''
    const make = async (): Promise<void> => {
      for (let attempt = 1; ; attempt++) {
        try {
          // The lstat above serves the first look at a workspace in use (realpath below still checks it is no link).
          made.created = await this.#ensureDir(wsDir, owner, true, attempt === 1 && !missing ? seen : undefined)
          real = realpathSync.native(wsDir)
          return
        } catch (err) {
          // An upload swaps the directory with two renames (old out, new in); met in between, it
          // is missing for an instant: look again.
          if (errnoOf(err) !== 'ENOENT' || attempt >= 5) throw err
        }
      }
    }
    if (missing) await this.#creating.run(tenant, async () => await this.#admitNew(tenant, wsDir, make))
    else await make()
    // A symlink planted at either level would move the tenant's root somewhere else.
    if (real !== wsDir) throw new ToolError('Workspace directory is not a plain directory', 'forbidden')
    // Mounted before anything uses it, so the tools and the sandbox only ever see the image.
    if (this.#volumes !== undefined) {
      try {
        await this.#volumes.ensure(tenant, workspaceId, real, owner)
      } catch (err) {
        // Deleted meanwhile (a DELETE, the idle sweeper: ensure waited for the removal, which took
        // the directory): this use makes the workspace anew, as it would have a moment later.
        if (errnoOf(err) === 'ENOENT' && attempt < 5) return await this.#tenantRoot(tenant, workspaceId, owner, made, attempt + 1)
        if (made.created) await rm(wsDir, { recursive: false, force: true }).catch(() => {})
        throw new ToolError(`Cannot mount the workspace's quota image: ${(err as Error).message.split('\n')[0] ?? ''}`)
      }
    }
    return real
  }

  /** Makes a new workspace when the tenant's count (TENANT_MAX_WORKSPACES) and bytes allow it. */
  async #admitNew (tenant: string, wsDir: string, make: () => Promise<void>): Promise<void> {
    // Made meanwhile by a concurrent call: nothing new.
    if (await lstat(wsDir).then(() => true, () => false)) return await make()
    await this.admitNew(tenant)
    await make()
  }

  /**
   * Refuses a tenant's new workspace while its count (TENANT_MAX_WORKSPACES) or bytes are at their
   * limit. Also asked before an upload to a new workspace does any costly work (an image, the
   * extraction); the creation itself asks again, one at a time per tenant.
   */
  async admitNew (tenant: string): Promise<void> {
    const count = (await this.workspaceIds(tenant)).length
    if (count >= this.#maxWorkspaces) {
      throw new ToolError(`Tenant workspace limit reached (GW_TENANT_QUOTA_EXCEEDED): ${count} workspaces, TENANT_MAX_WORKSPACES is ${this.#maxWorkspaces}; delete one to make room`, 'tenant-quota')
    }
    await this.#admit?.(tenant)
  }

  /**
   * Hands an existing directory to the tenant's uid (it was made for another uid: the shared
   * sandbox uid of older versions, or a range that changed). `recursive`: its whole tree, with
   * chown -R -P -h, which never follows a symlink (the tree is the tenant's: it may hold links
   * to anywhere). The root is changed last (post-order), so an interrupted hand-over is redone.
   */
  async #handOver (dir: string, owner: { uid: number, gid: number }, recursive: boolean): Promise<void> {
    let pending = this.#migrations.get(dir)
    if (pending === undefined) {
      pending = (async () => {
        if (!recursive) {
          await lchown(dir, owner.uid, owner.gid)
          return
        }
        await execFileAsync('chown', ['-R', '-P', '-h', '--', `${owner.uid}:${owner.gid}`, dir], { timeout: 300_000, maxBuffer: 1024 * 1024 })
      })().finally(() => this.#migrations.delete(dir))
      this.#migrations.set(dir, pending)
    }
    try {
      await pending
    } catch {
      throw new ToolError('Cannot hand the workspace over to the tenant\'s sandbox user')
    }
  }

  /**
   * Makes `dir` when it is missing (true when it made it) and checks it is a plain directory, given to
   * the tenant's uid (handed over when it is another's). Looked at first, made only when missing: on every call of a workspace in use, a
   * `mkdir` failing with EEXIST cost an error object and one more file-system round trip. `seen`:
   * its lstat, when the caller has just taken it.
   */
  async #ensureDir (dir: string, owner: { uid: number, gid: number } | undefined, recursive: boolean, seen?: Stats): Promise<boolean> {
    let created = false
    let st = seen ?? lookAt(dir, () => { throw new ToolError('Cannot create the workspace directory') })
    if (st === undefined) {
      try {
        await mkdir(dir, { mode: 0o700 })
        created = true
      } catch (err) {
        if (errnoOf(err) !== 'EEXIST') throw new ToolError('Cannot create the workspace directory')
      }
      st = await lstat(dir)
    }
    if (!st.isDirectory()) throw new ToolError('Workspace directory is not a plain directory', 'forbidden')
    if (owner === undefined) return created
    if (created) await lchown(dir, owner.uid, owner.gid)
    else if (this.#ownerFor !== undefined && (st.uid !== owner.uid || st.gid !== owner.gid)) await this.#handOver(dir, owner, recursive)
    return created
  }
}

/**
 * The lstat of a directory the gateway made (a tenant's, a workspace's), undefined when it is missing;
 * `failed` answers any other error (it throws by default). Synchronous: the metadata of a local
 * directory the tenant cannot reach (it sees only the workspace's inside), a few microseconds, where
 * the promise form cost ~25 us of threadpool hand-off and wake-up on every built-in call (three of
 * them per resolve).
 */
function lookAt (dir: string, failed: (err: unknown) => Stats | undefined = (err) => { throw err }): Stats | undefined {
  try {
    return lstatSync(dir, { throwIfNoEntry: false })
  } catch (err) {
    return failed(err)
  }
}

function realDir (p: string, what: string): string {
  let real: string
  try {
    real = realpathSync(p)
  } catch {
    throw new Error(`${what}: path does not exist`)
  }
  if (!statSync(real).isDirectory()) throw new Error(`${what}: not a directory`)
  return real
}

function checkIds (tenant: string, workspaceId: string): void {
  if (!TENANT_RE.test(tenant) || !WORKSPACE_ID_RE.test(workspaceId) || workspaceId === '.' || workspaceId === '..') {
    throw new ToolError('Invalid tenant or workspace id', 'invalid-arguments')
  }
}

/**
 * Whether `uid` can traverse every existing directory above `dir` (or above the part of it that
 * does not exist yet): the check assertTraversable makes, without throwing.
 */
function reachable (dir: string, uid: number): boolean {
  try {
    for (let current = path.dirname(dir); ; current = path.dirname(current)) {
      let st
      try {
        st = statSync(current)
      } catch {
        if (current === path.dirname(current)) return true
        continue
      }
      if ((st.mode & 0o001) === 0 && st.uid !== uid) return false
      if (current === path.dirname(current)) return true
    }
  } catch {
    return false
  }
}

/** Start-up check: a directory above WORKSPACES_DIR the sandbox uid cannot enter breaks every bash call. */
function assertTraversable (dir: string, uid: number): void {
  for (let current = path.dirname(dir); ; current = path.dirname(current)) {
    const st = statSync(current)
    if ((st.mode & 0o001) === 0 && st.uid !== uid) {
      throw new Error(`WORKSPACES_DIR: the sandbox uid ${uid} cannot enter ${current} (mode ${(st.mode & 0o777).toString(8)}); give it o+x or move WORKSPACES_DIR`)
    }
    if (current === path.dirname(current)) return
  }
}
