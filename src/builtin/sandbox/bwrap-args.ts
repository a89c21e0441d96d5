import type { SandboxLimits } from './types.js'

/** Top-level system directories: bound read-only when real, recreated when the host has symlinks (merged /usr). */
export interface HostLayout {
  dirs: readonly string[]
  symlinks: ReadonlyArray<{ path: string, target: string }>
}

export const INNER_UID = 1000
export const INNER_GID = 1000
const SANDBOX_PATH = '/usr/local/bin:/usr/bin:/bin'

export interface BwrapCommand {
  workspaceRoot: string
  readRoots: readonly string[]
  /** More read-only binds, at the same path (SpawnRequest.binds). */
  binds?: readonly string[]
  cwd: string
  command: string
  /** The sandbox's /etc (system-files.ts writeSandboxEtc): a directory bound read-only, host directories on top. */
  etc: { dir: string, binds: readonly string[] }
  layout: HostLayout
  tmpSizeBytes: number
}

/**
 * The environment inside the sandbox: an allowlist, never derived from the gateway's own
 * environment (which holds API keys, Redis URLs, secrets keys).
 */
export function sandboxEnv (workspaceRoot: string): Record<string, string> {
  return {
    PATH: SANDBOX_PATH,
    HOME: workspaceRoot,
    LANG: 'C.UTF-8',
    TMPDIR: '/tmp',
    TERM: 'dumb',
    USER: 'sandbox',
    LOGNAME: 'sandbox',
    SHELL: '/bin/sh'
  }
}

/** bwrap argv (without the bwrap binary itself) for `sh -c command`. */
export function buildBwrapArgs (c: BwrapCommand): string[] {
  const a: string[] = [
    // Every namespace (mount, pid, net, ipc, uts, cgroup): no network but a private lo.
    '--unshare-all',
    // Non-root inside, and no way to gain capabilities through a nested user namespace.
    '--unshare-user', '--uid', String(INNER_UID), '--gid', String(INNER_GID),
    '--disable-userns',
    '--cap-drop', 'ALL',
    // The namespace dies with bwrap; setsid blocks TIOCSTI injection into a controlling terminal.
    '--die-with-parent', '--new-session',
    '--hostname', 'sandbox',
    '--ro-bind', '/usr', '/usr'
  ]
  for (const d of c.layout.dirs) a.push('--ro-bind', d, d)
  for (const s of c.layout.symlinks) a.push('--symlink', s.target, s.path)
  a.push('--ro-bind', c.etc.dir, '/etc')
  for (const b of c.etc.binds) a.push('--ro-bind-try', b, b)
  a.push(
    '--proc', '/proc',
    '--dev', '/dev',
    // --size applies to the next --tmpfs only.
    '--size', String(c.tmpSizeBytes), '--tmpfs', '/dev/shm',
    '--size', String(c.tmpSizeBytes), '--tmpfs', '/tmp',
    // After /tmp so a workspace under the host's /tmp is bound over the private tmpfs.
    '--bind', c.workspaceRoot, c.workspaceRoot
  )
  for (const r of c.readRoots) a.push('--ro-bind', r, r)
  for (const b of c.binds ?? []) a.push('--ro-bind', b, b)
  // The root and /dev are unbounded tmpfs owned by the sandbox user: read-only, or they are a memory hog.
  a.push('--remount-ro', '/dev', '--remount-ro', '/')
  a.push('--chdir', c.cwd, '--clearenv')
  for (const [k, v] of Object.entries(sandboxEnv(c.workspaceRoot))) a.push('--setenv', k, v)
  a.push('--', '/bin/sh', '-c', c.command)
  return a
}

/** prlimit argv (without the binary) that applies the limits and then execs `rest`. */
export function buildPrlimitArgs (l: SandboxLimits, rest: readonly string[]): string[] {
  const a = [
    `--cpu=${l.cpuSeconds}`,
    `--fsize=${l.fileSizeBytes}`,
    `--nproc=${l.maxProcesses}`,
    `--nofile=${l.openFiles}`,
    '--core=0'
  ]
  if (l.memoryBytes > 0) a.push(`--data=${l.memoryBytes}`)
  a.push('--', ...rest)
  return a
}
