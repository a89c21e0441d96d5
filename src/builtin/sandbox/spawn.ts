import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process'
import { constants } from 'node:os'
import { PassThrough, type Readable } from 'node:stream'
import { buildBwrapArgs, buildPrlimitArgs, sandboxEnv, type BwrapCommand, type HostLayout } from './bwrap-args.js'
import type { Cgroups, CommandGroup } from './cgroups.js'
import { seccompArgs, writeSeccompFilter } from './seccomp.js'
import { childPids, signalQuietly, waitForNamespaceEnd } from './kill.js'
import { pidsInGroup, processTree, wcharOf } from './io-stats.js'
import type { ExitInfo, SandboxedProcess, SandboxLimits, SpawnRequest } from './types.js'

/** What a spawn needs from the sandbox that owns it. */
export interface SpawnConfig {
  mode: 'bwrap' | 'none'
  bwrapPath: string
  prlimitPath: string
  setprivPath: string
  /**
   * The gateway runs as root: commands run as the workspace's owner (the tenant's own uid,
   * docs/ARCHITECTURE.md#isolation), or as this uid/gid when the workspace has none.
   */
  runAsRoot: { fallback: { uid: number, gid: number } } | undefined
  /** Per-tenant cgroups, when the host has them; undefined = rlimits only. */
  cgroups: Cgroups | undefined
  limits: SandboxLimits
  etc: BwrapCommand['etc']
  layout: HostLayout
  /** Classic-BPF program handed to bwrap --seccomp on fd 4; undefined = no filter for this arch. */
  seccomp: Buffer | undefined
}

/** fd 3 is bwrap's --info-fd; the seccomp program comes on the next one, then the --sync-fd. */
const SECCOMP_FD = 4

/**
 * Runs as root (or as the gateway's uid with a delegated cgroup) with argv
 * `N file1..fileN cmd...`: writes its own pid into each cgroup.procs file, then execs the command
 * (setpriv to the tenant's uid, prlimit, bwrap). The pid never changes, so the command is in its
 * group before it can fork: its whole tree is counted and can be killed through the group. It exits
 * 125 when it cannot join a group.
 */
const LAUNCH_SCRIPT =
  'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || { echo "tool-gateway: cannot join the command\'s cgroup" >&2; exit 125; }; shift; n=$((n-1)); done; exec "$@"'

/** bwrap itself gets no gateway variables either: /proc/1/environ inside the sandbox is bwrap's. */
const LAUNCHER_ENV = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' }

function exitInfo (code: number | null, signal: NodeJS.Signals | null): ExitInfo {
  if (code !== null) return { exitCode: code, signal }
  if (signal !== null) return { exitCode: 128 + (constants.signals[signal] ?? 0), signal }
  return { exitCode: null, signal }
}

/** Upper bound for the kernel to tear a namespace down after bwrap exited. */
const NAMESPACE_END_MAX_MS = 5000
const PIPE_DRAIN_MS = 1000

/**
 * `p`, or undefined once `ms` have passed: a plain timer, cleared when `p` settles first (a
 * sleep() in the race would stay armed for its full time after every exec).
 */
async function bounded<T> (p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([p, new Promise<undefined>((resolve) => { timer = setTimeout(() => { resolve(undefined) }, ms).unref() })])
  } finally {
    clearTimeout(timer)
  }
}

interface NamespaceInfo { initPid: number, pidNs: number | undefined }

/**
 * bwrap's --sync-fd: bwrap and the namespace's init keep its write end open (the command closes
 * it before it execs), so our read end's EOF says the init is exiting: the namespace's end is
 * then a check away instead of a poll with growing sleeps (bench row 5.6). Resolves on EOF or an
 * error (never rejects); the caller bounds the wait and destroys the stream.
 */
function endOf (stream: Readable | null | undefined): Promise<void> {
  if (stream == null) return Promise.resolve()
  return new Promise((resolve) => {
    const done = (): void => { resolve() }
    stream.once('end', done)
    stream.once('close', done)
    stream.once('error', done)
    stream.resume()
  })
}

/** bwrap --info-fd: JSON with the host pid of the namespace's init and the namespace inodes. */
function readInfo (stream: Readable | null | undefined): Promise<NamespaceInfo | undefined> {
  return new Promise((resolve) => {
    if (stream == null) { resolve(undefined); return }
    let text = ''
    let settled = false
    // bwrap writes one JSON object and keeps nothing else on this pipe; a process inside the
    // namespace may still hold its write end, so the object is taken as soon as it parses and
    // the pipe is then closed on our side (an open pipe would keep the gateway's loop alive).
    const finish = (info: NamespaceInfo | undefined): void => {
      if (settled) return
      settled = true
      stream.destroy()
      resolve(info)
    }
    const parse = (): NamespaceInfo | undefined | null => {
      try {
        const j = JSON.parse(text) as Record<string, unknown>
        const initPid = j['child-pid']
        const pidNs = j['pid-namespace']
        return typeof initPid === 'number' ? { initPid, pidNs: typeof pidNs === 'number' ? pidNs : undefined } : undefined
      } catch {
        return null
      }
    }
    stream.setEncoding('utf8')
    stream.on('data', (d: string) => {
      if (text.length < 65536) text += d
      const info = parse()
      if (info !== null) finish(info)
    })
    stream.on('error', () => finish(undefined))
    stream.once('close', () => { const info = parse(); finish(info ?? undefined) })
  })
}

export function spawnSandboxed (cfg: SpawnConfig, req: SpawnRequest): SandboxedProcess {
  const seccomp = cfg.mode === 'bwrap' ? cfg.seccomp : undefined
  const syncFd = seccomp !== undefined ? SECCOMP_FD + 1 : SECCOMP_FD
  const stdio: StdioOptions = cfg.mode === 'bwrap'
    ? [req.stdin, 'pipe', 'pipe', 'pipe', ...(seccomp !== undefined ? ['pipe' as const] : []), 'pipe']
    : [req.stdin, 'pipe', 'pipe']
  let child: ChildProcess
  let group: CommandGroup | undefined
  try {
    if (cfg.mode === 'bwrap') {
      const runAs = cfg.runAsRoot !== undefined ? (req.workspace.owner ?? cfg.runAsRoot.fallback) : undefined
      // Root inside is not a sandbox (RLIMIT_NPROC is ignored for uid 0, capabilities survive).
      if (runAs !== undefined && (runAs.uid === 0 || runAs.gid === 0)) throw new Error('refusing to run a sandboxed command as root')
      const bwrap = ['--info-fd', '3', ...(seccomp !== undefined ? seccompArgs(SECCOMP_FD) : []), '--sync-fd', String(syncFd), ...buildBwrapArgs({
        workspaceRoot: req.workspace.root,
        readRoots: req.workspace.readRoots.map((r) => r.path),
        ...(req.binds !== undefined ? { binds: req.binds } : {}),
        cwd: req.cwd,
        command: req.command,
        etc: cfg.etc,
        layout: cfg.layout,
        tmpSizeBytes: cfg.limits.tmpSizeBytes
      })]
      // A lower file size limit for this command (the workspace's remaining quota) replaces the sandbox's.
      const limits = req.fileSizeBytes !== undefined && req.fileSizeBytes < cfg.limits.fileSizeBytes
        ? { ...cfg.limits, fileSizeBytes: Math.max(0, Math.floor(req.fileSizeBytes)) }
        : cfg.limits
      const limited = [cfg.prlimitPath, ...buildPrlimitArgs(limits, [cfg.bwrapPath, ...bwrap])]
      const common = {
        cwd: '/',
        env: LAUNCHER_ENV,
        // Own process group: a kill of -pid reaches bwrap and the namespace's init together.
        detached: true,
        stdio
      }
      if (cfg.cgroups !== undefined) {
        group = cfg.cgroups.commandGroup(`t-${req.workspace.tenant}`)
        // The launcher joins the group as root, then drops to the tenant's uid (setpriv sets real,
        // effective and saved ids and clears supplementary groups; capabilities go with uid 0).
        const drop = runAs !== undefined
          ? [cfg.setprivPath, `--reuid=${runAs.uid}`, `--regid=${runAs.gid}`, '--clear-groups', '--']
          : []
        child = spawn(
          '/bin/sh',
          ['-c', LAUNCH_SCRIPT, 'tool-gateway-launch', String(group.procsFiles.length), ...group.procsFiles, ...drop, ...limited],
          common
        )
      } else {
        // libuv drops supplementary groups (setgroups(0)) when switching ids.
        child = spawn(limited[0] as string, limited.slice(1), { ...common, ...(runAs ?? {}) })
      }
    } else {
      child = spawn('/bin/sh', ['-c', req.command], {
        cwd: req.cwd,
        env: sandboxEnv(req.workspace.root),
        detached: true,
        stdio
      })
    }
  } catch (err) {
    // Synchronous failures (EPERM on uid switch, bad arguments, no cgroup): report like an async spawn error.
    group?.remove().catch(() => {})
    return failedProcess(err as Error)
  }

  // bwrap reads the program to EOF before it execs the command; it is < 64 KiB, so it fits the pipe.
  if (seccomp !== undefined) writeSeccompFilter(child.stdio[SECCOMP_FD], seccomp)
  const info = cfg.mode === 'bwrap' ? readInfo(child.stdio[3] as Readable | null) : Promise.resolve(undefined)
  const syncEnd = cfg.mode === 'bwrap' ? endOf(child.stdio[syncFd] as Readable | null) : Promise.resolve()
  let done = false
  let resolveExit!: (e: ExitInfo) => void
  const exited = new Promise<ExitInfo>((resolve) => { resolveExit = resolve })
  const proc: SandboxedProcess & { spawnError: Error | undefined } = {
    pid: child.pid,
    stdout: child.stdout ?? new PassThrough(),
    stderr: child.stderr ?? new PassThrough(),
    stdin: child.stdin,
    exited,
    // bwrap writes its info once it created the namespaces: without it, the command never ran.
    started: cfg.mode === 'bwrap' ? info.then((ns) => ns !== undefined) : Promise.resolve(true),
    spawnError: undefined,
    kill,
    terminate,
    written
  }
  child.once('error', (err) => {
    if (done) return
    if (child.pid === undefined) {
      done = true
      proc.spawnError = err
      group?.remove().catch(() => {})
      resolveExit({ exitCode: null, signal: null })
    }
  })
  // 'exit', not 'close': a process that escaped the kill could hold the pipes open forever.
  child.once('exit', (code, signal) => {
    done = true
    const status = exitInfo(code, signal)
    // bwrap exits as soon as the command does; --die-with-parent then SIGKILLs the namespace's init,
    // asynchronously. Resolve only once that happened, so "exited" means nothing is left running.
    // Bounded: bwrap that died before writing its info must not leave `exited` pending forever.
    bounded(info, NAMESPACE_END_MAX_MS).then(async (ns) => {
      if (ns !== undefined) {
        // The init closes the sync fd as it exits, before it has killed what is left in its namespace: the check follows.
        await bounded(syncEnd, NAMESPACE_END_MAX_MS)
        await waitForNamespaceEnd(ns.initPid, ns.pidNs, NAMESPACE_END_MAX_MS)
      }
      // Anything the namespace's end did not take (nothing, normally) dies with the group.
      await group?.remove()
    }).catch(() => {}).finally(() => {
      ;(child.stdio[3] as Readable | null | undefined)?.destroy()
      ;(child.stdio[syncFd] as Readable | null | undefined)?.destroy()
      // The namespace is gone (or its end timed out): after a moment to drain what is buffered,
      // close our ends of the output pipes, so a process that still holds their write ends can
      // never keep the gateway's event loop alive.
      setTimeout(() => { child.stdout?.destroy(); child.stderr?.destroy() }, PIPE_DRAIN_MS).unref()
      resolveExit(status)
    })
  })
  // A writer on a dead process gets EPIPE; that is the caller's answer, not a crash.
  child.stdin?.on('error', () => {})

  function kill (): void {
    // The pid is valid until 'exit' has been handled: libuv reaps and emits in the same callback.
    if (done || child.pid === undefined) return
    // The group holds bwrap and the namespace's init; with --die-with-parent and its own
    // pid namespace, their death ends every process inside, including setsid'd orphans.
    if (!signalQuietly(-child.pid, 'SIGKILL')) signalQuietly(child.pid, 'SIGKILL')
    // And every process of the command's cgroup, wherever it is in the tree.
    group?.killAll().catch(() => {})
  }

  async function written (): Promise<number | undefined> {
    if (done || child.pid === undefined) return undefined
    // The command's group lists every process it has; without one, the tree under the leader.
    const procs = group?.procsFiles[0]
    const pids = procs !== undefined ? pidsInGroup(procs) : await processTree(child.pid)
    if (pids.length === 0 || done) return undefined
    return wcharOf(pids)
  }

  async function terminate (graceMs: number): Promise<ExitInfo> {
    if (done || child.pid === undefined) return await exited
    await sendTerm(child.pid)
    let timer: NodeJS.Timeout | undefined
    const graceOver = new Promise<'grace'>((resolve) => { timer = setTimeout(() => resolve('grace'), graceMs) })
    const first = await Promise.race([exited, graceOver])
    clearTimeout(timer)
    if (first === 'grace') kill()
    return await exited
  }

  async function sendTerm (pid: number): Promise<void> {
    if (cfg.mode === 'none') {
      signalQuietly(-pid, 'SIGTERM')
      return
    }
    // bwrap does not forward SIGTERM. With --new-session the namespace's init (bwrap's child) leads
    // the session and process group the command runs in; as pid 1 it ignores signals it has no
    // handler for, so SIGTERM to that group reaches the command and its jobs only, as a terminal would.
    for (const init of await childPids(pid)) {
      if (done) return
      if (signalQuietly(-init, 'SIGTERM')) return
    }
    if (!done) signalQuietly(pid, 'SIGTERM')
  }

  return proc
}

function failedProcess (err: Error): SandboxedProcess {
  const empty = (): PassThrough => { const s = new PassThrough(); s.end(); return s }
  const exited = Promise.resolve<ExitInfo>({ exitCode: null, signal: null })
  return {
    pid: undefined,
    stdout: empty(),
    stderr: empty(),
    stdin: null,
    exited,
    started: Promise.resolve(false),
    spawnError: err,
    kill: () => {},
    terminate: async () => await exited,
    written: async () => undefined
  }
}
