import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdir, mkdtemp, readdir, realpath, rm, rmdir, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { createSandbox } from '../../../../src/builtin/sandbox/create-sandbox.js'
import type { Sandbox } from '../../../../src/builtin/sandbox/types.js'
import { ToolError } from '../../../../src/builtin/types.js'
import { testWorkspace } from '../../../helpers/workspace.js'

const isRoot = process.getuid?.() === 0
const hasV1 = existsSync('/sys/fs/cgroup/pids/cgroup.procs') && existsSync('/sys/fs/cgroup/memory/memory.limit_in_bytes')
const skip = (!isRoot || !hasV1) && 'needs root and cgroup v1 cpu/memory/pids'

async function setup (
  t: { after: (fn: () => Promise<void>) => void },
  tenant: string
): Promise<{ sb: Sandbox, ws: ReturnType<typeof testWorkspace>, pidsDir: string }> {
  const sb = await createSandbox({ mode: 'bwrap', tenantLimits: { memoryBytes: 128 * 1024 * 1024, pids: 64, cpus: 0.5 } })
  t.after(async () => { await sb.close() })
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tg-cg-')))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  const ws = testWorkspace(root, { tenant, owner: { uid: 210_000 + Math.floor(Math.random() * 1000), gid: 210_000 } })
  const pidsBase = /(\/[^ ,()]*\/pids\/[^ ,()]*)/.exec(sb.isolation.cgroupDetail)?.[1]
  assert.ok(pidsBase !== undefined, sb.isolation.cgroupDetail)
  return { sb, ws, pidsDir: join(pidsBase, `t-${tenant}`) }
}

test('cgroups v1: isolation is reported, the command runs in its own child group of its tenant, with the tenant\'s limits, ' +
  'as the workspace owner', { skip, timeout: 60_000 }, async (t) => {
  const { sb, ws, pidsDir } = await setup(t, 'cg-a')
  assert.equal(sb.isolation.cgroup, 'v1')
  assert.match(sb.probe.reason, /cgroup v1/)
  assert.ok(sb.limits.tmpSizeBytes <= 64 * 1024 * 1024, 'tmpfs fits in the tenant\'s memory limit')
  const r = await sb.exec({ workspace: ws, command: 'cat /proc/self/cgroup >/dev/null; echo ok', cwd: ws.root, timeoutMs: 20_000, maxOutputBytes: 65536 })
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal((await stat(ws.root)).uid, ws.owner?.uid, 'the workspace root is handed to its owner')
  assert.equal(readFileSync(join(pidsDir, 'pids.max'), 'utf8').trim(), '64')
  // Half a CPU for all the tenant's commands together: its CFS quota (the share alone lets a fork bomb stall others).
  const cpuDir = pidsDir.replace('/pids/', '/cpu/')
  assert.equal(readFileSync(join(cpuDir, 'cpu.cfs_quota_us'), 'utf8').trim(), '5000')
  assert.equal(readFileSync(join(cpuDir, 'cpu.cfs_period_us'), 'utf8').trim(), '10000')
  // While a command runs, its processes (all of them, as the owner's uid) are in one child group.
  const run = sb.exec({ workspace: ws, command: 'sleep 30 & sleep 30 & wait', cwd: ws.root, timeoutMs: 1500, maxOutputBytes: 1024 })
  await new Promise((resolve) => setTimeout(resolve, 700))
  const children = (await readdir(pidsDir, { withFileTypes: true })).filter((d) => d.isDirectory() && d.name.startsWith(`c${process.pid}-`))
  assert.equal(children.length, 1)
  const pids = readFileSync(join(pidsDir, children[0]?.name ?? '', 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)
  assert.ok(pids.length >= 4, `bwrap, init, sh and the sleeps: ${pids.length}`)
  for (const pid of pids) {
    const uid = /^Uid:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]
    assert.equal(Number(uid), ws.owner?.uid)
  }
  const done = await run
  assert.equal(done.timedOut, true)
  // Killed together, group removed.
  assert.deepEqual((await readdir(pidsDir, { withFileTypes: true })).filter((d) => d.isDirectory() && d.name.startsWith(`c${process.pid}-`)).map((d) => d.name), [])
  for (const pid of pids) assert.equal(existsSync(`/proc/${pid}/status`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8')), false, `pid ${pid} survived`)
})

test('cgroups v1: the tenant\'s pids limit bounds a fork bomb and its memory limit a memory hog (tmpfs included)', { skip, timeout: 60_000 }, async (t) => {
  const { sb, ws } = await setup(t, 'cg-b')
  const bomb = await sb.exec({
    workspace: ws,
    command: 'b() { b | b & }; b; sleep 2; cat /sys/fs/cgroup/pids.current 2>/dev/null; echo done',
    cwd: ws.root,
    timeoutMs: 15_000,
    maxOutputBytes: 4096
  })
  assert.equal(bomb.timedOut, false)
  // Filling /tmp (tmpfs) beyond the tenant's 128 MiB is charged to the tenant: the writer is killed or stopped.
  const fill = await sb.exec({
    workspace: ws,
    command: 'head -c 100M /dev/zero > /tmp/a; head -c 100M /dev/zero | tail >/dev/null; echo "tail=$?"',
    cwd: ws.root,
    timeoutMs: 20_000,
    maxOutputBytes: 4096
  })
  assert.equal(fill.timedOut, false)
  assert.match(fill.stdout, /tail=137/, `the memory hog is killed at the tenant limit: ${fill.stdout} ${fill.stderr}`)
  assert.match(fill.stderr, /No space left/, '/tmp is capped below the tenant\'s memory')
})

test('a sandbox that cannot start ' +
  '(bwrap fails before the command) is a ToolError with reason sandbox', { skip: !isRoot && 'needs root', timeout: 30_000 }, async (t) => {
  const sb = await createSandbox({ mode: 'bwrap' })
  t.after(async () => { await sb.close() })
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tg-cg-')))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  // A read root that does not exist: bwrap cannot bind it and exits 1 with its own message.
  const ws = testWorkspace(root, { readRoots: [{ name: 'gone', path: join(root, 'missing-dir') }] })
  await assert.rejects(
    sb.exec({ workspace: ws, command: 'echo should-not-run', cwd: root, timeoutMs: 10_000, maxOutputBytes: 1024 }),
    (err: unknown) => err instanceof ToolError && err.reason === 'sandbox' && !err.message.includes(root)
  )
  // The command's own failure stays an ordinary result.
  const own = await sb.exec({
    workspace: testWorkspace(root),
    command: 'echo "bwrap: not really" >&2; echo out; exit 1',
    cwd: root,
    timeoutMs: 10_000,
    maxOutputBytes: 1024
  })
  assert.equal(own.exitCode, 1)
})

test('cgroups: two gateways on one host share a tenant\'s group; ' +
  'one closing (it removes the group) does not break the other\'s next command', { skip, timeout: 60_000 }, async (t) => {
  // Instances of a cluster on one machine (and test files run side by side) get the same cgroup base.
  const first = await setup(t, 'cg-shared')
  const second = await createSandbox({ mode: 'bwrap', tenantLimits: { memoryBytes: 128 * 1024 * 1024, pids: 64, cpus: 0.5 } })
  t.after(async () => { await second.close() })
  const run = async (sb: Sandbox): Promise<number | null> =>
    (await sb.exec({ workspace: first.ws, command: 'echo ok', cwd: first.ws.root, timeoutMs: 20_000, maxOutputBytes: 1024 })).exitCode
  assert.equal(await run(first.sb), 0)
  assert.equal(await run(second), 0)
  await first.sb.close()
  assert.equal(existsSync(first.pidsDir), false, 'closing removed the tenant group (nothing of it was running)')
  assert.equal(await run(second), 0, 'the other gateway made the group again')
  assert.equal(readFileSync(join(first.pidsDir, 'pids.max'), 'utf8').trim(), '64', 'with its limits')
})

/** The v1 controller directories a sandbox's groups go in (from its cgroupDetail). */
function basesOf (sb: Sandbox): string[] {
  const inside = /^cgroup v1 \((.*)\)$/.exec(sb.isolation.cgroupDetail)?.[1]
  assert.ok(inside !== undefined, sb.isolation.cgroupDetail)
  return inside.split(', ')
}

test('cgroups v1: at start-up the command groups of a gateway that is gone (SIGKILLed) are swept, their processes killed; ' +
  'a live gateway\'s groups stay', { skip, timeout: 60_000 }, async (t) => {
  const limits = { memoryBytes: 128 * 1024 * 1024, pids: 64, cpus: 1 }
  const first = await createSandbox({ mode: 'bwrap', tenantLimits: limits })
  const bases = basesOf(first)
  await first.close()
  // A gone gateway's pid (a process that has exited) and a live one's (a sleeper standing in for it).
  const gone = spawn('true')
  await new Promise((resolve) => gone.once('exit', resolve))
  assert.ok(gone.pid !== undefined && !existsSync(`/proc/${gone.pid}`))
  const live = spawn('sleep', ['300'], { stdio: 'ignore' })
  t.after(() => { live.kill('SIGKILL') })
  // What the gone gateway left: a tenant group with a command group that still holds its process.
  const survivor = spawn('sleep', ['301'], { stdio: 'ignore', detached: true })
  const survivorExit = new Promise<NodeJS.Signals | null>((resolve) => survivor.once('exit', (_c, sig) => resolve(sig)))
  t.after(() => { survivor.kill('SIGKILL') })
  const staleDirs = bases.map((b) => join(b, 't-cg-stale', `c${gone.pid}-1`))
  const liveDirs = bases.map((b) => join(b, 't-cg-stale', `c${live.pid}-1`))
  for (const d of [...staleDirs, ...liveDirs]) await mkdir(d, { recursive: true })
  t.after(async () => {
    for (const d of [...liveDirs, ...staleDirs]) await rmdir(d).catch(() => {})
    for (const b of bases) await rmdir(join(b, 't-cg-stale')).catch(() => {})
  })
  for (const d of staleDirs) await writeFile(join(d, 'cgroup.procs'), String(survivor.pid))
  assert.equal(readFileSync(join(staleDirs[staleDirs.length - 1] ?? '', 'cgroup.procs'), 'utf8').trim(), String(survivor.pid))

  const second = await createSandbox({ mode: 'bwrap', tenantLimits: limits })
  t.after(async () => { await second.close() })
  // Swept before createSandbox returned, without any command of that tenant.
  for (const d of staleDirs) assert.equal(existsSync(d), false, `${d} is left`)
  assert.equal(await survivorExit, 'SIGKILL')
  for (const d of liveDirs) assert.equal(existsSync(d), true, `${d} of a live gateway was removed`)
})
