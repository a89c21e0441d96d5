// test-runner: alone
/**
 * Tenant isolation in the bash sandbox (docs/ARCHITECTURE.md#isolation): one tenant's processes must
 * not exhaust another tenant's process budget, and a sandbox that cannot start is a tool error.
 * Runs the real gateway process with SANDBOX=bwrap.
 */
import assert from 'node:assert/strict'
import { chown, lchown, lstat, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startGateway, type GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { allProcesses, waitUntil } from '../../scripts/lib/proc.js'

const isRoot = process.getuid?.() === 0

interface InvokeResult { isError: boolean, output: string, error: { code: string, message: string } | null }

async function invoke (gw: GatewayProcess, userId: string, name: string, args: Record<string, unknown>, workspaceId?: string): Promise<InvokeResult> {
  const res = await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, userId, arguments: args, ...(workspaceId !== undefined ? { context: { workspaceId } } : {}) }),
    signal: AbortSignal.timeout(60_000)
  })
  assert.equal(res.status, 200, await res.clone().text())
  return await res.json() as InvokeResult
}

async function gateway (t: { after: (fn: () => unknown) => void }, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-tenants-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  const gw = await startGateway(t, {
    SANDBOX: 'bwrap',
    WORKSPACES_DIR: dir,
    RATE_LIMIT_PER_MINUTE: '1000000',
    MAX_CONCURRENT_PER_TENANT: '64',
    ...env
  })
  t.after(async () => { await gw.stop(5000) })
  return gw
}

/**
 * Waits until at least `min` `sleep 311` processes exist (311: a length no other test file uses, so
 * processes of test files running beside this one are never counted) and their count stopped growing (a shell
 * may give up at its first failed fork, so "all spawned" cannot be awaited by output).
 */
async function sleepsSettled (min: number): Promise<void> {
  let last = -1
  await waitUntil(`${min} sleeping processes`, async () => {
    const n = (await allProcesses()).filter((p) => p.cmdline === 'sleep 311' && p.state !== 'Z').length
    const settled = n === last && n >= min
    last = n
    await new Promise((resolve) => setTimeout(resolve, 300))
    return settled
  }, 30_000)
}

/** B's `bash exec true`: must run and exit 0. */
async function assertBashWorks (gw: GatewayProcess, userId: string, what: string): Promise<void> {
  const r = await invoke(gw, userId, 'bash', { action: 'exec', command: 'echo ok-$(id -u)' })
  assert.equal(r.isError, false, `${what}: ${r.output}`)
  const out = JSON.parse(r.output) as { exitCode: number, stdout: string, stderr: string }
  assert.equal(out.exitCode, 0, `${what}: ${out.stderr}`)
  assert.match(out.stdout, /^ok-\d+/)
}

test('a tree of 250 sleeping children in tenant A does not stop ' +
  'tenant B\'s bash', { timeout: 120_000, skip: !isRoot && 'needs root (per-tenant uids)' }, async (t) => {
  const gw = await gateway(t)
  await assertBashWorks(gw, 'tenant-b', 'idle')
  const start = await invoke(gw, 'tenant-a', 'bash', {
    action: 'start',
    command: 'i=0; while [ $i -lt 250 ]; do sleep 311 & i=$((i+1)); done; echo spawned; wait'
  })
  assert.equal(start.isError, false, start.output)
  await sleepsSettled(200)
  for (let i = 0; i < 5; i++) await assertBashWorks(gw, 'tenant-b', `B while A holds its tree (${i})`)
  // The two tenants' commands run as different host uids.
  const sleeps = (await allProcesses()).filter((p) => p.cmdline === 'sleep 311')
  assert.ok(sleeps.length > 0)
  const uidsOfA = new Set(sleeps.map((p) => p.uid))
  assert.equal(uidsOfA.size, 1)
  assert.ok(![0, 65534].includes([...uidsOfA][0] as number), `A's commands run as uid ${[...uidsOfA][0]}`)
})

test('~90 background sleeps of tenant A across workspaces do not stop ' +
  'tenant B\'s bash', { timeout: 150_000, skip: !isRoot && 'needs root (per-tenant uids)' }, async (t) => {
  const gw = await gateway(t)
  let started = 0
  for (let w = 0; w < 12 && started < 90; w++) {
    for (let i = 0; i < 8 && started < 90; i++) {
      const r = await invoke(gw, 'tenant-a', 'bash', { action: 'start', command: 'sleep 311' }, `ws${w}`)
      if (r.isError) break
      started++
    }
  }
  // A per-tenant cap on background processes may stop A earlier; B must work either way.
  assert.ok(started >= 8, `A started only ${started} background processes`)
  for (let i = 0; i < 5; i++) await assertBashWorks(gw, 'tenant-b', `B while A holds ${started} sleeps (${i})`)
})

test('a sandbox that cannot start is a tool error (reason sandbox), not exit 1', { timeout: 120_000, skip: !isRoot && 'needs root' }, async (t) => {
  // One tenant alone exhausting its own process budget: its next command cannot even create the
  // sandbox's namespaces, and that must be reported as the sandbox failing.
  const gw = await gateway(t, { SANDBOX_TENANT_PIDS: '100000' })
  // 253 sleeps + sh + the sandbox's two processes = 256, the per-uid RLIMIT_NPROC: all fit (dash
  // gives up at its first failed fork), and the tenant's next sandbox cannot start.
  const start = await invoke(gw, 'greedy', 'bash', {
    action: 'start',
    command: 'i=0; while [ $i -lt 253 ]; do sleep 311 & i=$((i+1)); done; echo spawned; wait'
  })
  assert.equal(start.isError, false, start.output)
  const { processId } = JSON.parse(start.output) as { processId: string }
  await waitUntil('the tree is spawned', async () => {
    const logs = await invoke(gw, 'greedy', 'bash', { action: 'logs', processId })
    assert.doesNotMatch(logs.output, /EXITED/, logs.output)
    return logs.output.includes('spawned')
  }, 30_000)
  const r = await invoke(gw, 'greedy', 'bash', { action: 'exec', command: 'true' })
  assert.equal(r.isError, true, `expected a tool error, got ${r.output}`)
  assert.equal(r.error?.code, 'GW_SANDBOX_ERROR', JSON.stringify(r.error))
  assert.doesNotMatch(r.output, /\/tmp\/|\/sys\/fs/, 'no host paths in the message')
  // The same for a background process: not a process that "exited 1", but a refused start.
  const bg = await invoke(gw, 'greedy', 'bash', { action: 'start', command: 'sleep 1' })
  assert.equal(bg.isError, true, `expected a tool error, got ${bg.output}`)
  assert.equal(bg.error?.code, 'GW_SANDBOX_ERROR', JSON.stringify(bg.error))
  assert.match(bg.output, /process or memory limit/)
  const list = await invoke(gw, 'greedy', 'bash', { action: 'list' })
  assert.equal((JSON.parse(list.output) as unknown[]).length, 1, 'the failed start is not listed')
})

test('an existing workspace of the shared uid is handed to the tenant\'s uid on first use, ' +
  'without following its symlinks', { timeout: 60_000, skip: !isRoot && 'needs root' }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-handover-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  // As an older gateway left it: everything owned by 65534, and a link to a host file.
  const ws = join(dir, 'legacy', 'default')
  await mkdir(join(ws, 'sub'), { recursive: true })
  await writeFile(join(ws, 'sub', 'f.txt'), 'old\n')
  const outside = join(dir, 'outside.txt')
  await writeFile(outside, 'host\n')
  await symlink(outside, join(ws, 'link'))
  for (const p of [join(dir, 'legacy'), ws, join(ws, 'sub'), join(ws, 'sub', 'f.txt')]) await chown(p, 65534, 65534)
  await lchown(join(ws, 'link'), 65534, 65534)
  const gw = await startGateway(t, { SANDBOX: 'bwrap', WORKSPACES_DIR: dir, RATE_LIMIT_PER_MINUTE: '1000000' })
  t.after(async () => { await gw.stop(5000) })
  const r = await invoke(gw, 'legacy', 'bash', { action: 'exec', command: 'echo new >> sub/f.txt && cat sub/f.txt' })
  assert.equal(r.isError, false, r.output)
  assert.match(r.output, /old\\nnew/)
  const uid = (await stat(ws)).uid
  assert.ok(uid !== 65534 && uid !== 0, `workspace owned by ${uid}`)
  for (const p of [join(dir, 'legacy'), join(ws, 'sub'), join(ws, 'sub', 'f.txt')]) assert.equal((await stat(p)).uid, uid, p)
  assert.equal((await lstat(join(ws, 'link'))).uid, uid, 'the link itself is handed over')
  assert.equal((await stat(outside)).uid, 0, 'the file the link points to is not')
})
