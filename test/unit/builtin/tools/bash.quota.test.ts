// test-runner: alone
import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readdir, realpath, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { createSandbox } from '../../../../src/builtin/sandbox/create-sandbox.js'
import type { Sandbox } from '../../../../src/builtin/sandbox/types.js'
import { ProcessManager } from '../../../../src/builtin/processes/process-manager.js'
import { createBashTool } from '../../../../src/builtin/tools/bash.js'
import type { Workspace } from '../../../../src/builtin/types.js'
import type { BuiltinTool } from '../../../../src/builtin/tool.js'
import { WorkspaceUsage } from '../../../../src/builtin/workspace/usage.js'

// bash under the workspace quota, in the real bwrap sandbox: RLIMIT_FSIZE at the room left bounds
// one file, the watchdog stops a command (or background process) once the workspace passes the
// quota, by at most 64 MiB, and the result says so.

const MiB = 1024 * 1024
const OVERSHOOT = 64 * MiB

let sandbox: Sandbox
let processes: ProcessManager
let bash: BuiltinTool
before(async () => {
  sandbox = await createSandbox({ mode: 'bwrap' })
  processes = new ProcessManager({ sandbox, reapIntervalMs: 0 })
  bash = createBashTool({ sandbox, processes })
})
after(async () => {
  await processes.killAll()
  await sandbox.close()
})

async function makeWorkspace (t: { after: (fn: () => Promise<void>) => void }): Promise<Workspace> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tg-bq-')))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  return {
    // Not a tenant another test file uses: a sandbox that closes in another test process removes its tenant's cgroup.
    tenant: 'quota-tests',
    workspaceId: 'default',
    root,
    readRoots: [],
    limits: { readMaxChars: 12000, commandTimeoutMs: 60000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 65536 }
  }
}

async function call (ws: Workspace, usage: WorkspaceUsage, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  return await bash.run(args, { workspace: ws, signal: new AbortController().signal, usage }) as Record<string, unknown>
}

/** The tree as counted from scratch (not the figure the tools kept). */
async function measured (ws: Workspace): Promise<{ bytes: number, files: number }> {
  const m = await new WorkspaceUsage({ quotaBytes: 1, maxFiles: 1 }).measure(ws, 60_000)
  return { bytes: m.bytes, files: m.files }
}

test('one big file: RLIMIT_FSIZE stops it at the room left, and the result says the workspace reached its quota', { timeout: 120_000 }, async (t) => {
  const ws = await makeWorkspace(t)
  await writeFile(join(ws.root, 'seed'), Buffer.alloc(10 * MiB))
  const usage = new WorkspaceUsage({ quotaBytes: 100 * MiB, maxFiles: 1000 })
  const r = await call(ws, usage, { action: 'exec', command: 'head -c 300M /dev/zero > big; echo after=$?' })
  const big = (await stat(join(ws.root, 'big'))).size
  assert.ok(big <= 90 * MiB + OVERSHOOT, `big is ${big} bytes`)
  assert.ok(big >= 80 * MiB, `the command ran and wrote (${big} bytes)`)
  assert.equal(r.quotaExceeded, true)
  assert.match(String(r.stderr), /WORKSPACE_QUOTA_EXCEEDED/)
  const now = await measured(ws)
  assert.ok(now.bytes <= 100 * MiB + OVERSHOOT, `${now.bytes} bytes in the workspace`)
  // The figure was measured again after the command.
  assert.deepEqual({ bytes: usage.get(ws)?.bytes, files: usage.get(ws)?.files }, now)

  // A command that frees room is not refused or flagged, and the next one has that room (the
  // file size limit is the room left when a command starts).
  const freed = await call(ws, usage, { action: 'exec', command: 'rm big && echo ok' })
  assert.equal(freed.stdout, 'ok\n')
  assert.equal(freed.quotaExceeded, undefined)
  const small = await call(ws, usage, { action: 'exec', command: 'head -c 1M /dev/zero > small && echo ok' })
  assert.equal(small.stdout, 'ok\n')
  assert.equal(small.quotaExceeded, undefined)
  assert.equal(usage.get(ws)?.bytes, 11 * MiB)
})

test('several writers at once: the watchdog stops the command before the writers fill their room', { timeout: 120_000 }, async (t) => {
  const ws = await makeWorkspace(t)
  const usage = new WorkspaceUsage({ quotaBytes: 50 * MiB, maxFiles: 1000 })
  // Each file alone may reach 50 MiB (the room left): four of them pass the quota by 150 MiB unless stopped.
  const r = await call(ws, usage, { action: 'exec', command: 'for i in 1 2 3 4; do head -c 100M /dev/zero > f$i & done; wait; echo finished' })
  assert.equal(r.quotaExceeded, true, String(r.stderr))
  assert.match(String(r.stderr), /Command was stopped: the workspace passed its quota \(WORKSPACE_QUOTA_EXCEEDED\)/)
  assert.equal(r.stdout, '', 'killed before the end')
  const now = await measured(ws)
  // How far past the quota depends on how fast the polling watchdog runs against four /dev/zero
  // writers (typically within 64 MiB; 131 and 150 MiB were seen on a loaded CI host): reported,
  // not asserted. Each file is capped at the room left (RLIMIT_FSIZE), so 200 MiB is the ceiling.
  t.diagnostic(`stopped at ${(now.bytes / MiB).toFixed(1)} MiB for a 50 MiB quota (${((now.bytes - 50 * MiB) / MiB).toFixed(1)} MiB over)`)
  assert.ok(now.bytes > 50 * MiB && now.bytes <= 4 * 50 * MiB, `${(now.bytes / MiB).toFixed(1)} MiB in the workspace`)
})

test('many small files: stopped past the byte quota, and past WORKSPACE_MAX_FILES', { timeout: 120_000 }, async (t) => {
  const ws = await makeWorkspace(t)
  const usage = new WorkspaceUsage({ quotaBytes: 8 * MiB, maxFiles: 100_000 })
  const r = await call(ws, usage, { action: 'exec', command: 'i=0; while [ $i -lt 2000 ]; do i=$((i+1)); head -c 65536 /dev/zero > s$i; done; echo finished' })
  assert.equal(r.quotaExceeded, true, String(r.stderr))
  assert.match(String(r.stderr), /WORKSPACE_QUOTA_EXCEEDED/)
  assert.equal(r.stdout, '')
  const now = await measured(ws)
  assert.ok(now.bytes > 8 * MiB && now.bytes <= 8 * MiB + OVERSHOOT, `${(now.bytes / MiB).toFixed(1)} MiB`)

  const ws2 = await makeWorkspace(t)
  const files = new WorkspaceUsage({ quotaBytes: 1024 * MiB, maxFiles: 300 })
  const r2 = await call(ws2, files, { action: 'exec', command: 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); : > t$i; done; echo finished' })
  assert.equal(r2.quotaExceeded, true, String(r2.stderr))
  assert.equal(r2.stdout, '')
  const n = (await readdir(ws2.root)).length
  assert.ok(n > 300 && n < 20000, `${n} files`)
})

test('a workspace already over its quota: commands still run and can clean up; only growth is stopped', { timeout: 60_000 }, async (t) => {
  const ws = await makeWorkspace(t)
  // Made by the sandbox's uid (it must be able to write them), under a larger quota, then the quota is lowered.
  const larger = new WorkspaceUsage({ quotaBytes: 100 * MiB, maxFiles: 1000 })
  const made = await call(ws, larger, { action: 'exec', command: 'head -c 3M /dev/zero > a && head -c 3M /dev/zero > b && echo made' })
  assert.equal(made.stdout, 'made\n')
  const usage = new WorkspaceUsage({ quotaBytes: 4 * MiB, maxFiles: 1000 })
  const ls = await call(ws, usage, { action: 'exec', command: 'sleep 0.3; ls' })
  assert.equal(ls.stdout, 'a\nb\n')
  assert.equal(ls.exitCode, 0)
  assert.equal(ls.quotaExceeded, undefined)
  const grow = await call(ws, usage, { action: 'exec', command: '/bin/echo more >> a; echo rc=$?' })
  assert.match(String(grow.stdout), /^rc=153\n$/, 'RLIMIT_FSIZE is 0: no file may grow (SIGXFSZ)')
  assert.equal((await stat(join(ws.root, 'a'))).size, 3 * MiB)
  const rm = await call(ws, usage, { action: 'exec', command: 'rm b' })
  assert.equal(rm.exitCode, 0)
  assert.equal(usage.get(ws)?.bytes, 3 * MiB)
})

test('a background process (bash start) that writes past the quota is stopped; status and logs say why', { timeout: 120_000 }, async (t) => {
  const ws = await makeWorkspace(t)
  const usage = new WorkspaceUsage({ quotaBytes: 20 * MiB, maxFiles: 100_000 })
  const s = await call(ws, usage, { action: 'start', command: 'echo started; i=0; while :; do i=$((i+1)); head -c 1048576 /dev/zero > b$i; sleep 0.01; done' })
  const id = String(s.processId)
  let status: Record<string, unknown> = s
  for (let i = 0; i < 600 && status.status === 'RUNNING'; i++) {
    await sleep(100)
    status = await call(ws, usage, { action: 'status', processId: id })
  }
  assert.equal(status.status, 'STOPPED')
  assert.equal(status.quotaExceeded, true)
  const logs = await call(ws, usage, { action: 'logs', processId: id })
  assert.match(String(logs.content), /started/)
  assert.match(String(logs.content), /Stopped: the workspace passed its quota \(WORKSPACE_QUOTA_EXCEEDED\)/)
  assert.equal(logs.quotaExceeded, true)
  const now = await measured(ws)
  assert.ok(now.bytes > 20 * MiB && now.bytes <= 20 * MiB + OVERSHOOT, `${(now.bytes / MiB).toFixed(1)} MiB`)
  // Nothing writes any more.
  await sleep(300)
  assert.deepEqual(await measured(ws), now)
})

test('a background process that stays within the quota is left alone', { timeout: 60_000 }, async (t) => {
  const ws = await makeWorkspace(t)
  const usage = new WorkspaceUsage({ quotaBytes: 20 * MiB, maxFiles: 1000 })
  const s = await call(ws, usage, { action: 'start', command: 'head -c 1M /dev/zero > one; echo done; sleep 30' })
  await sleep(1500)
  const status = await call(ws, usage, { action: 'status', processId: String(s.processId) })
  assert.equal(status.status, 'RUNNING')
  assert.equal(status.quotaExceeded, undefined)
  await call(ws, usage, { action: 'stop', processId: String(s.processId) })
})
