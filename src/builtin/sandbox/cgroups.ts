/**
 * Per-tenant cgroups for sandboxed commands (docs/ARCHITECTURE.md#isolation): a parent group per tenant with an equal CPU
 * share, a memory limit and a pids limit, and one child group per command, which the launcher
 * joins before it execs bwrap, so the command's whole process tree is counted, limited and killed
 * together. cgroup v1 (one hierarchy per controller: cpu, memory, pids) or a delegated v2 subtree.
 *
 * File operations here are synchronous on purpose: cgroupfs is an in-kernel filesystem (no disk),
 * each write is a few microseconds, and the spawn path that needs them is synchronous.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { readFile, rmdir } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { ContentionCap, type CapTarget } from './cpu-cap.js'
import { signalQuietly } from './kill.js'

export type CgroupMode = 'v1' | 'v2' | 'none'

export interface CgroupLimits {
  /** Memory of all the tenant's commands, tmpfs pages included (the writer is charged). */
  memoryBytes: number
  /** Processes (and threads) of all the tenant's commands. */
  pids: number
  /**
   * CPUs all the tenant's commands may use together (a CFS quota; 0 = none). The equal share alone
   * does not protect the others: a fork bomb's churn on every core holds the kernel's process-table
   * lock, and another tenant's spawn (fork, clone, exec) waits on it (measured on 2 cores: another
   * tenant's 25-30 ms `bash exec true` took 200-900 ms with shares only, 45-85 ms with a one-core quota
   * over the kernel's 100 ms period, 30-50 ms over a 10 ms period). Applied under contention only
   * (cpu-cap.ts): a tenant alone on the host runs uncapped, or its multi-threaded commands (rg) crawl.
   */
  cpus: number
}

/** SANDBOX_TENANT_CPUS' default: half the host's CPUs, at least one. */
export function defaultTenantCpus (): number {
  return Math.max(1, Math.floor(availableParallelism() / 2))
}

/** CFS period of the quota: short, so a capped tenant's bursts on every core last a few ms (the kernel's default is 100 ms). */
const CFS_PERIOD_US = 10_000
const cfsQuota = (cpus: number): number => Math.max(1000, Math.round(cpus * CFS_PERIOD_US))

/** One command's group: the files its launcher writes its pid to, and the clean-up. */
export interface CommandGroup {
  /** cgroup.procs files to join (one per v1 controller, one for v2). */
  readonly procsFiles: readonly string[]
  /** SIGKILLs every process still in the group, until it is empty (bounded). */
  killAll: () => Promise<void>
  /** Kills what is left and removes the group (every controller). Never throws. */
  remove: () => Promise<void>
}

export interface Cgroups {
  readonly mode: CgroupMode
  /** Why this mode (shown in /status): where the groups are, or why there are none. */
  readonly detail: string
  /** Creates the tenant's parent group (once per process) and a fresh child group. Throws on failure. */
  commandGroup: (groupName: string) => CommandGroup
  /**
   * Start-up sweep: removes the command groups that gateways now gone left, under every tenant, here
   * and in the sibling `tool-gateway*` groups; kills what still runs in them first. Bounded by
   * `budgetMs`; never throws.
   */
  sweep: (budgetMs: number) => Promise<SweepResult>
  /** Removes the (empty) tenant groups and the root this process made. Never throws. */
  close: () => Promise<void>
}

/** What a start-up sweep found. */
export interface SweepResult {
  /** Command groups of gone gateways removed. */
  groups: number
  /** Their processes, killed. */
  processes: number
  /** Groups left because the budget ran out or they would not go (EBUSY). */
  left: number
}

const V1_CONTROLLERS = ['cpu', 'memory', 'pids'] as const
/** Same for every tenant: the share is what makes CPU time equal between tenants. */
const V1_CPU_SHARES = 1024
const V2_CPU_WEIGHT = 100
/** The default group's name, and the prefix of the names a deployment derives from it (see setUpCgroups). */
export const ROOT_NAME = 'tool-gateway'

const none = (detail: string): Cgroups => ({
  mode: 'none',
  detail,
  commandGroup: () => { throw new Error('cgroups are not in use') },
  sweep: async () => ({ groups: 0, processes: 0, left: 0 }),
  close: async () => {}
})

interface Mount { dir: string, type: string, options: string[] }

function mounts (): Mount[] {
  try {
    return readFileSync('/proc/self/mounts', 'utf8').split('\n').map((line) => {
      const f = line.split(' ')
      return { dir: (f[1] ?? '').replace(/\\040/g, ' '), type: f[2] ?? '', options: (f[3] ?? '').split(',') }
    })
  } catch {
    return []
  }
}

/** This process's own group in a v1 controller hierarchy, or in v2 (key ''). */
function ownGroups (): Map<string, string> {
  const out = new Map<string, string>()
  try {
    for (const line of readFileSync('/proc/self/cgroup', 'utf8').split('\n')) {
      const m = /^\d+:([^:]*):(.*)$/.exec(line)
      if (m === null) continue
      for (const c of (m[1] ?? '').split(',')) out.set(c, m[2] ?? '/')
    }
  } catch {}
  return out
}

function write (file: string, value: string): void {
  writeFileSync(file, value)
}

function mkdirp (dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o755 })
}

/** Pids listed in a cgroup.procs file (empty when the group is gone). */
async function procsOf (file: string): Promise<number[]> {
  try {
    return (await readFile(file, 'utf8')).split('\n').filter(Boolean).map(Number).filter(Number.isInteger)
  } catch {
    return []
  }
}

/** SIGKILLs the group's processes until it is empty (bounded); returns how many distinct pids it killed. */
async function killLoop (procsFile: string, killFile: string | undefined, deadline = Date.now() + 5000): Promise<number> {
  // A fork bomb keeps forking while we kill: repeat until the group is empty (bounded).
  const killed = new Set<number>()
  for (let round = 0; Date.now() < deadline; round++) {
    if (killFile !== undefined) {
      try { write(killFile, '1') } catch {}
    }
    const pids = await procsOf(procsFile)
    if (pids.length === 0) break
    for (const pid of pids) {
      killed.add(pid)
      signalQuietly(pid, 'SIGKILL')
    }
    await sleep(round < 5 ? 2 : 20)
  }
  return killed.size
}

/** Removes a group; true when it is gone. */
async function removeDir (dir: string): Promise<boolean> {
  // rmdir fails with EBUSY until the last killed task is fully gone: retry briefly.
  for (let i = 0; i < 50; i++) {
    try {
      await rmdir(dir)
      return true
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT') return true
      if (code !== 'EBUSY') return false
      await sleep(20)
    }
  }
  return false
}

function subdirs (dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name)
  } catch {
    return []
  }
}

/**
 * A command group's name is `c<pid of the gateway that made it>-<sequence>` (childName). It is
 * stale when that gateway is gone: no process has its pid. A live gateway's groups are never
 * stale; a recycled pid only makes a gone gateway's groups look live (left, never wrongly killed).
 * Pids are those of this pid namespace: gateways in other pid namespaces (containers) get their
 * own cgroup subtree by default (the base is under the gateway's own group), so they never meet here.
 */
function isStaleChild (name: string): boolean {
  const owner = Number(/^c(\d+)-\d+$/.exec(name)?.[1])
  return Number.isInteger(owner) && owner > 0 && owner !== process.pid && !existsSync(`/proc/${owner}`)
}

/**
 * Removes command groups a gateway that is gone left behind (it was SIGKILLed before it could
 * remove them): their processes are killed and the groups removed. Groups of live gateways
 * (their pid is in the name) are left alone. In the background; never throws.
 */
function sweepStale (tenantDirs: readonly string[], procsDir: string): void {
  const stale = subdirs(procsDir).filter(isStaleChild)
  if (stale.length === 0) return
  const sweep = async (): Promise<void> => {
    for (const name of stale) {
      await killLoop(path.join(procsDir, name, 'cgroup.procs'), undefined)
      for (const d of tenantDirs) await removeDir(path.join(d, name))
    }
  }
  sweep().catch(() => {})
}

/**
 * The start-up sweep (docs/ARCHITECTURE.md#isolation). `bases`: per controller (v1) or the one v2
 * directory, this process's base. Gone gateways may have used the base itself or, under another
 * deployment's range (setUpCgroups' `name`), a sibling `tool-gateway*`: both are looked at, and in
 * each only stale command groups (isStaleChild) are touched, so the groups of live gateways, this
 * deployment's or another's, are left alone. Emptied tenant groups go too (a live gateway makes a
 * missing one again, makeChildGroups). The kill runs through the first controller's cgroup.procs
 * (every controller holds the same processes), v2's cgroup.kill when there is one.
 */
async function sweepAll (bases: readonly string[], budgetMs: number): Promise<SweepResult> {
  const deadline = Date.now() + budgetMs
  const result: SweepResult = { groups: 0, processes: 0, left: 0 }
  const first = bases[0]
  if (first === undefined) return result
  const baseNames = [path.basename(first)]
  if (path.basename(first).startsWith(ROOT_NAME)) {
    for (const n of subdirs(path.dirname(first))) {
      if ((n === ROOT_NAME || n.startsWith(`${ROOT_NAME}-`)) && !baseNames.includes(n)) baseNames.push(n)
    }
  }
  for (const baseName of baseNames) {
    const dirsOf = (...rest: string[]): string[] => bases.map((b) => path.join(path.dirname(b), baseName, ...rest))
    const tenants = new Set(bases.flatMap((b) => subdirs(path.join(path.dirname(b), baseName))))
    for (const tenant of tenants) {
      const children = new Set(dirsOf(tenant).flatMap(subdirs).filter(isStaleChild))
      for (const child of children) {
        if (Date.now() >= deadline) {
          result.left++
          continue
        }
        const dirs = dirsOf(tenant, child)
        const killFile = path.join(dirs[0] as string, 'cgroup.kill')
        result.processes += await killLoop(
          path.join(dirs[0] as string, 'cgroup.procs'),
          existsSync(killFile) ? killFile : undefined,
          Math.min(deadline, Date.now() + 5000)
        )
        let gone = true
        for (const d of dirs) gone = await removeDir(d) && gone
        if (gone) result.groups++
        else result.left++
      }
      if (children.size > 0) {
        // Only when empty (rmdir refuses otherwise): a live gateway's commands keep it.
        for (const d of dirsOf(tenant)) { try { rmdirSync(d) } catch {} }
      }
    }
  }
  return result
}

let sequence = 0
function childName (): string {
  sequence = (sequence + 1) % 1e9
  return `c${process.pid}-${sequence}`
}

/** Group names are built from tenant keys (validated upstream); checked again: they become paths. */
function assertGroupName (name: string): void {
  if (!/^[A-Za-z0-9_][A-Za-z0-9_.-]{0,80}$/.test(name)) throw new Error('invalid cgroup name')
}

/** The cap switched by contention (cpu-cap.ts), or none when SANDBOX_TENANT_CPUS is 0. */
function contentionCap (limits: CgroupLimits, basePidsFile: string, tenant: (groupName: string) => CapTarget): ContentionCap | undefined {
  if (limits.cpus <= 0) return undefined
  return new ContentionCap({ basePidsFile: existsSync(basePidsFile) ? basePidsFile : undefined, target: tenant })
}

function v1 (bases: ReadonlyMap<string, string>, limits: CgroupLimits, made: string[]): Cgroups {
  const configured = new Set<string>()
  const tenantDirs = (name: string): Map<string, string> => new Map([...bases].map(([c, b]) => [c, path.join(b, name)]))
  const cap = contentionCap(limits, path.join(bases.get('pids') as string, 'pids.current'), (name) => ({
    pidsFile: path.join(bases.get('pids') as string, name, 'pids.current'),
    set: (capped) => { write(path.join(bases.get('cpu') as string, name, 'cpu.cfs_quota_us'), capped ? String(cfsQuota(limits.cpus)) : '-1') }
  }))
  return {
    mode: 'v1',
    detail: `cgroup v1 (${[...bases.values()].join(', ')})`,
    commandGroup: (groupName) => {
      assertGroupName(groupName)
      const tenant = tenantDirs(groupName)
      const configure = (): void => {
        for (const d of tenant.values()) mkdirp(d)
        const cpu = tenant.get('cpu') as string
        write(path.join(cpu, 'cpu.shares'), String(V1_CPU_SHARES))
        write(path.join(cpu, 'cpu.cfs_period_us'), String(CFS_PERIOD_US))
        write(path.join(cpu, 'cpu.cfs_quota_us'), limits.cpus > 0 ? String(cfsQuota(limits.cpus)) : '-1')
        write(path.join(tenant.get('memory') as string, 'memory.limit_in_bytes'), String(limits.memoryBytes))
        write(path.join(tenant.get('pids') as string, 'pids.max'), String(limits.pids))
        configured.add(groupName)
      }
      if (!configured.has(groupName)) {
        configure()
        sweepStale([...tenant.values()], tenant.get('pids') as string)
      }
      const child = childName()
      const dirs = [...tenant.values()].map((d) => path.join(d, child))
      makeChildGroups(dirs, configure)
      const pidsProcs = path.join(tenant.get('pids') as string, child, 'cgroup.procs')
      const killAll = async (): Promise<void> => { await killLoop(pidsProcs, undefined) }
      cap?.enter(groupName)
      let left = false
      return {
        procsFiles: dirs.map((d) => path.join(d, 'cgroup.procs')),
        killAll,
        remove: async () => {
          await killAll()
          if (!left) cap?.leave(groupName)
          left = true
          for (const d of dirs) await removeDir(d)
        }
      }
    },
    sweep: async (budgetMs) => await sweepAll([bases.get('pids') as string, ...[...bases].filter(([c]) => c !== 'pids').map(([, b]) => b)], budgetMs),
    close: async () => {
      cap?.close()
      for (const name of configured) for (const d of tenantDirs(name).values()) await removeDir(d)
      for (const d of made.reverse()) await removeDir(d)
    }
  }
}

function v2 (base: string, limits: CgroupLimits, made: string[]): Cgroups {
  const configured = new Set<string>()
  const cpuMax = (capped: boolean): string => `${limits.cpus > 0 && capped ? String(cfsQuota(limits.cpus)) : 'max'} ${CFS_PERIOD_US}`
  const cap = contentionCap(limits, path.join(base, 'pids.current'), (name) => ({
    pidsFile: path.join(base, name, 'pids.current'),
    set: (capped) => { write(path.join(base, name, 'cpu.max'), cpuMax(capped)) }
  }))
  return {
    mode: 'v2',
    detail: `cgroup v2 (${base})`,
    commandGroup: (groupName) => {
      assertGroupName(groupName)
      const tenant = path.join(base, groupName)
      const configure = (): void => {
        mkdirp(tenant)
        write(path.join(tenant, 'cpu.weight'), String(V2_CPU_WEIGHT))
        write(path.join(tenant, 'cpu.max'), cpuMax(true))
        write(path.join(tenant, 'memory.max'), String(limits.memoryBytes))
        try { write(path.join(tenant, 'memory.swap.max'), '0') } catch {}
        write(path.join(tenant, 'pids.max'), String(limits.pids))
        configured.add(groupName)
      }
      if (!configured.has(groupName)) {
        configure()
        sweepStale([tenant], tenant)
      }
      const dir = path.join(tenant, childName())
      makeChildGroups([dir], configure)
      const killFile = existsSync(path.join(dir, 'cgroup.kill')) ? path.join(dir, 'cgroup.kill') : undefined
      const killAll = async (): Promise<void> => { await killLoop(path.join(dir, 'cgroup.procs'), killFile) }
      cap?.enter(groupName)
      let left = false
      return {
        procsFiles: [path.join(dir, 'cgroup.procs')],
        killAll,
        remove: async () => {
          await killAll()
          if (!left) cap?.leave(groupName)
          left = true
          await removeDir(dir)
        }
      }
    },
    sweep: async (budgetMs) => await sweepAll([base], budgetMs),
    close: async () => {
      cap?.close()
      for (const name of configured) await removeDir(path.join(base, name))
      for (const d of made.reverse()) await removeDir(d)
    }
  }
}

/**
 * Makes a command's child groups under its tenant's. The tenant's group is shared by every gateway
 * on the host with the same cgroup base (instances of one cluster, side by side): one that closes
 * removes it when nothing of it runs, so a group found missing is made again, with its limits.
 */
function makeChildGroups (dirs: readonly string[], configureTenant: () => void): void {
  try {
    for (const d of dirs) mkdirSync(d, { mode: 0o755 })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    configureTenant()
    for (const d of dirs) {
      try {
        mkdirSync(d, { mode: 0o755 })
      } catch (e) {
        // Made before the first attempt failed on a later controller.
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e
      }
    }
  }
}

/** mkdir -p that records what it created (to remove it on close). */
function makeTracked (dir: string, made: string[]): void {
  const missing: string[] = []
  for (let d = dir; !existsSync(d); d = path.dirname(d)) missing.unshift(d)
  for (const d of missing) {
    mkdirSync(d, { mode: 0o755 })
    made.push(d)
  }
}

function enableV2Controllers (dir: string): void {
  const available = readFileSync(path.join(dir, 'cgroup.controllers'), 'utf8').trim().split(/\s+/)
  for (const c of ['cpu', 'memory', 'pids']) {
    if (!available.includes(c)) throw new Error(`controller ${c} is not delegated to ${dir}`)
  }
  write(path.join(dir, 'cgroup.subtree_control'), '+cpu +memory +pids')
}

/**
 * Finds a writable cgroup hierarchy. `root`: SANDBOX_CGROUP_ROOT (`none` turns cgroups off; a
 * directory of a cgroup v2 mount; otherwise a path inside each v1 controller hierarchy). Default:
 * a group named `name` (`tool-gateway`, or the deployment's `tool-gateway-<uid range>`, see
 * host-claim.ts) under this process's own group (v1: in each of cpu, memory and pids; v2: next to
 * it, under its parent, since a v2 group with processes cannot delegate controllers).
 * Any failure means no cgroups, with the reason in `detail`.
 */
export function setUpCgroups (root: string | undefined, limits: CgroupLimits, name: string = ROOT_NAME): Cgroups {
  if (name !== ROOT_NAME && !new RegExp(`^${ROOT_NAME}-[A-Za-z0-9_.-]{1,64}$`).test(name)) throw new TypeError(`invalid cgroup base name ${name}`)
  if (root === 'none') return none('SANDBOX_CGROUP_ROOT=none')
  const all = mounts()
  const own = ownGroups()
  const made: string[] = []
  try {
    const unified = all.find((m) => m.type === 'cgroup2' && existsSync(path.join(m.dir, 'cgroup.controllers')) &&
      readFileSync(path.join(m.dir, 'cgroup.controllers'), 'utf8').includes('memory'))
    if (root !== undefined && path.isAbsolute(root) && existsSync(path.join(root, 'cgroup.controllers'))) {
      enableV2Controllers(root)
      return v2(root, limits, made)
    }
    const v1Mounts = new Map<string, string>()
    for (const c of V1_CONTROLLERS) {
      const m = all.find((x) => x.type === 'cgroup' && x.options.includes(c))
      if (m !== undefined) v1Mounts.set(c, m.dir)
    }
    if (v1Mounts.size === V1_CONTROLLERS.length) {
      const bases = new Map<string, string>()
      for (const [c, mountDir] of v1Mounts) {
        const inside = root ?? path.join(own.get(c) ?? '/', name)
        const base = path.join(mountDir, path.resolve('/', inside))
        makeTracked(base, made)
        bases.set(c, base)
      }
      const memBase = bases.get('memory') as string
      // Without hierarchy a child's usage would not count against the tenant's limit (old kernels).
      if (existsSync(path.join(memBase, 'memory.use_hierarchy')) && readFileSync(path.join(memBase, 'memory.use_hierarchy'), 'utf8').trim() !== '1') {
        write(path.join(memBase, 'memory.use_hierarchy'), '1')
      }
      return v1(bases, limits, made)
    }
    if (unified !== undefined) {
      const ownPath = own.get('') ?? '/'
      const base = root !== undefined ? path.join(unified.dir, path.resolve('/', root)) : path.join(unified.dir, path.dirname(path.resolve('/', ownPath)), name)
      makeTracked(base, made)
      enableV2Controllers(path.dirname(base))
      enableV2Controllers(base)
      return v2(base, limits, made)
    }
    return none('no cgroup v1 cpu/memory/pids controllers and no cgroup v2 mount with them')
  } catch (err) {
    for (const d of made.reverse()) { try { rmdirSync(d) } catch {} }
    const e = err as NodeJS.ErrnoException
    return none(`cgroups not writable (${e.code ?? e.message})`)
  }
}
