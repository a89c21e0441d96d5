/**
 * The tenant CPU cap under contention only (src/builtin/sandbox/cpu-cap.ts), on real cgroup v1 groups
 * and real sandboxed processes: a tenant alone runs uncapped (its two busy threads are never throttled);
 * another tenant's command, from this gateway or from another one on the same base, puts the cap back.
 */
import assert from 'node:assert/strict'
import { existsSync, readFileSync, rmdirSync } from 'node:fs'
import { chmod, mkdtemp, realpath, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { createSandbox } from '../../../../src/builtin/sandbox/create-sandbox.js'
import type { Sandbox, SandboxedProcess } from '../../../../src/builtin/sandbox/types.js'
import { waitUntil } from '../../../../scripts/lib/proc.js'
import { testWorkspace } from '../../../helpers/workspace.js'

const isRoot = process.getuid?.() === 0
const hasV1 = existsSync('/sys/fs/cgroup/pids/cgroup.procs') && existsSync('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')
const skip = (!isRoot || !hasV1) && 'needs root and cgroup v1 cpu/pids'

/** Half a CPU over the 10 ms period. */
const LIMITS = { memoryBytes: 256 * 1024 * 1024, pids: 64, cpus: 0.5 }
const CAPPED = '5000'
const CONTROLLERS = ['cpu', 'memory', 'pids'] as const

const read = (file: string): string => readFileSync(file, 'utf8').trim()
const throttled = (cpuDir: string): number => Number(/^nr_throttled (\d+)$/m.exec(read(join(cpuDir, 'cpu.stat')))?.[1])

test('the tenant CPU cap is lifted while the tenant is alone on the cgroup base, and put back when another tenant starts a command ' +
  '(in this gateway at once, from another gateway on the same base within its poll) and when the tenant\'s last command ends',
{ skip, timeout: 90_000 }, async (t) => {
  // A base of its own: other tests' sandboxes on this machine would be contention (they are other tenants).
  const root = `tool-gateway-captest-${process.pid}`
  const sb = await createSandbox({ mode: 'bwrap', cgroupRoot: root, tenantLimits: LIMITS })
  t.after(async () => {
    await sb.close()
    // Left only if the test failed midway (another gateway's group still in it): this test's own base.
    for (const c of CONTROLLERS) { try { rmdirSync(`/sys/fs/cgroup/${c}/${root}`) } catch {} }
  })
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'tg-cap-')))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  await chmod(dir, 0o711)
  const cpuBase = `/sys/fs/cgroup/cpu/${root}`
  const pidsBase = `/sys/fs/cgroup/pids/${root}`
  // Each tenant its own workspace, handed to its uid.
  const ws = async (tenant: string, uid: number): Promise<ReturnType<typeof testWorkspace>> => {
    const w = testWorkspace(await mkdtemp(join(dir, `${tenant}-`)), { tenant, owner: { uid, gid: uid } })
    await sb.prepareWorkspace(w)
    return w
  }
  const a = await ws('cap-a', 231_001)
  const b = await ws('cap-b', 231_002)
  const quotaOf = (tenant: string): string => read(join(cpuBase, `t-${tenant}`, 'cpu.cfs_quota_us'))
  const started: SandboxedProcess[] = []
  const start = (s: Sandbox, w: typeof a, command: string): SandboxedProcess => {
    const p = s.spawn({ workspace: w, command, cwd: w.root, stdin: 'ignore' })
    p.stdout.resume()
    p.stderr.resume()
    started.push(p)
    return p
  }
  t.after(async () => { for (const p of started) p.kill() })
  // The probe's processes and the namespace inits of ended commands count until they are reaped.
  const baseEmpty = async (): Promise<void> => { await waitUntil('nothing left under the base', () => read(join(pidsBase, 'pids.current')) === '0', 15_000) }

  // Alone: two busy threads for 0.4 s run on both cores, never throttled.
  await baseEmpty()
  const burn = 'for i in 1 2; do (end=$(($(date +%s%N)+400000000)); while [ $(date +%s%N) -lt $end ]; do :; done) & done; wait'
  let r = await sb.exec({ workspace: a, command: burn, cwd: a.root, timeoutMs: 20_000, maxOutputBytes: 1024 })
  assert.equal(r.exitCode, 0, r.stderr)
  const cpuA = join(cpuBase, 't-cap-a')
  assert.equal(throttled(cpuA), 0, 'a tenant alone is never throttled')
  assert.equal(quotaOf('cap-a'), CAPPED, 'capped again once its last command ended')

  // While A's command runs alone its cap is lifted; B's command starting puts it back before B runs.
  await baseEmpty()
  const holdA = start(sb, a, 'exec sleep 60')
  assert.equal(await holdA.started, true)
  assert.equal(quotaOf('cap-a'), '-1')
  const holdB = start(sb, b, 'exec sleep 60')
  assert.equal(quotaOf('cap-a'), CAPPED, 'capped synchronously, before B\'s command was spawned')
  assert.equal(quotaOf('cap-b'), CAPPED)
  // Under contention the same burners are throttled to the tenant's half CPU.
  const before = throttled(cpuA)
  r = await sb.exec({ workspace: a, command: burn, cwd: a.root, timeoutMs: 20_000, maxOutputBytes: 1024 })
  assert.equal(r.exitCode, 0, r.stderr)
  assert.ok(throttled(cpuA) > before, 'throttled while B has a process')
  holdB.kill()
  await holdB.exited
  holdA.kill()
  await holdA.exited
  assert.equal(quotaOf('cap-a'), CAPPED)

  // Another gateway on the same base: it cannot know A is uncapped here; this gateway sees B's processes in the base's count.
  const other = await createSandbox({ mode: 'bwrap', cgroupRoot: root, tenantLimits: LIMITS })
  t.after(async () => { await other.close() })
  await baseEmpty()
  const holdA2 = start(sb, a, 'exec sleep 60')
  assert.equal(await holdA2.started, true)
  assert.equal(quotaOf('cap-a'), '-1')
  const holdB2 = start(other, b, 'exec sleep 60')
  assert.equal(await holdB2.started, true)
  await waitUntil('A is capped again', () => quotaOf('cap-a') === CAPPED, 5000)

  // The other gateway's command and group first: while they exist, the base cannot be removed.
  for (const p of [holdA2, holdB2]) p.kill()
  await Promise.all([holdA2.exited, holdB2.exited])
  await other.close()
  await sb.close()
  await waitUntil('the base is removed', () => CONTROLLERS.every((c) => !existsSync(`/sys/fs/cgroup/${c}/${root}`)), 5000)
})

test('with SANDBOX_TENANT_CPUS=0 there is no cap to lift: the quota stays off', { skip, timeout: 30_000 }, async (t) => {
  const root = `tool-gateway-captest0-${process.pid}`
  const sb = await createSandbox({ mode: 'bwrap', cgroupRoot: root, tenantLimits: { ...LIMITS, cpus: 0 } })
  t.after(async () => { await sb.close() })
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'tg-cap-')))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  const ws = testWorkspace(dir, { tenant: 'cap-z', owner: { uid: 231_003, gid: 231_003 } })
  const r = await sb.exec({ workspace: ws, command: 'true', cwd: dir, timeoutMs: 20_000, maxOutputBytes: 1024 })
  assert.equal(r.exitCode, 0, r.stderr)
  assert.equal(read(`/sys/fs/cgroup/cpu/${root}/t-cap-z/cpu.cfs_quota_us`), '-1')
})
