/**
 * Issue 17 "Background processes across instances": what forwarding a `bash logs` to the
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
import { Redis } from 'ioredis'
import { ProcessManager, ProcessService } from '../src/builtin/processes/index.js'
import type { ProcessSnapshot } from '../src/builtin/processes/index.js'
import { createSandbox } from '../src/builtin/sandbox/create-sandbox.js'
import { createBashTool } from '../src/builtin/tools/bash.js'
import { WorkspaceManager } from '../src/builtin/workspace/workspaces.js'
import {
  CLUSTER_TOKEN_HEADER, ClusterTokenVerifier, ClusterTokens, FORWARDED_PROCESS_CALL_PATH, Membership, PeerClient, ProcessDirectory, newInstanceId
} from '../src/cluster/index.js'
import { silentLogger } from '../src/logger.js'
import { createRedisClient, quitWithTimeout } from '../src/redis/index.js'
import { makeRow, percentile, round, timePair } from './stats.js'
import type { BenchContext, Row } from './types.js'

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const LIMITS = { readMaxChars: 12_000, commandTimeoutMs: 30_000, bashLogChars: 12_000, maxProcessOutputChars: 120_000, outputMaxChars: 100_000 }
const WARMUP = 30
const REPS = 400
const ROW = { id: '17.1', name: 'bash logs forwarded to the owner instance (Redis lookup + signed HTTP) vs served locally' }

async function redisUp (): Promise<boolean> {
  const r = new Redis(REDIS_URL, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: 1000, retryStrategy: () => null })
  r.on('error', () => {})
  try {
    await r.connect()
    return await r.ping() === 'PONG'
  } catch {
    return false
  } finally {
    r.disconnect()
  }
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  if (!await redisUp()) {
    return [makeRow({ ...ROW, metric: 'p50 ms', value: null, baseline: null, target: null, notes: `not measured: no Redis at ${REDIS_URL}` })]
  }
  const keyPrefix = `tg-bench-cluster-${process.pid}-${Date.now()}:`
  ctx.defer(async () => {
    const r = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 })
    r.on('error', () => {})
    let cursor = '0'
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${keyPrefix}*`, 'COUNT', 500)
      cursor = next
      if (keys.length > 0) await r.del(...keys)
    } while (cursor !== '0')
    r.disconnect()
  })
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
    const service = bound.service = new ProcessService({ local: manager, coordination: { ...scope, membership, peers: new PeerClient(tokens) }, directory: new ProcessDirectory<ProcessSnapshot>(scope), logger: silentLogger })
    const verifier = new ClusterTokenVerifier(tokens)
    const server = createServer((req, res) => {
      let body = ''
      req.on('data', (c: Buffer) => { body += c.toString() })
      req.on('end', () => {
        if (req.url !== FORWARDED_PROCESS_CALL_PATH || !verifier.verify(req.headers[CLUSTER_TOKEN_HEADER] as string | undefined, { method: 'POST', path: req.url, body }).ok) {
          res.writeHead(401).end('{}')
          return
        }
        service.serveForwarded(JSON.parse(body)).then((answer) => {
          res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer))
        }, () => { res.writeHead(500).end('{}') })
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
  const started = await a.bash.run({ action: 'start', command: 'i=0; while [ $i -lt 100 ]; do i=$((i+1)); echo "line $i of the bench log"; done; sleep 600' }, call) as ProcessSnapshot
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
