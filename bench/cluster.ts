/**
 * Background processes across instances: what forwarding a `bash logs` to the
 * process's owner adds. Two instances in this process on a real Redis (127.0.0.1:6379, or
 * REDIS_URL; a unique REDIS_KEY_PREFIX whose keys are deleted after): A runs the background
 * process, B forwards to A over HTTP with a signed token (the owner's route stood in for by a
 * node:http server that checks the token and calls serveForwarded, as routes/cluster.ts does).
 * Subject: `bash logs` through B (a Redis lookup of the owner, a membership read, the signed
 * POST). Baseline: the same call through A, served by its own manager.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { chmod } from 'node:fs/promises'
import path from 'node:path'
import { deleteKeys, redisReachable } from '../scripts/lib/redis-keys.js'
import { ProcessManager, ProcessService } from '../src/builtin/processes/index.js'
import type { ProcessSnapshot } from '../src/builtin/processes/index.js'
import { createSandbox } from '../src/builtin/sandbox/create-sandbox.js'
import { createBashTool } from '../src/builtin/tools/bash.js'
import { WorkspaceManager } from '../src/builtin/workspace/workspaces.js'
import {
  CLUSTER_TOKEN_HEADER, ClusterTokenVerifier, ClusterTokens, FORWARDED_PROCESS_CALL_PATH, Membership, PeerClient, ProcessDirectory, newInstanceId
} from '../src/cluster/index.js'
import { silentLogger } from '../src/logger.js'
import { createRedisClient, parseNode, quitWithTimeout } from '../src/redis/index.js'
import type { RedisTarget } from '../src/redis/index.js'
import { createRedisRegistryStore } from '../src/registry/redis-store.js'
import type { RegistryChange } from '../src/registry/types.js'
import { startRedisCluster } from '../scripts/lib/redis-cluster.js'
import { makeRow, percentile, round, timePair } from './stats.js'
import type { BenchContext, Row } from './types.js'

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const LIMITS = { readMaxChars: 12_000, commandTimeoutMs: 30_000, bashLogChars: 12_000, maxProcessOutputChars: 120_000, outputMaxChars: 100_000 }
const WARMUP = 30
const REPS = 400
const ROW = { id: '17.1', name: 'bash logs forwarded to the owner instance (Redis lookup + signed HTTP) vs served locally' }

async function forwardedLogs (ctx: BenchContext): Promise<Row[]> {
  if (!await redisReachable(REDIS_URL)) {
    return [makeRow({ ...ROW, metric: 'p50 ms', value: null, baseline: null, target: null, notes: `not measured: no Redis at ${REDIS_URL}` })]
  }
  const keyPrefix = `tg-bench-cluster-${process.pid}-${Date.now()}:`
  ctx.defer(async () => await deleteKeys(keyPrefix, REDIS_URL))
  const sandbox = await createSandbox({ mode: 'auto' })
  ctx.defer(async () => await sandbox.close())
  const tokens = new ClusterTokens(`bench-secret-${process.pid}-0123456789`)

  const instance = async (): Promise<{ bash: ReturnType<typeof createBashTool>, service: ProcessService }> => {
    const redis = createRedisClient({ kind: 'single', url: REDIS_URL }, { commandTimeoutMs: 2000 })
    redis.on('error', () => {})
    const scope = { redis, keyPrefix, instanceId: newInstanceId() }
    const membership = new Membership(scope, { heartbeatMs: 1000, logger: silentLogger })
    const bound: { service?: ProcessService } = {}
    const manager = new ProcessManager({ sandbox, reapIntervalMs: 0, onEnded: (ws, snap) => bound.service?.ended(ws, snap) })
    const service = bound.service = new ProcessService({
      local: manager,
      coordination: { ...scope, membership, peers: new PeerClient(tokens) },
      directory: new ProcessDirectory<ProcessSnapshot>(scope),
      logger: silentLogger
    })
    const verifier = new ClusterTokenVerifier(tokens)
    const server = createServer((req, res) => {
      let body = ''
      req.on('data', (c: Buffer) => { body += c.toString() })
      req.on('end', () => {
        const path = req.url ?? ''
        const check = path === FORWARDED_PROCESS_CALL_PATH
          ? verifier.verify(req.headers[CLUSTER_TOKEN_HEADER] as string | undefined, { method: 'POST', path, body })
          : Promise.resolve({ ok: false })
        check.then(async (verdict) => {
          if (!verdict.ok) {
            res.writeHead(401).end('{}')
            return
          }
          const answer = await service.serveForwarded(JSON.parse(body))
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
        }).catch(() => { res.writeHead(500).end('{}') })
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    await membership.start(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
    ctx.defer(async () => {
      await manager.killAll()
      await service.close()
      await membership.stop()
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
      await quitWithTimeout(redis, 1000)
    })
    return { bash: createBashTool({ sandbox, processes: service }), service }
  }
  const a = await instance()
  const b = await instance()

  // The sandbox uid must be able to traverse down to the workspace (chowned to it by the manager).
  await chmod(ctx.tmpDir, 0o711)
  const workspaces = new WorkspaceManager({
    workspacesDir: path.join(ctx.tmpDir, 'workspaces'),
    workspaceBases: [],
    readRoots: {},
    maxLimits: LIMITS,
    ...(sandbox.owner !== undefined ? { owner: sandbox.owner } : {})
  })
  const ws = await workspaces.resolve({ workspaceId: 'cluster' }, { userId: 'bench', isAdmin: false })
  const call = { workspace: ws, signal: ctx.signal }
  // A process with a few KiB of log, all of it returned by each logs call.
  const started = await a.bash.run({
    action: 'start',
    command: 'i=0; while [ $i -lt 100 ]; do i=$((i+1)); echo "line $i of the bench log"; done; sleep 600'
  }, call) as ProcessSnapshot
  for (let i = 0; ; i++) {
    const l = await a.bash.run({ action: 'logs', processId: started.processId }, call) as { content: string }
    if (l.content.includes('line 100 ')) break
    if (i === 100) throw new Error(`the bench process did not print its log: ${l.content.slice(0, 300)}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  const logs = { action: 'logs', processId: started.processId }
  let chars = 0
  const { subject, baseline } = await timePair(
    async () => { chars = (await b.bash.run(logs, call) as { content: string }).content.length },
    async () => await a.bash.run(logs, call),
    { warmup: WARMUP, reps: REPS, signal: ctx.signal }
  )
  ctx.log(`forwarded p50 ${round(percentile(subject, 50))} ms, local p50 ${round(percentile(baseline, 50))} ms over ${subject.length} calls`)
  return [makeRow({
    ...ROW,
    metric: 'p50 ms',
    value: round(percentile(subject, 50)),
    baseline: round(percentile(baseline, 50)),
    target: { on: 'delta', op: '<', limit: 2 },
    notes: `${subject.length} interleaved calls each, ${chars} chars of log per call; p99 forwarded ${round(percentile(subject, 99))} ms, local ${round(percentile(baseline, 99))} ms; sandbox ${sandbox.mode}`,
    detail: { reps: subject.length, p99Ms: round(percentile(subject, 99)), baselineP99Ms: round(percentile(baseline, 99)), logChars: chars }
  })]
}

const PROPAGATION = { id: '17.2', name: 'registry change on instance A seen by instance C (pub/sub event), vs a bare PUBLISH to SUBSCRIBE' }
const CHANGES = 200

/**
 * Registry change propagation: A's store writes a tenant server (the put script publishes the
 * event in the same atomic step); C's store, on its own connections, receives it. Time from the
 * start of A's put to C's listener. Baseline: a bare ioredis PUBLISH to a SUBSCRIBE on the same
 * Redis. On one Redis, and on a local 3-master Redis Cluster (the event crosses the cluster bus).
 */
async function propagation (ctx: BenchContext, label: string, target: RedisTarget, keyPrefix: string): Promise<Row> {
  const a = await createRedisRegistryStore({ target, keyPrefix })
  const c = await createRedisRegistryStore({ target, keyPrefix })
  ctx.defer(async () => { await a.close(); await c.close() })
  const pub = createRedisClient(target, { commandTimeoutMs: 2000 })
  const sub = createRedisClient(target, { commandTimeoutMs: 2000 })
  pub.on('error', () => {})
  sub.on('error', () => {})
  ctx.defer(async () => { await quitWithTimeout(pub, 1000); await quitWithTimeout(sub, 1000) })
  const channel = `${keyPrefix}bench-baseline`
  await sub.subscribe(channel)

  let waiting: { serverId: string, resolve: () => void } | undefined
  c.subscribe((change: RegistryChange) => {
    if (change.op === 'put' && waiting !== undefined && change.serverId === waiting.serverId) waiting.resolve()
  })
  let baselineWaiting: { token: string, resolve: () => void } | undefined
  sub.on('message', (ch: string, message: string) => {
    if (ch === channel && baselineWaiting !== undefined && message === baselineWaiting.token) baselineWaiting.resolve()
  })
  const subject: number[] = []
  const baseline: number[] = []
  for (let i = 0; i < CHANGES + 10 && ctx.signal.aborted !== true; i++) {
    const serverId = `bench-${i}`
    const seen = new Promise<void>((resolve) => { waiting = { serverId, resolve } })
    const t0 = performance.now()
    await a.put({ kind: 'user', userId: 'bench' }, serverId, { type: 'streamable_http', url: 'https://93.184.216.34/mcp', enabled: true, priority: 0 })
    await seen
    const t1 = performance.now()
    const token = `t${i}`
    const echoed = new Promise<void>((resolve) => { baselineWaiting = { token, resolve } })
    const t2 = performance.now()
    await pub.publish(channel, token)
    await echoed
    const t3 = performance.now()
    if (i >= 10) { subject.push(t1 - t0); baseline.push(t3 - t2) }
  }
  ctx.log(`${label}: propagation p50 ${round(percentile(subject, 50))} ms, p99 ${round(percentile(subject, 99))} ms; bare pub/sub p99 ${round(percentile(baseline, 99))} ms`)
  return makeRow({
    ...PROPAGATION,
    id: label === 'one Redis' ? '17.2' : '17.3',
    name: `${PROPAGATION.name} (${label})`,
    metric: 'p99 ms',
    value: round(percentile(subject, 99)),
    baseline: round(percentile(baseline, 99)),
    target: { on: 'value', op: '<', limit: 100 },
    notes: `${subject.length} changes, one at a time; p50 ${round(percentile(subject, 50))} ms (bare pub/sub ${round(percentile(baseline, 50))} ms)`,
    detail: { changes: subject.length, p50Ms: round(percentile(subject, 50)), baselineP50Ms: round(percentile(baseline, 50)) }
  })
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  const rows = await forwardedLogs(ctx)
  if (!await redisReachable(REDIS_URL)) {
    rows.push(makeRow({ ...PROPAGATION, metric: 'p99 ms', value: null, baseline: null, target: null, notes: `not measured: no Redis at ${REDIS_URL}` }))
    return rows
  }
  const keyPrefix = `tg-bench-propagation-${process.pid}-${Date.now()}:`
  ctx.defer(async () => await deleteKeys(keyPrefix, REDIS_URL))
  rows.push(await propagation(ctx, 'one Redis', { kind: 'single', url: REDIS_URL }, keyPrefix))
  const cluster = await startRedisCluster({ after: (fn) => { ctx.defer(async () => { await fn() }) } })
  rows.push(await propagation(ctx, 'local 3-master Redis Cluster', { kind: 'cluster', nodes: cluster.nodes.map(parseNode) }, 'tg-bench-propagation:'))
  return rows
}
