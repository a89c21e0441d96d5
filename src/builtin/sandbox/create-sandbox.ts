import { constants } from 'node:fs'
import { access, chmod, chown, stat } from 'node:fs/promises'
import type { Logger } from '../../logger.js'
import type { GwCode } from '../../errors.js'
import { ToolError, type Workspace } from '../types.js'
import { defaultTenantCpus, setUpCgroups, type Cgroups } from './cgroups.js'
import { claimHost, type HostClaim } from './host-claim.js'
import { runProbe } from './probe.js'
import { buildSeccompFilter, SECCOMP_UNSUPPORTED_WARNING } from './seccomp.js'
import { runToCompletion, sandboxFailure } from './run-to-completion.js'
import { spawnSandboxed, type SpawnConfig } from './spawn.js'
import { detectHostLayout, writeSandboxEtc } from './system-files.js'
import type {
  EffectiveSandboxMode, ExecRequest, ExecResult, Sandbox, SandboxedProcess, SandboxIsolation, SandboxLimits,
  SandboxOptions, SandboxProbe, SandboxStats, SpawnRequest
} from './types.js'

const DEFAULT_SANDBOX_LIMITS: Readonly<SandboxLimits> = {
  cpuSeconds: 600,
  fileSizeBytes: 1024 * 1024 * 1024,
  maxProcesses: 256,
  openFiles: 4096,
  memoryBytes: 4 * 1024 * 1024 * 1024,
  tmpSizeBytes: 256 * 1024 * 1024
}

/** Used by nobody else on a typical host, and never root. */
const DEFAULT_SANDBOX_UID = 65534

export const DEFAULT_UID_RANGE = { first: 200000, last: 299999 } as const
const DEFAULT_TENANT_LIMITS = { memoryBytes: 2 * 1024 * 1024 * 1024, pids: 512, cpus: defaultTenantCpus() } as const

/** How long start-up may spend removing the command cgroups gone gateways left (each group's kill is bounded too). */
const STARTUP_SWEEP_BUDGET_MS = 10_000

const SEARCH_DIRS = ['/usr/bin', '/bin', '/usr/sbin', '/sbin', '/usr/local/bin']

export const NONE_WARNING =
  'SANDBOX=none: bash commands run UNSANDBOXED on the gateway host with the gateway\'s privileges ' +
  '(only the environment is cleared). Use for local development only.'

/** Thrown by createSandbox when SANDBOX=bwrap and bwrap does not work: start-up must stop. */
export class SandboxUnavailableError extends Error {
  readonly code = 'GW_SANDBOX_UNAVAILABLE' satisfies GwCode
  constructor (reason: string) {
    super(`SANDBOX=bwrap but the sandbox does not work on this host: ${reason}`)
    this.name = 'SandboxUnavailableError'
  }
}

async function findBinary (name: string, explicit: string | undefined): Promise<string> {
  if (explicit !== undefined) return explicit
  for (const dir of SEARCH_DIRS) {
    const p = `${dir}/${name}`
    try {
      await access(p, constants.X_OK)
      return p
    } catch {}
  }
  // A path that fails to spawn with ENOENT, which the probe turns into an install hint.
  return `/usr/bin/${name}`
}

function checkLimits (l: SandboxLimits): void {
  for (const [k, v] of Object.entries(l)) {
    if (!Number.isSafeInteger(v) || v < 0) throw new TypeError(`sandbox limit ${k} must be a non-negative integer`)
  }
  if (l.maxProcesses < 8) throw new TypeError('sandbox limit maxProcesses must be at least 8 (bwrap and sh need some)')
}

class SandboxImpl implements Sandbox {
  readonly mode: EffectiveSandboxMode
  readonly probe: SandboxProbe
  readonly warning: string | undefined
  readonly owner: { uid: number, gid: number } | undefined
  readonly limits: Readonly<SandboxLimits>
  readonly isolation: Readonly<SandboxIsolation>
  readonly uidRange: Readonly<{ first: number, last: number }> | undefined
  readonly #cfg: SpawnConfig
  readonly #canChown: boolean
  readonly #removeEtc: () => Promise<void>
  readonly #live = new Set<SandboxedProcess>()
  /** Processes close() killed: their execs report the shutdown, not an exit code. */
  readonly #cutOff = new WeakSet<SandboxedProcess>()
  readonly #logger: Logger | undefined
  readonly #claim: HostClaim | undefined
  #execs = 0
  #timeouts = 0
  #closed = false

  constructor (init: {
    cfg: SpawnConfig
    probe: SandboxProbe
    warning: string | undefined
    owner: { uid: number, gid: number } | undefined
    canChown: boolean
    removeEtc: () => Promise<void>
    logger: Logger | undefined
    isolation: SandboxIsolation
    uidRange?: { first: number, last: number } | undefined
    claim?: HostClaim | undefined
  }) {
    this.isolation = Object.freeze({ ...init.isolation })
    this.uidRange = init.isolation.uidPerTenant && init.uidRange !== undefined ? Object.freeze({ ...init.uidRange }) : undefined
    this.#claim = init.claim
    this.#cfg = init.cfg
    this.mode = init.cfg.mode
    this.limits = Object.freeze({ ...init.cfg.limits })
    this.probe = init.probe
    this.warning = init.warning
    this.owner = init.owner
    this.#canChown = init.canChown
    this.#removeEtc = init.removeEtc
    this.#logger = init.logger
  }

  async prepareWorkspace (workspace: Workspace): Promise<void> {
    if (this.owner === undefined) return
    const owner = workspace.owner ?? this.owner
    const st = await stat(workspace.root)
    // The workspace manager may not chown yet; without this the sandbox uid cannot write its own workspace.
    if (this.#canChown && (st.uid !== owner.uid || st.gid !== owner.gid)) {
      await chown(workspace.root, owner.uid, owner.gid)
    }
    if ((st.mode & 0o700) !== 0o700) await chmod(workspace.root, (st.mode & 0o7777) | 0o700)
  }

  spawn (req: SpawnRequest): SandboxedProcess {
    if (this.#closed) throw new ToolError('The sandbox is shutting down', 'sandbox')
    const proc = spawnSandboxed(this.#cfg, req)
    if (proc.spawnError === undefined) {
      this.#live.add(proc)
      proc.exited.then(() => this.#live.delete(proc), () => this.#live.delete(proc))
    }
    return proc
  }

  async exec (req: ExecRequest): Promise<ExecResult> {
    await this.prepareWorkspace(req.workspace)
    const { onSpawn, ...spawnReq } = req
    const proc = this.spawn({ ...spawnReq, stdin: 'ignore' })
    this.#execs++
    const unwatch = proc.spawnError === undefined ? onSpawn?.(proc) : undefined
    let r
    try {
      r = await runToCompletion(proc, { timeoutMs: req.timeoutMs, maxOutputBytes: req.maxOutputBytes, signal: req.signal })
    } finally {
      unwatch?.()
    }
    if (r.spawnError !== undefined) {
      this.#logger?.warn({ err: r.spawnError.message }, 'sandbox: command could not be started')
      throw new ToolError('The sandbox could not start the command', 'sandbox')
    }
    // bwrap (or the launcher) failed before the command ran: the sandbox's failure, not an exit code.
    const failure = await sandboxFailure(proc, r)
    if (failure !== undefined) {
      this.#logger?.warn({ tenant: req.workspace.tenant, stderr: r.stderr.slice(0, 400) }, 'sandbox: could not start the command')
      throw new ToolError(failure, 'sandbox')
    }
    // Killed by our own close(): its exit status says nothing about the command.
    if (this.#cutOff.has(proc)) throw new ToolError('The command was stopped: the gateway is shutting down', 'sandbox')
    if (r.timedOut) this.#timeouts++
    const { spawnError: _unused, ...result } = r
    return result
  }

  stats (): SandboxStats {
    return { mode: this.mode, execs: this.#execs, timeouts: this.#timeouts, running: this.#live.size }
  }

  async close (): Promise<void> {
    this.#closed = true
    const live = [...this.#live]
    for (const p of live) {
      this.#cutOff.add(p)
      p.kill()
    }
    await Promise.all(live.map(async (p) => await p.exited))
    await this.#cfg.cgroups?.close()
    this.#claim?.release()
    await this.#removeEtc()
  }
}

/** One line for the probe and the log: which mechanisms are in force. */
function describeIsolation (i: SandboxIsolation): string {
  const cg = i.cgroup === 'none' ? `no cgroups (${i.cgroupDetail})` : `${i.cgroupDetail}: per-tenant CPU share, memory and pids limits, one group per command`
  return `${i.uids}; ${cg}; ${i.rlimits ? 'rlimits per process' : 'no rlimits'}; ${i.seccomp ? 'seccomp filter' : 'no seccomp filter'}`
}

/**
 * Creates the sandbox for `bash`. Runs the start-up probe for `auto` and `bwrap`.
 * `bwrap` with a failing probe throws SandboxUnavailableError; `auto` falls back to `none` with a warning.
 */
export async function createSandbox (opts: SandboxOptions): Promise<Sandbox> {
  const limits: SandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, ...opts.limits }
  checkLimits(limits)
  const logger = opts.logger
  const myUid = process.getuid?.() ?? -1
  const myGid = process.getgid?.() ?? -1
  const isRoot = myUid === 0
  const uid = opts.uid ?? (isRoot ? DEFAULT_SANDBOX_UID : myUid)
  const gid = opts.gid ?? (opts.uid !== undefined ? opts.uid : isRoot ? DEFAULT_SANDBOX_UID : myGid)

  const layout = await detectHostLayout()
  const etc = await writeSandboxEtc()
  const cfg: SpawnConfig = {
    mode: 'bwrap',
    bwrapPath: await findBinary('bwrap', opts.bwrapPath),
    prlimitPath: await findBinary('prlimit', opts.prlimitPath),
    setprivPath: await findBinary('setpriv', undefined),
    runAsRoot: isRoot ? { fallback: { uid, gid } } : undefined,
    cgroups: undefined,
    limits,
    etc,
    layout,
    seccomp: buildSeccompFilter()
  }
  if (cfg.seccomp === undefined) logger?.warn({ arch: process.arch }, SECCOMP_UNSUPPORTED_WARNING)
  const uidPerTenant = isRoot && opts.uidRange !== undefined
  let uidRange = uidPerTenant ? opts.uidRange : undefined
  const uidsText = (): string => `one host uid per tenant from ${uidRange?.first ?? ''}-${uidRange?.last ?? ''}`
  const isolation: SandboxIsolation = {
    uidPerTenant,
    uids: uidPerTenant
      ? uidsText()
      : isRoot
        ? `all tenants share uid ${uid}`
        : `all tenants share the gateway's uid ${myUid} (not root: no uid per tenant, process limits are shared)`,
    cgroup: 'none',
    cgroupDetail: 'not set up',
    rlimits: true,
    seccomp: cfg.seccomp !== undefined
  }
  const checkedAt = (): string => new Date().toISOString()

  const fallBackToNone = (probe: SandboxProbe): Sandbox => {
    const warning = probe.ok ? NONE_WARNING : `${NONE_WARNING} Reason: ${probe.reason}`
    logger?.warn({ sandbox: 'none', probe }, `!!! ${warning}`)
    return new SandboxImpl({
      cfg: { ...cfg, mode: 'none', runAsRoot: undefined },
      probe,
      warning,
      owner: undefined,
      canChown: false,
      removeEtc: etc.remove,
      logger,
      isolation: {
        uidPerTenant: false,
        uids: 'unsandboxed: commands run as the gateway',
        cgroup: 'none',
        cgroupDetail: 'SANDBOX=none',
        rlimits: false,
        seccomp: false
      }
    })
  }

  if (opts.mode === 'none') {
    return fallBackToNone({ ok: false, reason: 'not probed: SANDBOX=none', checkedAt: checkedAt() })
  }

  let probe: SandboxProbe
  let claim: HostClaim | undefined
  if (uid === 0 || gid === 0) {
    probe = { ok: false, reason: 'the sandbox uid/gid must not be 0 (process limits are ignored for root).', checkedAt: checkedAt() }
  } else if (!isRoot && uid !== myUid) {
    probe = { ok: false, reason: `only root can run the sandbox as uid ${uid}; the gateway runs as uid ${myUid}.`, checkedAt: checkedAt() }
  } else {
    let cgroups: Cgroups | undefined
    const wantsCgroups = (isRoot || opts.cgroupRoot !== undefined) && opts.cgroupRoot !== 'none'
    if (opts.host !== undefined && (uidPerTenant || wantsCgroups)) {
      // Throws (start-up stops) when another deployment on this host holds these uids or this cgroup root.
      claim = await claimHost({
        deployment: opts.host.deployment,
        uidsPersisted: opts.host.uidsPersisted,
        uidRange,
        ...(wantsCgroups && opts.cgroupRoot !== undefined ? { cgroupRoot: opts.cgroupRoot } : {}),
        ...(opts.host.claimsDir !== undefined ? { dir: opts.host.claimsDir } : {})
      }).catch(async (err: unknown) => {
        await etc.remove()
        throw err
      })
      uidRange = claim.uidRange ?? uidRange
      if (uidPerTenant) isolation.uids = uidsText()
    }
    if (isRoot || opts.cgroupRoot !== undefined) {
      const tenantLimits = opts.tenantLimits ?? DEFAULT_TENANT_LIMITS
      cgroups = setUpCgroups(opts.cgroupRoot, tenantLimits, claim?.cgroupName)
      isolation.cgroup = cgroups.mode
      isolation.cgroupDetail = cgroups.detail
      if (cgroups.mode !== 'none') {
        // A gateway that was SIGKILLed left its commands' groups, and what ran in them, behind:
        // cleared now rather than when one of those tenants runs a command again (bounded).
        const swept = await cgroups.sweep(STARTUP_SWEEP_BUDGET_MS)
        if (swept.groups + swept.left > 0) {
          logger?.warn({ ...swept }, `sandbox: removed ${swept.groups} command cgroup(s) of gone gateways (${swept.processes} process(es) killed)${swept.left > 0 ? `; ${swept.left} left (retried when their tenant runs a command)` : ''}`)
        }
        cfg.cgroups = cgroups
        // tmpfs pages are charged to the writer's memory cgroup: a /tmp larger than the tenant's
        // memory could never be filled anyway, and /tmp plus /dev/shm together must fit.
        cfg.limits = { ...limits, tmpSizeBytes: Math.min(limits.tmpSizeBytes, Math.floor(tenantLimits.memoryBytes / 2)) }
      }
    } else {
      isolation.cgroupDetail = 'not root and no SANDBOX_CGROUP_ROOT: rlimits only'
    }
    probe = { ...await runProbe(cfg, isRoot ? { uid, gid } : undefined, uid), checkedAt: checkedAt() }
    if (probe.ok) probe.reason += ` Isolation: ${describeIsolation(isolation)}.`
    else {
      await cgroups?.close()
      claim?.release()
    }
  }

  if (!probe.ok) {
    if (opts.mode === 'bwrap') {
      await etc.remove()
      throw new SandboxUnavailableError(probe.reason)
    }
    return fallBackToNone(probe)
  }
  logger?.info({ sandbox: 'bwrap', uid, gid }, `sandbox: ${probe.reason}`)
  return new SandboxImpl({ cfg, probe, warning: undefined, owner: { uid, gid }, canChown: isRoot, removeEtc: etc.remove, logger, isolation, uidRange, claim })
}
