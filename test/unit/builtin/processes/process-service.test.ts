import { test, before, after } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { mkdtemp, realpath, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createSandbox } from '../../../../src/builtin/sandbox/create-sandbox.js'
import type { Sandbox } from '../../../../src/builtin/sandbox/types.js'
import { ProcessManager, ProcessService } from '../../../../src/builtin/processes/index.js'
import type { ProcessSnapshot } from '../../../../src/builtin/processes/index.js'
import { ToolError, type Workspace } from '../../../../src/builtin/types.js'
import {
  CLUSTER_TOKEN_HEADER, ClusterTokenVerifier, ClusterTokens, FORWARDED_PROCESS_CALL_PATH, Membership, PeerClient, ProcessDirectory, newInstanceId
} from '../../../../src/cluster/index.js'
import type { Coordination } from '../../../../src/cluster/index.js'
import { silentLogger } from '../../../../src/logger.js'
import { createRedisClient, quitWithTimeout } from '../../../../src/redis/index.js'
import { REDIS_REQUIRED, REDIS_URL, deleteKeys, redisReachable, uniquePrefix } from '../../../helpers/redis-utils.js'

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 65536 }
const tokens = new ClusterTokens('a-test-cluster-secret-of-32-chars')

let sandbox: Sandbox
let redisOk = false
before(async () => {
  sandbox = await createSandbox({ mode: 'bwrap' })
  redisOk = await redisReachable()
})
after(async () => { await sandbox.close() })

function skipWithoutRedis (t: TestContext): boolean {
  if (redisOk) return false
  if (REDIS_REQUIRED) throw new Error(`Redis is required under CI=true (${REDIS_URL})`)
  t.skip(`no Redis at ${REDIS_URL}`)
  return true
}

async function workspace (t: TestContext, tenant = 'acme', workspaceId = 'default', root?: string): Promise<Workspace> {
  let dir = root
  if (dir === undefined) {
    dir = await realpath(await mkdtemp(join(tmpdir(), 'tg-psvc-')))
    const made = dir
    t.after(async () => { await rm(made, { recursive: true, force: true }) })
  }
  return { tenant, workspaceId, root: dir, readRoots: [], limits: { ...LIMITS } }
}

interface Instance {
  id: string
  service: ProcessService
  manager: ProcessManager
  membership: Membership
  url: string
  /** The instance's HTTP server stops answering (connections held open). */
  hang: () => void
}

/**
 * One gateway instance in miniature: its manager and service, a membership on the shared prefix,
 * and a small HTTP server standing in for routes/cluster.ts (token checked, body to serveForwarded).
 */
async function instance (t: TestContext, keyPrefix: string, opts: { peers?: boolean } = {}): Promise<Instance> {
  const redis = createRedisClient({ kind: 'single', url: REDIS_URL }, { commandTimeoutMs: 2000 })
  redis.on('error', () => {})
  const scope = { redis, keyPrefix, instanceId: newInstanceId() }
  const membership = new Membership(scope, { heartbeatMs: 200, logger: silentLogger })
  const coordination: Coordination = { ...scope, membership, peers: opts.peers === false ? undefined : new PeerClient(tokens, { timeoutMs: 3000 }) }
  const bound: { service?: ProcessService } = {}
  const manager = new ProcessManager({ sandbox, reapIntervalMs: 0, stopGraceMs: 300, onEnded: (ws, snap) => bound.service?.ended(ws, snap) })
  const service = bound.service = new ProcessService({
    local: manager,
    coordination,
    directory: new ProcessDirectory<ProcessSnapshot>(scope),
    forwardTimeoutMs: 1500,
    listTimeoutMs: 800,
    logger: silentLogger
  })
  const verifier = new ClusterTokenVerifier(tokens)
  let hanging = false
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c: Buffer) => { body += c.toString() })
    req.on('end', () => {
      if (hanging) return
      verifier.verify(req.headers[CLUSTER_TOKEN_HEADER] as string | undefined, { method: 'POST', path: req.url ?? '', body }).then(async (check) => {
        if (!check.ok || req.url !== FORWARDED_PROCESS_CALL_PATH) {
          res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 'GW_UNAUTHORIZED', message: 'no' }))
          return
        }
        const answer = await service.serveForwarded(JSON.parse(body))
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
      }).catch((err: Error) => { res.writeHead(500).end(JSON.stringify({ message: err.message })) })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  await membership.start(url)
  t.after(async () => {
    await manager.killAll()
    await service.close()
    await membership.stop()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
    await quitWithTimeout(redis, 1000)
  })
  return { id: scope.instanceId, service, manager, membership, url, hang: () => { hanging = true } }
}

async function until<T> (what: string, fn: () => Promise<T | undefined>, maxMs = 15_000): Promise<T> {
  const end = Date.now() + maxMs
  for (;;) {
    const v = await fn()
    if (v !== undefined) return v
    if (Date.now() > end) throw new Error(`gave up waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

async function toolError (p: Promise<unknown>, re: RegExp, reason?: string): Promise<ToolError> {
  let caught: unknown
  await assert.rejects(p, (err: unknown) => { caught = err; return true })
  assert.ok(caught instanceof ToolError, `expected a ToolError, got ${String(caught)}`)
  assert.match(caught.message, re)
  if (reason !== undefined) assert.equal(caught.reason, reason)
  return caught
}

function prefix (t: TestContext): string {
  const p = uniquePrefix()
  t.after(async () => { await deleteKeys(p) })
  return p
}

test('a process started on A is seen, read, written to and stopped through B; list merges both', async (t) => {
  if (skipWithoutRedis(t)) return
  const keyPrefix = prefix(t)
  const a = await instance(t, keyPrefix)
  const b = await instance(t, keyPrefix)
  const ws = await workspace(t)
  const start = async (svc: ProcessService, command: string): Promise<ProcessSnapshot> => await svc.start(ws, { command, cwd: ws.root, workingDirectory: '.' })

  const p = await start(a.service, 'echo ready; while read line; do echo "got $line"; done')
  const mine = await start(b.service, 'sleep 30')
  assert.equal((await b.service.status(ws, p.processId)).status, 'RUNNING')
  const logs = await until('output through B', async () => {
    const l = await b.service.logs(ws, p.processId, 0, undefined)
    return l.content.includes('ready') ? l : undefined
  })
  assert.equal(logs.status, 'RUNNING')
  const w = await b.service.write(ws, p.processId, 'hello\n', { timeoutMs: 2000 })
  assert.equal(w.bytesWritten, 6)
  await until('written line echoed', async () => (await a.service.logs(ws, p.processId, 0, undefined)).content.includes('got hello') ? true : undefined)

  // list merges: through either instance, both processes, oldest first.
  for (const svc of [a.service, b.service]) {
    assert.deepEqual((await svc.list(ws)).map((s) => s.processId), [p.processId, mine.processId])
  }

  // The same id from another workspace or tenant is unknown, on both instances, exactly as today.
  for (const other of [await workspace(t, 'acme', 'other'), await workspace(t, 'globex', 'default'), await workspace(t, 'acme', 'default')]) {
    for (const svc of [a.service, b.service]) {
      await toolError(svc.status(other, p.processId), new RegExp(`^Unknown processId: ${p.processId}$`))
      await toolError(svc.logs(other, p.processId, 0, undefined), /^Unknown processId/)
      assert.deepEqual(await svc.list(other), [])
    }
  }
  await toolError(b.service.status(ws, 'proc_' + '0'.repeat(32)), /^Unknown processId/)

  const stopped = await b.service.stop(ws, p.processId)
  assert.equal(stopped.status, 'STOPPED')
  assert.equal((await a.service.status(ws, p.processId)).status, 'STOPPED')
  const filed = await until('STOPPED filed in Redis', async () => {
    const s = (await b.service.list(ws)).find((x) => x.processId === p.processId)
    return s?.status === 'STOPPED' ? s : undefined
  })
  assert.equal(filed.status, 'STOPPED')
  // A tool error on the owner travels back as the same message.
  await toolError(b.service.write(ws, p.processId, 'late\n'), new RegExp(`^Process is not running: ${p.processId}$`))
})

test('an owner that is gone: its running process is LOST, a finished one keeps its status; never missing from list', async (t) => {
  if (skipWithoutRedis(t)) return
  const keyPrefix = prefix(t)
  const a = await instance(t, keyPrefix)
  const b = await instance(t, keyPrefix)
  const ws = await workspace(t)
  const running = await a.service.start(ws, { command: 'sleep 30', cwd: ws.root, workingDirectory: '.' })
  const done = await a.service.start(ws, { command: 'exit 4', cwd: ws.root, workingDirectory: '.' })
  await until('exit filed', async () => (await b.service.status(ws, done.processId)).status === 'EXITED' ? true : undefined)

  // The owner leaves the membership without recording anything (as a crash would, once its TTL passes).
  await a.membership.stop()
  const began = Date.now()
  const lost = await b.service.status(ws, running.processId)
  t.diagnostic(`LOST reported ${Date.now() - began} ms after the owner left`)
  assert.equal(lost.status, 'LOST')
  assert.equal(lost.command, 'sleep 30')
  const finished = await b.service.status(ws, done.processId)
  assert.equal(finished.status, 'EXITED')
  assert.equal(finished.exitCode, 4)
  const listed = await b.service.list(ws)
  assert.deepEqual(listed.map((s) => `${s.processId}:${s.status}`), [`${running.processId}:LOST`, `${done.processId}:EXITED`])
  const logs = await b.service.logs(ws, running.processId, 5, undefined)
  assert.deepEqual({ status: logs.status, content: logs.content, nextOffset: logs.nextOffset }, { status: 'LOST', content: '', nextOffset: 5 })
  await toolError(b.service.write(ws, running.processId, 'x'), /not running.*LOST.*is gone/)
  assert.equal((await b.service.stop(ws, running.processId)).status, 'LOST')
})

test('an owner alive but not answering: a timeout tool error naming it; list falls back to its snapshots', async (t) => {
  if (skipWithoutRedis(t)) return
  const keyPrefix = prefix(t)
  const a = await instance(t, keyPrefix)
  const b = await instance(t, keyPrefix)
  const ws = await workspace(t)
  const p = await a.service.start(ws, { command: 'sleep 30', cwd: ws.root, workingDirectory: '.' })
  a.hang()
  const began = Date.now()
  const err = await toolError(b.service.status(ws, p.processId), new RegExp(`Instance ${a.id} .*did not answer within 1500 ms`), 'timeout')
  t.diagnostic(`${err.message} (after ${Date.now() - began} ms)`)
  const listed = await b.service.list(ws)
  assert.deepEqual(listed.map((s) => `${s.processId}:${s.status}`), [`${p.processId}:RUNNING`], 'its last snapshot stands in')
})

test('without CLUSTER_SECRET nothing is forwarded: a clear tool error', async (t) => {
  if (skipWithoutRedis(t)) return
  const keyPrefix = prefix(t)
  const a = await instance(t, keyPrefix)
  const b = await instance(t, keyPrefix, { peers: false })
  const ws = await workspace(t)
  const p = await a.service.start(ws, { command: 'sleep 30', cwd: ws.root, workingDirectory: '.' })
  await toolError(b.service.logs(ws, p.processId, 0, undefined), /CLUSTER_SECRET is not set/)
})

test('a clean shutdown records its processes STOPPED: seen so from another instance, not LOST', async (t) => {
  if (skipWithoutRedis(t)) return
  const keyPrefix = prefix(t)
  const a = await instance(t, keyPrefix)
  const b = await instance(t, keyPrefix)
  const ws = await workspace(t)
  const p = await a.service.start(ws, { command: 'sleep 30', cwd: ws.root, workingDirectory: '.' })
  // The built-ins' close order: kill, record, then leave the membership.
  await a.manager.killAll()
  await a.service.close()
  await a.membership.stop()
  const s = await b.service.status(ws, p.processId)
  assert.equal(s.status, 'STOPPED')
  assert.deepEqual((await b.service.list(ws)).map((x) => x.status), ['STOPPED'])
})

test('serveForwarded: malformed calls are refused, tool errors come back with their reason', async (t) => {
  if (skipWithoutRedis(t)) return
  const keyPrefix = prefix(t)
  const a = await instance(t, keyPrefix)
  const ws = await workspace(t)
  const w = { tenant: ws.tenant, workspaceId: ws.workspaceId, root: ws.root, limits: ws.limits }
  for (const bad of [
    null,
    'x',
    {},
    { op: 'exec', workspace: w },
    { op: 'status', workspace: w },
    { op: 'logs', processId: 'proc_x', workspace: { ...w, limits: { ...w.limits, bashLogChars: -1 } } },
    { op: 'write', processId: 'proc_x', workspace: w }
  ]) {
    const answer = await a.service.serveForwarded(bad)
    assert.equal(answer.ok, false, JSON.stringify(bad))
    assert.equal(answer.ok === false && answer.reason, 'invalid-arguments')
  }
  assert.deepEqual(
    await a.service.serveForwarded({ op: 'status', processId: 'proc_nope', workspace: w }),
    { ok: false, reason: 'tool-error', message: 'Unknown processId: proc_nope' }
  )
  assert.deepEqual(await a.service.serveForwarded({ op: 'list', workspace: w }), { ok: true, value: [] })
})

test('without coordination the service is the local manager alone', async (t) => {
  const manager = new ProcessManager({ sandbox, reapIntervalMs: 0 })
  t.after(async () => { await manager.killAll() })
  const service = new ProcessService({ local: manager })
  assert.equal(service.clustered, false)
  const ws = await workspace(t)
  const p = await service.start(ws, { command: 'sleep 30', cwd: ws.root, workingDirectory: '.' })
  assert.equal((await service.status(ws, p.processId)).status, 'RUNNING')
  assert.deepEqual((await service.list(ws)).map((s) => s.processId), [p.processId])
  await toolError(service.status(ws, 'proc_' + 'f'.repeat(32)), /^Unknown processId/)
  assert.equal((await service.stop(ws, p.processId)).status, 'STOPPED')
})
