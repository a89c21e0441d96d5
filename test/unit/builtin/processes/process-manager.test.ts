import { test, before, after } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, realpath, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSandbox } from '../../../../src/builtin/sandbox/create-sandbox.js'
import type { Sandbox } from '../../../../src/builtin/sandbox/types.js'
import { ProcessManager, type ProcessSnapshot } from '../../../../src/builtin/processes/process-manager.js'
import { ToolError, type Workspace } from '../../../../src/builtin/types.js'

let sandbox: Sandbox
before(async () => { sandbox = await createSandbox({ mode: 'bwrap' }) })
after(async () => { await sandbox.close() })

async function makeWorkspace (
  t: { after: (fn: () => Promise<void>) => void },
  tenant = 'acme',
  workspaceId = 'default',
  maxProcessOutputChars = 120000
): Promise<Workspace> {
  const root = await realpath(await mkdtemp(join(tmpdir(), 'tg-procs-')))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  return {
    tenant,
    workspaceId,
    root,
    readRoots: [],
    limits: { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars, outputMaxChars: 65536 }
  }
}

function manager (t: { after: (fn: () => Promise<void>) => void }, opts: Partial<ConstructorParameters<typeof ProcessManager>[0]> = {}): ProcessManager {
  const pm = new ProcessManager({ sandbox, reapIntervalMs: 0, ...opts })
  t.after(async () => { await pm.killAll() })
  return pm
}

async function until<T> (what: string, fn: () => T | undefined, maxMs = 20_000): Promise<T> {
  const end = Date.now() + maxMs
  for (;;) {
    const v = fn()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

const start = async (pm: ProcessManager, ws: Workspace, command: string): Promise<ProcessSnapshot> =>
  await pm.start(ws, { command, cwd: ws.root, workingDirectory: '.' })

test('start, logs with [stdout]/[stderr] lines, EXITED with the exit code', async (t) => {
  const pm = manager(t)
  const ws = await makeWorkspace(t)
  const s = await start(pm, ws, 'echo one; echo two >&2; printf partial; exit 3')
  assert.match(s.processId, /^proc_[0-9a-f]{32}$/)
  assert.equal(s.status, 'RUNNING')
  assert.equal(s.workingDirectory, '.')
  assert.equal(s.command, 'echo one; echo two >&2; printf partial; exit 3')
  const done = await until('exit', () => { const st = pm.status(ws, s.processId); return st.status === 'EXITED' ? st : undefined })
  assert.equal(done.exitCode, 3)
  assert.ok(done.endedAt !== null && done.endedAt >= done.startedAt)
  const logs = await until('logs', () => { const l = pm.logs(ws, s.processId, 0, undefined); return l.content.includes('partial') ? l : undefined })
  assert.ok(logs.content.includes('[stdout] one\n'))
  assert.ok(logs.content.includes('[stderr] two\n'))
  assert.ok(logs.content.includes('[stdout] partial\n'))
  assert.equal(logs.status, 'EXITED')
  assert.equal(logs.exitCode, 3)
  assert.equal(logs.nextOffset, logs.content.length)
  const next = pm.logs(ws, s.processId, logs.nextOffset, 10)
  assert.equal(next.content, '')
})

test('write sends stdin as is; stop terminates (STOPPED) and list is sorted by startedAt', async (t) => {
  let clock = 1_000_000
  const pm = manager(t, { now: () => clock++ })
  const ws = await makeWorkspace(t)
  const a = await start(pm, ws, 'while read line; do echo "got:$line"; done')
  const b = await start(pm, ws, 'sleep 300')
  const w = await pm.write(ws, a.processId, 'hello\nwor')
  assert.equal(w.bytesWritten, 9)
  assert.equal(w.process.status, 'RUNNING')
  await until('echo', () => pm.logs(ws, a.processId, 0, undefined).content.includes('got:hello') ? true : undefined)
  assert.ok(!pm.logs(ws, a.processId, 0, undefined).content.includes('got:wor'), 'no newline may be added')
  assert.deepEqual(pm.list(ws).map((p) => p.processId), [a.processId, b.processId])
  const stopped = await pm.stop(ws, b.processId)
  assert.equal(stopped.status, 'STOPPED')
  assert.equal(typeof stopped.exitCode, 'number')
  await assert.rejects(pm.write(ws, b.processId, 'x'), /Process is not running/)
  assert.equal(pm.stats().running, 1)
  assert.equal(pm.stats().stopped, 1)
})

test('another workspace or tenant sees the id as unknown', async (t) => {
  const pm = manager(t)
  const ws = await makeWorkspace(t, 'acme', 'default')
  const otherTenant = { ...ws, tenant: 'evil' }
  const otherWs = { ...ws, workspaceId: 'other' }
  const s = await start(pm, ws, 'sleep 300')
  for (const w of [otherTenant, otherWs]) {
    assert.throws(() => pm.status(w, s.processId), (e: unknown) => e instanceof ToolError && e.message === `Unknown processId: ${s.processId}`)
    assert.throws(() => pm.logs(w, s.processId, 0, 10), /Unknown processId/)
    await assert.rejects(pm.stop(w, s.processId), /Unknown processId/)
    await assert.rejects(pm.write(w, s.processId, 'x'), /Unknown processId/)
    assert.deepEqual(pm.list(w), [])
  }
  assert.equal(pm.status(ws, s.processId).status, 'RUNNING')
  assert.throws(() => pm.status(ws, 'proc_00000000000000000000000000000000'), /Unknown processId: proc_0+/)
})

test('per-workspace cap on running processes with a clear error; other workspaces unaffected', async (t) => {
  const pm = manager(t, { maxRunningPerWorkspace: 2 })
  const ws = await makeWorkspace(t)
  const other = await makeWorkspace(t, 'acme', 'second')
  await start(pm, ws, 'sleep 300')
  const second = await start(pm, ws, 'sleep 300')
  await assert.rejects(start(pm, ws, 'sleep 300'), /Too many running background processes in this workspace \(limit 2\)/)
  await start(pm, other, 'sleep 300')
  await pm.stop(ws, second.processId)
  await start(pm, ws, 'sleep 300')
  assert.equal(pm.stats().running, 3)
})

test('the log ring keeps the newest maxProcessOutputChars and reports truncation', async (t) => {
  const pm = manager(t)
  const ws = await makeWorkspace(t, 'acme', 'default', 200)
  const s = await start(pm, ws, 'i=0; while [ $i -lt 100 ]; do echo "line $i"; i=$((i+1)); done')
  await until('exit', () => pm.status(ws, s.processId).status === 'EXITED' ? true : undefined)
  const l = await until('last line', () => { const x = pm.logs(ws, s.processId, 0, 1000); return x.content.includes('line 99') ? x : undefined })
  assert.equal(l.truncated, true)
  assert.ok(l.offset > 0)
  assert.ok(l.content.length <= 200)
  assert.ok(l.content.endsWith('[stdout] line 99\n'))
})

test('idle reaping: long-idle running processes are stopped, finished ones forgotten', async (t) => {
  let now = 0
  const pm = manager(t, { now: () => now, idleTimeoutMs: 1000, exitedRetentionMs: 5000 })
  const ws = await makeWorkspace(t)
  const s = await start(pm, ws, 'sleep 300')
  now = 500
  await pm.reap()
  assert.equal(pm.status(ws, s.processId).status, 'RUNNING') // status() counts as activity (now=500)
  now = 1600
  await pm.reap()
  assert.equal(pm.status(ws, s.processId).status, 'STOPPED')
  assert.equal(pm.stats().idleReaped, 1)
  now = 1600 + 5000
  await pm.reap()
  assert.throws(() => pm.status(ws, s.processId), /Unknown processId/)
  assert.equal(pm.stats().tracked, 0)
})

test('killAll stops everything, waits for it, and refuses new starts', async (t) => {
  const pm = new ProcessManager({ sandbox, reapIntervalMs: 0, stopGraceMs: 200 })
  const ws = await makeWorkspace(t)
  const a = await start(pm, ws, 'trap "" TERM; sleep 300')
  const b = await start(pm, ws, 'sleep 300')
  await pm.killAll()
  assert.equal(pm.stats().running, 0)
  for (const id of [a.processId, b.processId]) assert.equal(pm.status(ws, id).status, 'STOPPED')
  for (const pid of [a.pid, b.pid]) {
    assert.ok(pid !== null)
    assert.throws(() => process.kill(pid, 0), /ESRCH/)
  }
  await assert.rejects(start(pm, ws, 'true'), /shutting down/)
})
