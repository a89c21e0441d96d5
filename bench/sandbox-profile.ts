/**
 * The sandbox's own cost on heavy commands, by elimination (README, Performance: 5.1c and 5.8).
 * `npx tsx bench/sandbox-profile.ts` as root (cgroup v1 for the cgroup layers): the grep tool's rg over
 * the bench's 50,000-file tree, and a syscall-heavy dd, each spawned with one more layer of the sandbox
 * at a time, all interleaved in the same rounds. Not a `npm run bench` module: a profile, no targets.
 * PROFILE_REPS (default 9) rounds; prints the median ms of each layer and its ratio to the bare command.
 */
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs'
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import path from 'node:path'
import type { Writable } from 'node:stream'
import { buildBwrapArgs, buildPrlimitArgs } from '../src/builtin/sandbox/bwrap-args.js'
import { createSandbox } from '../src/builtin/sandbox/create-sandbox.js'
import { buildSeccompFilter, seccompArgs, writeSeccompFilter } from '../src/builtin/sandbox/seccomp.js'
import { detectHostLayout, writeSandboxEtc } from '../src/builtin/sandbox/system-files.js'
import { rgArgs, shellQuote } from '../src/builtin/tools/grep/rg.js'
import type { Workspace } from '../src/builtin/types.js'
import { generateTree } from './fixtures/tree.js'
import { median, round, timeInterleaved } from './stats.js'

const REPS = Number(process.env.PROFILE_REPS ?? '9')
const UID = 65534
const BASE = 'tool-gateway-profile'
const CONTROLLERS = ['cpu', 'memory', 'pids'] as const
/** The same limits the sandbox's tenant groups get by default on this host (memory, pids, one CPU over 10 ms). */
const GROUPS = { free: '-1', capped: '10000' } as const
const WORKSPACE = (root: string): Workspace => ({
  tenant: 'profile',
  workspaceId: 'tree',
  root,
  readRoots: [],
  owner: { uid: UID, gid: UID },
  limits: { readMaxChars: 1, commandTimeoutMs: 60_000, bashLogChars: 1, maxProcessOutputChars: 1, outputMaxChars: 1 }
})

if (process.getuid?.() !== 0) throw new Error('run as root: the sandbox drops to another uid, and the cgroup layers need it')
const hasV1 = CONTROLLERS.every((c) => existsSync(`/sys/fs/cgroup/${c}/cgroup.procs`))
/** CPU time of each layer's whole process tree (bwrap's namespace included): a cgroup v1 cpuacct group per layer. */
const ACCT = '/sys/fs/cgroup/cpuacct'
const hasAcct = existsSync(path.join(ACCT, 'cpuacct.usage'))

const dir = await mkdtemp(path.join(tmpdir(), 'tg-sbprof-'))
await chmod(dir, 0o711)
const tree = path.join(dir, 'tree')
await generateTree(tree, { topDirs: 20, subdirs: 50, filesPerDir: 50, needleEvery: 50, seed: 42 })
await chown(tree, UID, UID)
const etc = await writeSandboxEtc()
const layout = await detectHostLayout()
const filter = buildSeccompFilter()
const sandbox = await createSandbox({ mode: 'bwrap', cgroupRoot: `${BASE}-sandbox` })

const groupDirs: string[] = []
const procsFiles = (name: keyof typeof GROUPS): string[] => CONTROLLERS.map((c) => path.join('/sys/fs/cgroup', c, BASE, name, 'cgroup.procs'))
if (hasV1) {
  for (const [name, quota] of Object.entries(GROUPS)) {
    for (const c of CONTROLLERS) {
      const d = path.join('/sys/fs/cgroup', c, BASE, name)
      mkdirSync(d, { recursive: true })
      groupDirs.push(d)
    }
    writeFileSync(path.join('/sys/fs/cgroup/cpu', BASE, name, 'cpu.cfs_period_us'), '10000')
    writeFileSync(path.join('/sys/fs/cgroup/cpu', BASE, name, 'cpu.cfs_quota_us'), quota)
    writeFileSync(path.join('/sys/fs/cgroup/memory', BASE, name, 'memory.limit_in_bytes'), String(2 * 1024 ** 3))
    writeFileSync(path.join('/sys/fs/cgroup/pids', BASE, name, 'pids.max'), '512')
  }
}

/** The layer's cpuacct group (made on first use), or undefined without cpuacct. */
function acctDir (layer: string): string | undefined {
  if (!hasAcct) return undefined
  const d = path.join(ACCT, BASE, layer.replace(/[^a-z0-9]+/gi, '-'))
  if (!existsSync(d)) {
    mkdirSync(d, { recursive: true })
    groupDirs.push(d)
  }
  return d
}
const usageMs = (d: string): number => Number(readFileSync(path.join(d, 'cpuacct.usage'), 'utf8')) / 1e6

/** Runs argv to its end, in `acct` when given; with `seccomp`, the filter goes in on fd 3. */
function run (argv: readonly string[], seccomp = false, acct?: string): Promise<void> {
  const full = acct === undefined ? argv : ['/bin/sh', '-c', 'echo $$ > "$1"; shift; exec "$@"', 'acct', path.join(acct, 'cgroup.procs'), ...argv]
  return new Promise((resolve, reject) => {
    const child = spawn(full[0] as string, full.slice(1), { stdio: ['ignore', 'pipe', 'pipe', ...(seccomp ? ['pipe' as const] : [])] })
    child.stdout?.resume()
    let err = ''
    child.stderr?.on('data', (d: Buffer) => { err += String(d) })
    if (seccomp && filter !== undefined) writeSeccompFilter(child.stdio[3] as Writable, filter)
    child.on('error', reject)
    child.on('close', (code) => { code === 0 ? resolve() : reject(new Error(`${argv.slice(0, 3).join(' ')} exited ${String(code)}: ${err.slice(0, 300)}`)) })
  })
}

async function profile (label: string, command: string): Promise<void> {
  const drop = ['/usr/bin/setpriv', `--reuid=${UID}`, `--regid=${UID}`, '--clear-groups', '--']
  const sh = ['/bin/sh', '-c', command]
  const bwrap = (seccomp: boolean): string[] => buildPrlimitArgs(sandbox.limits, ['/usr/bin/bwrap', ...(seccomp ? seccompArgs(3) : []), ...buildBwrapArgs({
    workspaceRoot: tree, readRoots: [], cwd: tree, command, etc, layout, tmpSizeBytes: sandbox.limits.tmpSizeBytes
  })])
  const inGroup = (name: keyof typeof GROUPS, argv: readonly string[]): string[] =>
    ['/bin/sh', '-c', 'for f in "$1" "$2" "$3"; do echo $$ > "$f"; done; shift 3; exec "$@"', 'launch', ...procsFiles(name), ...argv]
  const cpu: Record<string, number[]> = {}
  const layers: Record<string, () => Promise<void>> = {}
  // Outside cgroups of their own, each layer's tree runs in its cpuacct group (the cgroup layers use
  // their own cpu/memory/pids groups; cpuacct is a separate v1 hierarchy, so they get one too).
  const layer = (name: string, argv: readonly string[], seccomp = false): void => {
    const acct = acctDir(name)
    cpu[name] = []
    layers[name] = async () => {
      const before = acct !== undefined ? usageMs(acct) : 0
      await run(argv, seccomp, acct)
      if (acct !== undefined) cpu[name]?.push(usageMs(acct) - before)
    }
  }
  layer('bare', sh)
  layer('as the sandbox uid', [...drop, ...sh])
  layer('+ prlimit', [...drop, '/usr/bin/prlimit', ...buildPrlimitArgs(sandbox.limits, sh)])
  layer('+ bwrap (namespaces, mounts)', [...drop, '/usr/bin/prlimit', ...bwrap(false)])
  layer('+ seccomp filter', [...drop, '/usr/bin/prlimit', ...bwrap(true)], true)
  if (hasV1) {
    layer('+ cgroups, no CPU quota', inGroup('free', [...drop, '/usr/bin/prlimit', ...bwrap(true)]), true)
    layer('+ cgroups, one-CPU quota (before)', inGroup('capped', [...drop, '/usr/bin/prlimit', ...bwrap(true)]), true)
  }
  layers['the sandbox (tenant alone)'] = async () => {
    const p = sandbox.spawn({ workspace: WORKSPACE(tree), command, cwd: tree, stdin: 'ignore' })
    p.stdout.resume()
    p.stderr.resume()
    const info = await p.exited
    if (info.exitCode !== 0) throw new Error(`sandboxed ${label} exited ${String(info.exitCode)}`)
  }
  const throttled = (): number => hasV1 ? Number(/^nr_throttled (\d+)$/m.exec(readFileSync(path.join('/sys/fs/cgroup/cpu', BASE, 'capped', 'cpu.stat'), 'utf8'))?.[1]) : 0
  const before = throttled()
  const t = await timeInterleaved(layers, { warmup: 1, reps: REPS })
  const bare = median(t.bare ?? [])
  console.log(`\n${label}: median of ${REPS} interleaved rounds`)
  const bareCpu = median(cpu.bare ?? [])
  console.log('| layer | median ms | vs bare | CPU ms (all its processes) | vs bare |\n|---|---:|---:|---:|---:|')
  for (const [name, xs] of Object.entries(t)) {
    const c = cpu[name] ?? []
    const cpuCols = c.length > 0 ? `${round(median(c))} | ${round(median(c) / bareCpu)}x` : '- | -'
    console.log(`| ${name} | ${round(median(xs))} | ${round(median(xs) / bare)}x | ${cpuCols} |`)
  }
  if (hasV1) console.log(`one-CPU quota layer: ${throttled() - before} throttled CFS periods`)
}

try {
  const flags = rgArgs({ pattern: 'NEEDLE_[0-9]+', caseInsensitive: false, includeGlob: undefined }, tree)
  await profile('rg with the grep tool\'s flags over 50,000 files', `exec rg ${flags.map(shellQuote).join(' ')}`)
  await profile('dd bs=1, 600,000 read/write syscalls', 'exec dd if=/dev/zero of=/dev/null bs=1 count=300000 status=none')
  console.log(`\nload average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`)
} finally {
  await sandbox.close()
  await etc.remove()
  for (const d of groupDirs.reverse()) { try { rmdirSync(d) } catch {} }
  for (const c of [...CONTROLLERS, 'cpuacct']) { try { rmdirSync(path.join('/sys/fs/cgroup', c, BASE)) } catch {} }
  await rm(dir, { recursive: true, force: true })
}
