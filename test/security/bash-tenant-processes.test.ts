/**
 * Attack: background processes were capped per workspace only (8), so a
 * tenant could run any number of them by opening more workspaces. MAX_PROCESSES_PER_TENANT caps
 * them across all of a tenant's workspaces. Real gateway process, bwrap.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import { processesMatching } from '../../scripts/lib/proc.js'
import { loadConfig } from '../../src/config.js'

interface InvokeBody { isError: boolean, output: string, error: { code: string, message: string } | null }

test('MAX_PROCESSES_PER_TENANT caps background processes across workspaces; other tenants are unaffected', async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-sec-procs-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { SANDBOX: 'bwrap', WORKSPACES_DIR: workspaces, MAX_PROCESSES_PER_TENANT: '5' })
  t.after(async () => {
    await gw.stop(5000)
    for (const p of await processesMatching(workspaces)) {
      try { process.kill(p.pid, 'SIGKILL') } catch {}
    }
  })
  const bash = async (userId: string, workspaceId: string, args: Record<string, unknown>): Promise<InvokeBody> => {
    const res = await fetch(`${gw.url}/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bash', userId, arguments: args, context: { workspaceId } })
    })
    assert.equal(res.status, 200)
    return await res.json() as InvokeBody
  }

  // Two in each of 3 workspaces, started concurrently (different workspaces are not serialised):
  // exactly 5 of the 6 may run.
  const attempts = await Promise.all(
    ['w1', 'w1', 'w2', 'w2', 'w3', 'w3'].map(async (ws) => await bash('mallory', ws, { action: 'start', command: 'sleep 600' }))
  )
  const started = attempts.filter((r) => !r.isError)
  const refused = attempts.filter((r) => r.isError)
  assert.equal(started.length, 5, JSON.stringify(attempts.map((r) => r.error?.message ?? 'started')))
  assert.equal(refused.length, 1)
  assert.equal(refused[0]?.error?.code, 'GW_SANDBOX_ERROR')
  assert.match(refused[0]?.error?.message ?? '', /Too many running background processes for this tenant across its workspaces \(limit 5\)/)

  // A fresh workspace does not reset the count.
  const more = await bash('mallory', 'w4', { action: 'start', command: 'sleep 600' })
  assert.equal(more.isError, true, more.output)
  assert.match(more.error?.message ?? '', /limit 5/)

  // Another tenant still starts its own.
  const other = await bash('alice', 'w1', { action: 'start', command: 'sleep 600' })
  assert.equal(other.isError, false, other.output)

  // Stopping one frees a slot for the tenant.
  const first = JSON.parse(started[0]?.output ?? '{}') as { processId: string, workingDirectory: string }
  const owner = attempts.indexOf(started[0] as InvokeBody)
  const stopped = await bash('mallory', ['w1', 'w1', 'w2', 'w2', 'w3', 'w3'][owner] as string, { action: 'stop', processId: first.processId })
  assert.equal(stopped.isError, false, stopped.output)
  const again = await bash('mallory', 'w4', { action: 'start', command: 'sleep 600' })
  assert.equal(again.isError, false, again.output)
})

test('MAX_PROCESSES_PER_TENANT defaults to 16 and refuses 0 or junk', () => {
  assert.equal(loadConfig({}).maxProcessesPerTenant, 16)
  assert.equal(loadConfig({ MAX_PROCESSES_PER_TENANT: '3' }).maxProcessesPerTenant, 3)
  assert.throws(() => loadConfig({ MAX_PROCESSES_PER_TENANT: '0' }), /MAX_PROCESSES_PER_TENANT/)
  assert.throws(() => loadConfig({ MAX_PROCESSES_PER_TENANT: 'many' }), /MAX_PROCESSES_PER_TENANT/)
})
