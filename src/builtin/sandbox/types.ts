import type { Readable, Writable } from 'node:stream'
import type { Logger } from '../../logger.js'
import type { Workspace } from '../types.js'
import type { CgroupLimits } from './cgroups.js'

/** `SANDBOX` as configured. */
export const SANDBOX_MODES = ['auto', 'bwrap', 'none'] as const
export type SandboxMode = typeof SANDBOX_MODES[number]

/** The mode actually in effect after the start-up probe. */
export type EffectiveSandboxMode = 'bwrap' | 'none'

/** Result of the start-up probe (reported by /readyz and /status). */
export interface SandboxProbe {
  ok: boolean
  /** Human-readable: what was checked, or why it failed and what to do about it. */
  reason: string
  checkedAt: string
}

/** Resource limits applied to every sandboxed command (per process, via setrlimit). */
export interface SandboxLimits {
  /** RLIMIT_CPU, seconds of CPU time per process. */
  cpuSeconds: number
  /** RLIMIT_FSIZE, largest file a process may write. */
  fileSizeBytes: number
  /**
   * RLIMIT_NPROC. The kernel counts every process of the sandbox's HOST uid, so this
   * budget is shared by all concurrent sandboxes running as that uid.
   */
  maxProcesses: number
  /** RLIMIT_NOFILE. */
  openFiles: number
  /** RLIMIT_DATA (heap + private writable mappings) per process; 0 = unlimited. */
  memoryBytes: number
  /** Size of the private /tmp tmpfs (and of /dev/shm). */
  tmpSizeBytes: number
}

/** Which isolation mechanisms are in force (docs/ARCHITECTURE.md#isolation; /status and the probe report it). */
export interface SandboxIsolation {
  /** Each tenant's commands run as its own host uid (the gateway runs as root). */
  uidPerTenant: boolean
  /** Human-readable: the uid range, or that all tenants share one uid and why. */
  uids: string
  cgroup: 'v1' | 'v2' | 'none'
  /** Where the groups are, or why there are none. */
  cgroupDetail: string
  /** Per-process rlimits (prlimit: cpu, fsize, nproc, nofile, data) on every command. */
  rlimits: boolean
  /** A seccomp filter (bwrap --seccomp) denies ptrace, keyrings, bpf, io_uring, mount, new user namespaces... */
  seccomp: boolean
}

export interface SandboxOptions {
  mode: SandboxMode
  /**
   * SANDBOX_UID_RANGE. When set and the gateway runs as root, every workspace must carry its
   * tenant's uid as `owner` (WorkspaceManager does this) and commands run as it.
   */
  uidRange?: { first: number, last: number }
  /** SANDBOX_CGROUP_ROOT (`none` = no cgroups); default: under the gateway's own cgroup. */
  cgroupRoot?: string
  /**
   * The gateway's deployment, to claim its uids and cgroup root on the host (host-claim.ts): two
   * deployments on one host never share them. Without it nothing is claimed (tests, ripgrep's own
   * sandbox) and the default cgroup parent is `tool-gateway`.
   */
  host?: { deployment: string, uidsPersisted: boolean, claimsDir?: string }
  /** Per-tenant cgroup limits (memory incl. tmpfs, processes, CPUs). */
  tenantLimits?: CgroupLimits
  /** Host uid/gid the sandbox runs as. Default: 65534 when the gateway is root, else the gateway's own ids. */
  uid?: number
  gid?: number
  limits?: Partial<SandboxLimits>
  logger?: Logger
  bwrapPath?: string
  prlimitPath?: string
}

/** How one command is run. `cwd` is an absolute host path inside `workspace.root`. */
export interface SpawnRequest {
  workspace: Workspace
  command: string
  cwd: string
  /** 'pipe' for background processes that accept `write`; exec uses /dev/null. */
  stdin: 'ignore' | 'pipe'
  /**
   * RLIMIT_FSIZE for this command when lower than the sandbox's own (`limits.fileSizeBytes`): the
   * workspace's remaining quota, so no single file can take it past it.
   */
  fileSizeBytes?: number
  /**
   * Host paths bound read-only into this command's sandbox alone, at the same path (code mode's
   * client library and its call's socket directory). Without bwrap (mode none) they are simply there.
   */
  binds?: readonly string[]
}

export interface ExitInfo {
  /** Exit status; a command killed by signal N reports 128 + N (bwrap's convention), null when unknown. */
  exitCode: number | null
  signal: NodeJS.Signals | null
}

/** A running sandboxed command. Killing it ends every process it started. */
export interface SandboxedProcess {
  /** Host pid of the sandbox leader (bwrap, or sh in mode none). */
  readonly pid: number | undefined
  readonly stdout: Readable
  readonly stderr: Readable
  readonly stdin: Writable | null
  /** Resolves once the leader exited (never rejects; spawn failures resolve with exitCode null). */
  readonly exited: Promise<ExitInfo>
  /**
   * Resolves true once the sandbox is up (bwrap created its namespaces), false when it never came
   * up: then a failure is the sandbox's, not the command's.
   */
  readonly started: Promise<boolean>
  /** Set when the process could not be started at all. */
  readonly spawnError: Error | undefined
  /** SIGTERM to the command's session, then SIGKILL of the whole sandbox after `graceMs`. */
  terminate: (graceMs: number) => Promise<ExitInfo>
  /** SIGKILL of the whole sandbox (namespace) now. */
  kill: () => void
  /**
   * Bytes the command's processes have passed to write() so far (`wchar` of /proc/<pid>/io, which
   * includes the children they reaped), undefined once it ended or when it cannot be read: a cheap
   * signal that it is writing, for the quota watchdog. Counts pipes and /tmp too.
   */
  written: () => Promise<number | undefined>
}

export interface ExecRequest extends Omit<SpawnRequest, 'stdin'> {
  timeoutMs: number
  /** Per stream: bytes kept (head + tail). */
  maxOutputBytes: number
  signal?: AbortSignal
  /** Called once the command is spawned (the quota watchdog attaches here); its result is called when it ended. */
  onSpawn?: (proc: SandboxedProcess) => (() => void)
}

export interface ExecResult {
  stdout: string
  stderr: string
  exitCode: number
  timedOut: boolean
  /** The command produced so much output that it was killed. */
  outputLimitExceeded: boolean
  /** The caller's signal aborted the command. */
  aborted: boolean
}

export interface SandboxStats {
  mode: EffectiveSandboxMode
  execs: number
  timeouts: number
  running: number
}

export interface Sandbox {
  readonly mode: EffectiveSandboxMode
  readonly probe: SandboxProbe
  /** Set when commands are not isolated (mode none): show it in /readyz and /status. */
  readonly warning: string | undefined
  /**
   * Host uid/gid sandboxed commands run as when a workspace has no `owner` of its own (with a uid
   * per tenant, the workspace's owner is used). Undefined in mode none.
   */
  readonly owner: { uid: number, gid: number } | undefined
  readonly limits: Readonly<SandboxLimits>
  readonly isolation: Readonly<SandboxIsolation>
  /**
   * The host uids tenants get (isolation.uidPerTenant): SANDBOX_UID_RANGE, or the block of it this
   * gateway claimed on the host (host-claim.ts). Undefined without a uid per tenant.
   */
  readonly uidRange: Readonly<{ first: number, last: number }> | undefined
  /** Makes the workspace root usable by the sandbox uid (chown of the root dir when needed). */
  prepareWorkspace: (workspace: Workspace) => Promise<void>
  spawn: (req: SpawnRequest) => SandboxedProcess
  /** Runs a command to completion with a wall-clock timeout and capped output. */
  exec: (req: ExecRequest) => Promise<ExecResult>
  stats: () => SandboxStats
  /** Kills every command still running and removes the sandbox's scratch files. */
  close: () => Promise<void>
}
