import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as delay } from 'node:timers/promises'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { processesMatching, waitUntil } from '../../scripts/lib/proc.js'

interface ToolResult { isError: boolean, output: string }

async function setup (
  t: TestContext,
  graceMs: number
): Promise<{ gw: GatewayProcess, workspaces: string, invoke: (args: Record<string, unknown>) => Promise<Response> }> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-shutdown-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { SANDBOX: 'auto', WORKSPACES_DIR: workspaces, SHUTDOWN_GRACE_MS: String(graceMs), LOG_LEVEL: 'info' })
  // Whatever happens, nothing of ours outlives the test (the assertions below say whether it had to).
  t.after(async () => {
    for (const p of await processesMatching(workspaces)) {
      try { process.kill(p.pid, 'SIGKILL') } catch {}
    }
  })
  const invoke = async (args: Record<string, unknown>): Promise<Response> => await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'bash', userId: 'shutdown', arguments: args })
  })
  return { gw, workspaces, invoke }
}

/** Exit code of the gateway after SIGTERM, failing past close-with-grace's own hard bound. */
async function exitCode (gw: GatewayProcess, boundMs: number): Promise<number | null> {
  if (gw.child.exitCode !== null) return gw.child.exitCode
  const exited = once(gw.child, 'exit').then(([code]) => code as number | null)
  const timeout = delay(boundMs, 'timeout' as const)
  const result = await Promise.race([exited, timeout])
  assert.notEqual(result, 'timeout', `the gateway did not exit within ${boundMs} ms:\n${gw.logs()}`)
  return result as number | null
}

test('SIGTERM: in-flight call finishes with 200, background and sandboxed processes are killed, exit 0, no orphans', async (t) => {
  const { gw, workspaces, invoke } = await setup(t, 8000)
  const mode = ((await (await fetch(`${gw.url}/readyz`)).json()) as { sandbox: { mode: string } }).sandbox.mode

  const marker = String(Math.floor(Math.random() * 1e6))
  const started = await (await invoke({ action: 'start', command: `sleep 300${marker}` })).json() as ToolResult
  assert.equal(started.isError, false, started.output)
  await waitUntil('the background sleep', async () => (await processesMatching(`300${marker}`)).length > 0)

  // The in-flight call: sleeps, then prints. It must be allowed to finish.
  const inFlight = invoke({ action: 'exec', command: `sleep 2.${marker} && echo finished-${marker}` })
  await waitUntil('the in-flight sleep', async () => (await processesMatching(`2.${marker}`)).some((p) => p.cmdline.startsWith('sleep')))
  assert.equal(gw.child.kill('SIGTERM'), true)

  const res = await inFlight
  assert.equal(res.status, 200)
  const body = await res.json() as ToolResult
  assert.equal(body.isError, false, body.output)
  assert.match(body.output, new RegExp(`finished-${marker}`))

  assert.equal(await exitCode(gw, 8000 + 20_000), 0, gw.logs())
  // Nothing of the gateway's survives it: not the background sleep, not a bwrap, not a shell.
  const left = [...await processesMatching(marker), ...await processesMatching(workspaces)]
  assert.deepEqual(left, [], `orphans left (sandbox mode ${mode})`)
  assert.match(gw.logs(), /closing/)
  // It drained: the in-flight call ended on its own, nothing had to be cut off.
  assert.doesNotMatch(gw.logs(), /did not finish in time/)
})

test('SIGTERM: a call still running after SHUTDOWN_GRACE_MS is cut off, its command killed, and the gateway still exits 0', async (t) => {
  const { gw, workspaces, invoke } = await setup(t, 1000)
  const marker = String(Math.floor(Math.random() * 1e6))
  const inFlight = invoke({ action: 'exec', command: `sleep 120${marker}`, timeoutMs: 600_000 }).then(
    (r) => r.status,
    () => 'connection closed' as const
  )
  await waitUntil('the long sleep', async () => (await processesMatching(`120${marker}`)).some((p) => p.cmdline.startsWith('sleep')))
  gw.child.kill('SIGTERM')

  // After SIGTERM the server accepts no new work.
  await delay(100)
  const late = await fetch(`${gw.url}/healthz`, { headers: { connection: 'close' } }).then((r) => r.status, () => 'refused' as const)
  assert.notEqual(late, 200)

  assert.equal(await exitCode(gw, 1000 + 20_000), 0, gw.logs())
  assert.equal(await inFlight, 'connection closed')
  assert.match(gw.logs(), /did not finish in time/)
  assert.deepEqual([...await processesMatching(marker), ...await processesMatching(workspaces)], [])
})
