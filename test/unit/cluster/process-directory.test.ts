import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { ProcessDirectory, newInstanceId } from '../../../src/cluster/index.js'
import type { RedisScope } from '../../../src/cluster/index.js'
import { createRedisClient, quitWithTimeout } from '../../../src/redis/index.js'
import type { RedisTarget } from '../../../src/redis/index.js'
import { startRedisCluster } from '../../../scripts/lib/redis-cluster.js'
import { REDIS_URL, deleteKeys, requireRedis, uniquePrefix } from '../../helpers/redis-utils.js'

interface Snap { processId: string, startedAt: number, status: string, command: string }

const id = (n: number): string => `proc_${n.toString(16).padStart(32, '0')}`
const snap = (n: number, status = 'RUNNING'): Snap => ({ processId: id(n), startedAt: 1000 + n, status, command: `cmd ${n}` })

function scope (t: TestContext, target: RedisTarget, keyPrefix: string): RedisScope {
  const redis = createRedisClient(target, { commandTimeoutMs: 2000 })
  redis.on('error', () => {})
  t.after(async () => await quitWithTimeout(redis, 1000))
  return { redis, keyPrefix, instanceId: newInstanceId() }
}

async function scenario (t: TestContext, target: RedisTarget): Promise<void> {
  const keyPrefix = uniquePrefix()
  if (target.kind === 'single') t.after(async () => { await deleteKeys(keyPrefix) })
  const a = new ProcessDirectory<Snap>(scope(t, target, keyPrefix), { finishedTtlMs: 1000, runningTtlMs: 60_000, maxPerWorkspace: 3 })
  const b = new ProcessDirectory<Snap>(scope(t, target, keyPrefix))
  const ws = { tenant: 'acme', workspaceId: 'default', root: '/w/acme/default' }

  // Keys of one tenant share its tag (one slot on a cluster), the root never appears in a key.
  assert.match(a.recordKey('acme', id(1)), /\{proc:acme\}:rec:proc_/)
  assert.match(a.indexKey(ws), /\{proc:acme\}:ws:[0-9a-f]{32}$/)
  assert.doesNotMatch(a.indexKey(ws), /\/w\/acme/)
  assert.match(a.recordKey('we{ird}', id(1)), /\{proc:#[0-9a-f]{32}\}:rec:/, 'a tenant that could break the tag is hashed')

  await a.save(ws, snap(1))
  const rec = await b.get('acme', id(1))
  assert.equal(rec?.owner, a.instanceId, 'the owner is the instance that saved it')
  assert.deepEqual({ tenant: rec?.tenant, workspaceId: rec?.workspaceId, root: rec?.root }, ws)
  assert.deepEqual(rec?.snapshot, snap(1))
  assert.equal(await b.get('other', id(1)), undefined, 'another tenant does not see it')

  // The same workspaceId under another root, another workspace, another tenant: separate indexes.
  await a.save({ ...ws, root: '/admin/root' }, snap(2))
  await a.save({ ...ws, workspaceId: 'w2' }, snap(3))
  await a.save({ ...ws, tenant: 'globex' }, snap(4))
  assert.deepEqual((await b.list(ws)).map((r) => r.snapshot.processId), [id(1)])

  // A later save replaces the snapshot; a finished one expires after finishedTtlMs, and leaves the index.
  await a.save(ws, snap(5))
  await a.save(ws, snap(5, 'EXITED'))
  assert.deepEqual((await b.list(ws)).map((r) => `${r.snapshot.processId}:${r.snapshot.status}`), [`${id(1)}:RUNNING`, `${id(5)}:EXITED`])
  await sleep(1300)
  assert.equal(await b.get('acme', id(5)), undefined, 'finished record expired')
  assert.deepEqual((await b.list(ws)).map((r) => r.snapshot.processId), [id(1)], 'and is gone from the list')
  assert.notEqual(await a.get('acme', id(1)), undefined, 'the running one stays')

  // The index is bounded: past maxPerWorkspace the oldest ids go.
  for (const n of [6, 7, 8]) await a.save(ws, snap(n))
  assert.deepEqual((await b.list(ws)).map((r) => r.snapshot.processId), [id(6), id(7), id(8)])
}

test('process directory on one Redis: records per tenant, per-workspace index, TTLs, bounded index', async (t) => {
  if (!await requireRedis(t)) return
  await scenario(t, { kind: 'single', url: REDIS_URL })
})

test('process directory on a local 3-master Redis Cluster (keys of one script share a slot)', async (t) => {
  const cluster = await startRedisCluster(t)
  await scenario(t, { kind: 'cluster', nodes: cluster.nodes.map((n) => ({ host: n.split(':')[0] ?? '', port: Number(n.split(':')[1]) })) })
})
