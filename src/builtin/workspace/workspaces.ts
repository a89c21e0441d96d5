/**
 * Turns a request's workspace context (docs/ARCHITECTURE.md#workspaces) into a resolved Workspace: the tenant's
 * directory under WORKSPACES_DIR (or an admin's root under WORKSPACE_BASES), the named read roots
 * the server exposes, and limits that can only be lowered.
 */
import { execFile } from 'node:child_process'
import { chmodSync, mkdirSync, realpathSync, statSync } from 'node:fs'
import { lchown, lstat, mkdir, realpath, stat } from 'node:fs/promises'
import path from 'node:path'
import { promisify } from 'node:util'
import type { Caller, WorkspaceLimits, WorkspaceRequest } from '../../tools/types.js'
import { ToolError } from '../types.js'
import type { ReadRoot, Workspace } from '../types.js'
import { isInside } from './paths.js'

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
}

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

  constructor (opts: WorkspaceManagerOptions) {
    // Configuration is validated once, at start-up, so a typo fails fast instead of per call.
    // The sandbox runs as another uid and must traverse every directory down to the workspace
    // it binds; execute-only (no read) keeps the tenant list private.
    mkdirSync(opts.workspacesDir, { recursive: true, mode: opts.owner ? 0o711 : 0o700 })
    this.#workspacesDir = realpathSync(opts.workspacesDir)
    if (opts.owner) {
      const mode = statSync(this.#workspacesDir).mode & 0o777
      if ((mode & 0o011) !== 0o011) chmodSync(this.#workspacesDir, mode | 0o011)
      assertTraversable(this.#workspacesDir, opts.owner.uid)
    }
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
  }

  /** Names of the configured read roots (never their host paths). */
  get readRootNames (): string[] {
    return [...this.#readRoots.keys()]
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
    const root = req.workspaceRoot !== undefined
      ? await this.#adminRoot(req.workspaceRoot, caller)
      : await this.#tenantRoot(tenant, workspaceId, owner)

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

  async #tenantRoot (tenant: string, workspaceId: string, owner: { uid: number, gid: number } | undefined): Promise<string> {
    const tenantDir = path.join(this.#workspacesDir, tenant)
    const wsDir = path.join(tenantDir, workspaceId)
    await this.#ensureDir(tenantDir, owner, false)
    await this.#ensureDir(wsDir, owner, true)
    const real = await realpath(wsDir)
    // A symlink planted at either level would move the tenant's root somewhere else.
    if (real !== wsDir) throw new ToolError('Workspace directory is not a plain directory', 'forbidden')
    return real
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

  async #ensureDir (dir: string, owner: { uid: number, gid: number } | undefined, recursive: boolean): Promise<void> {
    let created = false
    try {
      await mkdir(dir, { mode: 0o700 })
      created = true
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw new ToolError('Cannot create the workspace directory')
    }
    const st = await lstat(dir)
    if (!st.isDirectory()) throw new ToolError('Workspace directory is not a plain directory', 'forbidden')
    if (owner === undefined) return
    if (created) await lchown(dir, owner.uid, owner.gid)
    else if (this.#ownerFor !== undefined && (st.uid !== owner.uid || st.gid !== owner.gid)) await this.#handOver(dir, owner, recursive)
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
