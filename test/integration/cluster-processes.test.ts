// test-runner: alone
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { CLUSTER_TOKEN_HEADER, CLUSTER_TOKEN_MAX_AGE_MS, ClusterTokens, FORWARDED_PROCESS_CALL_PATH } from '../../src/cluster/index.js'
import { REDIS_URL, redisForTest } from '../helpers/redis.js'
import { startRedisCluster } from '../../scripts/lib/redis-cluster.js'

const run = promisify(execFile)
const SECRET = 'integration-cluster-secret-0123456789'
const ADMIN = 'admin-key-cluster-0123456789'
const ALICE = 'alice-key-cluster-0123456789'

interface Snapshot { processId: string, status: string, command: string, exitCode: number | null }
interface ToolResult { isError: boolean, output: string }

/** pids whose command line holds `marker` (pgrep -f; this test's own pgrep excluded by pgrep itself). */
async function pgrep (marker: string): Promise<number[]> {
  try {
    const { stdout } = await run('pgrep', ['-f', marker])
    return stdout.split('\n').filter(Boolean).map(Number)
  } catch (err) {
    if ((err as { code?: number }).code === 1) return []
    throw err
  }
}

/**
 * pids of the sandboxed command itself (its whole command line is exactly `command`). pgrep -f
 * on a marker also matches the launcher and bwrap, whose argv hold the command: they exist from
 * the spawn on, before bwrap has armed --die-with-parent, so a kill of the gateway then is not
 * the kill this test is about (see the LOST case below).
 */
async function running (command: string): Promise<number[]> {
  return await pgrep(`^${command}$`)
}

async function until<T> (what: string, fn: () => Promise<T | undefined>, maxMs: number): Promise<T> {
  const end = Date.now() + maxMs
  for (;;) {
    const v = await fn()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`gave up waiting for ${what} after ${maxMs} ms`)
    await sleep(50)
  }
}

async function bash (gw: GatewayProcess, args: Record<string, unknown>): Promise<{ result: ToolResult, value: any }> {
  const res = await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}` },
    body: JSON.stringify({ name: 'bash', userId: 'alice', arguments: args })
  })
  assert.equal(res.status, 200, await res.clone().text())
  const result = await res.json() as ToolResult
  let value: unknown
  try { value = JSON.parse(result.output) } catch { value = undefined }
  return { result, value }
}

async function ok (gw: GatewayProcess, args: Record<string, unknown>): Promise<any> {
  const { result, value } = await bash(gw, args)
  assert.equal(result.isError, false, `${JSON.stringify(args)} through ${gw.url}: ${result.output}`)
  return value
}

test('three gateway processes on one Redis: ' +
  'a background process is reachable through every instance, LOST when its owner is killed, STOPPED when it shuts down cleanly', async (t: TestContext) => {
  const env = await redisForTest(t)
  if (!env) return
  await scenario(t, { REDIS_URL, REDIS_KEY_PREFIX: env.prefix })
})

test('the same on a local 3-master Redis Cluster', async (t: TestContext) => {
  const cluster = await startRedisCluster(t)
  await scenario(t, { REDIS_CLUSTER_NODES: cluster.nodes.join(','), REDIS_KEY_PREFIX: 'tg-procs:' })
})

async function scenario (t: TestContext, redisEnv: Record<string, string>): Promise<void> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-cluster-procs-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const marker = `77${Math.floor(Math.random() * 1e8)}`
  // Whatever happens, nothing of ours outlives the test (the assertions say whether it had to).
  t.after(async () => { for (const pid of await pgrep(marker)) { try { process.kill(pid, 'SIGKILL') } catch {} } })
  const common = {
    ...redisEnv,
    CLUSTER_SECRET: SECRET,
    API_KEYS: `${ADMIN}:*,${ALICE}:alice`,
    WORKSPACES_DIR: workspaces,
    CLUSTER_HEARTBEAT_MS: '500',
    HOST: '127.0.0.1',
    SANDBOX: 'bwrap',
    LOAD_EXAMPLES: 'false',
    LOG_LEVEL: 'info'
  }
  const [a, b, c] = await Promise.all([
    startGateway(t, common),
    startGateway(t, common),
    startGateway(t, common)
  ]) as [GatewayProcess, GatewayProcess, GatewayProcess]

  // Membership starts right after listen: all three are there.
  const cluster = await until('three members', async () => {
    const res = await fetch(`${b.url}/cluster`, { headers: { authorization: `Bearer ${ADMIN}` } })
    const body = await res.json() as { instances: Array<{ id: string, url: string }> }
    return body.instances.length === 3 ? body : undefined
  }, 10_000)
  assert.deepEqual(cluster.instances.map((i) => i.url).sort(), [a.url, b.url, c.url].sort())

  // start through A, logs through B, list through C, stop through C.
  const p1 = await ok(a, { action: 'start', command: `echo hello-${marker}; sleep 100${marker}` }) as Snapshot
  assert.equal(p1.status, 'RUNNING')
  const logs = await until('A\'s output through B', async () => {
    const l = await ok(b, { action: 'logs', processId: p1.processId })
    return (l.content as string).includes(`hello-${marker}`) ? l : undefined
  }, 10_000)
  assert.equal(logs.status, 'RUNNING')
  const listed = await ok(c, { action: 'list' }) as Snapshot[]
  assert.deepEqual(listed.map((s) => [s.processId, s.status]), [[p1.processId, 'RUNNING']])
  const stopped = await ok(c, { action: 'stop', processId: p1.processId }) as Snapshot
  assert.equal(stopped.status, 'STOPPED')
  assert.equal((await ok(a, { action: 'status', processId: p1.processId }) as Snapshot).status, 'STOPPED')

  // A workspace's summary through B counts A's process in it; deleting it through C stops that process.
  const started = await fetch(`${a.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ALICE}` },
    body: JSON.stringify({ name: 'bash', userId: 'alice', arguments: { action: 'start', command: `sleep 400${marker}` }, context: { workspaceId: 'doomed' } })
  })
  assert.equal((await started.json() as ToolResult).isError, false)
  await until('A\'s sleep in the doomed workspace', async () => (await running(`sleep 400${marker}`)).length > 0 ? true : undefined, 10_000)
  const summaries = await (await fetch(`${b.url}/users/alice/workspaces`, { headers: { authorization: `Bearer ${ALICE}` } })).json() as { workspaces: Array<{ workspaceId: string, processes: number }> }
  assert.equal(summaries.workspaces.find((w) => w.workspaceId === 'doomed')?.processes, 1, JSON.stringify(summaries))
  const deleted = await fetch(`${c.url}/users/alice/workspaces/doomed`, { method: 'DELETE', headers: { authorization: `Bearer ${ALICE}` } })
  assert.equal(deleted.status, 204, await deleted.text())
  assert.deepEqual(await pgrep(`400${marker}`), [], 'the deleted workspace\'s process on A is stopped before the DELETE answers')

  // Forwarding without a token, with a tampered one, with an expired one: 401. A good one passes.
  const body = JSON.stringify({
    op: 'list',
    workspace: {
      tenant: 'alice',
      workspaceId: 'default',
      root: '/nowhere',
      limits: { readMaxChars: 1, commandTimeoutMs: 1, bashLogChars: 1, maxProcessOutputChars: 1, outputMaxChars: 1 }
    }
  })
  const tokens = new ClusterTokens(SECRET)
  const good = tokens.sign({ method: 'POST', path: FORWARDED_PROCESS_CALL_PATH, body })
  const tampered = good.slice(0, -1) + (good.endsWith('0') ? '1' : '0')
  const expired = tokens.sign({ method: 'POST', path: FORWARDED_PROCESS_CALL_PATH, body }, Date.now() - CLUSTER_TOKEN_MAX_AGE_MS - 10_000)
  const forward = async (headers: Record<string, string>): Promise<Response> =>
    await fetch(`${b.url}${FORWARDED_PROCESS_CALL_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body })
  for (const [what, headers] of [['no token', {}], ['a tampered token', { [CLUSTER_TOKEN_HEADER]: tampered }], ['an expired token', { [CLUSTER_TOKEN_HEADER]: expired }], ['an API key', { authorization: `Bearer ${ADMIN}` }]] as Array<[string, Record<string, string>]>) {
    const res = await forward(headers)
    assert.equal(res.status, 401, `${what}: ${await res.text()}`)
  }
  const passed = await forward({ [CLUSTER_TOKEN_HEADER]: good })
  assert.equal(passed.status, 200, await passed.clone().text())
  assert.deepEqual(await passed.json(), { ok: true, value: [] })

  // A killed with SIGKILL: its running process is LOST through B, and nothing of it survives.
  const p2 = await ok(a, { action: 'start', command: `sleep 200${marker}` }) as Snapshot
  // The event the kill needs: the command runs inside its sandbox, so bwrap has armed
  // --die-with-parent. Until then the launcher is on its way to bwrap, and a gateway killed in
  // that window leaves a bwrap that was never told to die with it (the signal is armed after the
  // parent is gone); under load the window lasts long enough for the kill below to land in it.
  await until('A\'s sandboxed sleep', async () => (await running(`sleep 200${marker}`)).length > 0 ? true : undefined, 30_000)
  assert.equal((await ok(b, { action: 'status', processId: p2.processId }) as Snapshot).status, 'RUNNING')
  const killedAt = Date.now()
  a.child.kill('SIGKILL')
  const lost = await until('LOST through B', async () => {
    const s = await bash(b, { action: 'status', processId: p2.processId })
    // While A's membership has not expired yet, B says A does not answer: a tool error, never a silent miss.
    return s.result.isError ? undefined : (s.value as Snapshot).status === 'LOST' ? s.value as Snapshot : undefined
  }, 30_000)
  const lostMs = Date.now() - killedAt
  t.diagnostic(`A's running process was reported LOST through B ${lostMs} ms after SIGKILL (heartbeat 500 ms, membership TTL 1500 ms)`)
  assert.ok(lostMs < 20_000, `LOST after ${lostMs} ms`)
  assert.equal(lost.command, `sleep 200${marker}`)
  const listedAfter = await ok(c, { action: 'list' }) as Snapshot[]
  assert.deepEqual(listedAfter.map((s) => [s.processId, s.status]), [[p1.processId, 'STOPPED'], [p2.processId, 'LOST']])
  // bwrap runs with --die-with-parent: the sandbox dies with the gateway.
  const survivors = await until('no survivor of A', async () => (await pgrep(`200${marker}`)).length === 0 ? [] : undefined, 30_000).catch(async () => await pgrep(`200${marker}`))
  assert.deepEqual(survivors, [], 'no process of A\'s command survives')

  // A clean SIGTERM of C marks its processes STOPPED, seen from B.
  const p3 = await ok(c, { action: 'start', command: `sleep 300${marker}` }) as Snapshot
  assert.equal((await ok(b, { action: 'status', processId: p3.processId }) as Snapshot).status, 'RUNNING')
  assert.equal(await c.stop(20_000), 0, c.logs())
  const afterTerm = await ok(b, { action: 'status', processId: p3.processId }) as Snapshot
  assert.equal(afterTerm.status, 'STOPPED')
  assert.deepEqual(await pgrep(`300${marker}`), [])
  const members = await (await fetch(`${b.url}/cluster`, { headers: { authorization: `Bearer ${ADMIN}` } })).json() as { instances: unknown[] }
  assert.equal(members.instances.length, 1, 'C left at once, A expired')
  assert.equal(await b.stop(20_000), 0, b.logs())
}
