import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Redis } from 'ioredis'
import type { Cluster } from 'ioredis'
import { RedisApprovalStore } from '../../src/approvals/index.js'
import type { ApprovalRecord } from '../../src/approvals/index.js'
import { RedisJournalStore } from '../../src/journal/index.js'
import { parseNode } from '../../src/redis/index.js'
import { createRedisRegistryStore } from '../../src/registry/redis-store.js'
import type { RedisRegistryStore } from '../../src/registry/redis-store.js'
import type { ServerConfig } from '../../src/registry/server-config.js'
import type { DocumentChange, RegistryChange } from '../../src/registry/types.js'
import type { RedisClusterHandle } from '../../scripts/lib/redis-cluster.js'
import { buildTestApp } from '../helpers/app.js'
import { clusterClient, clusterTarget, lazyCluster } from '../helpers/redis-cluster.js'
import { delay, uniquePrefix } from '../helpers/redis-utils.js'

// Two store instances on a real local 3-master Redis Cluster act as two gateway instances.
const cluster = lazyCluster()
const TIMEOUT = { timeout: 90_000 }
const config: ServerConfig = { type: 'streamable_http', url: 'https://a.example/mcp', enabled: true, priority: 0 }

/** The master (`host:port`) that serves a key, asked of the cluster itself (CLUSTER KEYSLOT, CLUSTER SLOTS). */
async function nodeOf (client: Cluster, key: string): Promise<string> {
  const slot = Number(await client.cluster('KEYSLOT', key))
  const ranges = await client.cluster('SLOTS') as unknown as Array<[number, number, [string, number, ...unknown[]]]>
  const range = ranges.find(([from, to]) => slot >= from && slot <= to)
  assert.ok(range !== undefined, `slot ${slot} is served`)
  return `${range[2][0]}:${range[2][1]}`
}

/** Waits until `check` holds, failing with `what` after 10 s (no timing is asserted). */
async function until (what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!check()) {
    if (Date.now() > deadline) assert.fail(`not within 10 s: ${what}`)
    await delay(10)
  }
}

async function setup (t: { after: (fn: () => Promise<void>) => void }): Promise<{ c: RedisClusterHandle, raw: Cluster, prefix: string }> {
  const c = await cluster()
  const raw = clusterClient(c)
  t.after(async () => { raw.disconnect() })
  return { c, raw, prefix: uniquePrefix() }
}

test('registry on a cluster: two instances, tenants on every node, changes and documents seen by the other, uids distinct', TIMEOUT, async (t) => {
  const { c, raw, prefix } = await setup(t)
  const options = { target: clusterTarget(c), keyPrefix: prefix }
  const [a, b] = await Promise.all([createRedisRegistryStore(options), createRedisRegistryStore(options)]) as [RedisRegistryStore, RedisRegistryStore]
  t.after(async () => { await a.close(); await b.close() })
  assert.equal(a.migration, undefined, 'no layout-1 migration on a cluster')
  assert.equal(a.backend, 'redis-cluster')

  // Tenants until every master holds at least one tenant's registry.
  const tenantsByNode = new Map<string, string>()
  for (let i = 0; tenantsByNode.size < c.nodes.length && i < 200; i++) {
    const userId = `user-${i}`
    const node = await nodeOf(raw, `${prefix}{reg:u:${userId}}:srv`)
    if (!tenantsByNode.has(node)) tenantsByNode.set(node, userId)
  }
  const tenants = [...tenantsByNode.values()]
  assert.equal(tenantsByNode.size, 3, 'three tenants whose keys are on three different masters')
  for (const userId of tenants) {
    const srv = `${prefix}{reg:u:${userId}}:srv`
    assert.equal(await raw.cluster('KEYSLOT', srv), await raw.cluster('KEYSLOT', `${prefix}{reg:u:${userId}}:ver`), 'a scope\'s keys share a slot')
  }

  // A plain subscriber on every master: a PUBLISH from any node's script reaches all of them.
  const perNode = new Map<string, string[]>()
  const subscribers = c.nodes.map((n) => {
    const s = new Redis(parseNode(n).port, parseNode(n).host)
    perNode.set(n, [])
    s.on('message', (_ch: string, m: string) => perNode.get(n)?.push(m))
    return s
  })
  t.after(async () => { for (const s of subscribers) s.disconnect() })
  await Promise.all(subscribers.map(async (s) => await s.subscribe(`${prefix}events`)))

  const seenByB: RegistryChange[] = []
  b.subscribe((ch) => seenByB.push(ch))
  for (const userId of tenants) {
    await a.put({ kind: 'user', userId }, 'gh', config)
    await a.put({ kind: 'user', userId }, 'docs', { ...config, url: 'https://b.example/mcp' })
  }
  await a.put({ kind: 'global' }, 'shared', config)
  await until('B sees all 7 puts', () => seenByB.length >= 7)
  assert.deepEqual(
    seenByB.filter((ch) => ch.op === 'put' && ch.scope.kind === 'user')
      .map((ch) => ch.op !== 'resync' && ch.scope.kind === 'user' ? ch.scope.userId : '')
      .sort(),
    tenants.flatMap((u) => [u, u]).sort()
  )
  await until('every master\'s subscriber sees all 7 events', () => [...perNode.values()].every((m) => m.length >= 7))

  for (const userId of tenants) {
    assert.deepEqual((await b.list({ kind: 'user', userId })).map((s) => s.serverId), ['docs', 'gh'])
    assert.equal(await b.version({ kind: 'user', userId }), 2)
  }
  assert.deepEqual(await b.listUserIds(), [...tenants].sort())
  const gone = tenants[0] as string
  await b.delete({ kind: 'user', userId: gone }, 'gh')
  await b.delete({ kind: 'user', userId: gone }, 'docs')
  assert.deepEqual(await a.listUserIds(), tenants.slice(1).sort(), 'a tenant without servers is not listed')
  assert.deepEqual(await a.list({ kind: 'user', userId: gone }), [])

  // Policies: written on B, read and announced on A.
  const docsSeenByA: DocumentChange[] = []
  a.subscribeDocuments((ch) => docsSeenByA.push(ch))
  for (const userId of tenants) await b.putDocument('policy', { kind: 'user', userId }, { deny: [`tool-of-${userId}`] })
  await until('A sees the 3 policy changes', () => docsSeenByA.length >= 3)
  for (const userId of tenants) assert.deepEqual((await a.getDocument('policy', { kind: 'user', userId }))?.value, { deny: [`tool-of-${userId}`] })

  // Sandbox uids, allocated concurrently through both instances.
  const range = { first: 30_000, last: 30_049 }
  const names = Array.from({ length: 20 }, (_, i) => `t${i}`)
  const uids = await Promise.all(names.map(async (n, i) => await (i % 2 === 0 ? a : b).allocateSandboxUid(n, range)))
  assert.equal(new Set(uids).size, names.length, 'distinct uids')
  assert.ok(uids.every((u) => u >= range.first && u <= range.last))
  assert.deepEqual(await Promise.all(names.map(async (n) => await b.allocateSandboxUid(n, range))), uids, 'stable, same on both')
  console.log('registry on the cluster: tenants by master', Object.fromEntries(tenantsByNode), 'events per master', [...perNode.values()].map((m) => m.length))
})

test('journal on a cluster: a batch of several tenants, read and paged from the other instance', TIMEOUT, async (t) => {
  const { c, raw, prefix } = await setup(t)
  const opts = { target: clusterTarget(c), keyPrefix: prefix, maxEntriesPerTenant: 1000, retentionMs: 3_600_000 }
  const a = new RedisJournalStore(opts)
  const b = new RedisJournalStore(opts)
  t.after(async () => { await a.close(); await b.close() })
  while (a.status !== 'ready' || b.status !== 'ready') await delay(5)

  const tenants = ['acme', 'globex', 'initech', 'umbrella', '_global']
  const nodes = new Set(await Promise.all(tenants.map(async (x) => await nodeOf(raw, `${prefix}{journal:${x}}:stream`))))
  assert.ok(nodes.size >= 2, `the tenants' streams are on ${nodes.size} masters`)
  const batch = tenants.flatMap((tenant) => Array.from({ length: 7 }, (_, i) => ({ tenant, callId: `${tenant}-${i}`, name: i % 2 === 0 ? 'bash' : 'read_file', isError: i === 3, json: JSON.stringify({ callId: `${tenant}-${i}` }) })))
  assert.equal(await a.append(batch), batch.length, 'one batch over several slots, all written')

  for (const tenant of tenants) {
    const seen: string[] = []
    let before: string | undefined
    for (let pages = 0; pages < 10; pages++) {
      const page = await b.page(tenant, { limit: 3, ...(before !== undefined ? { before } : {}) })
      seen.push(...page.entries.map((e) => (JSON.parse(e) as { callId: string }).callId))
      if (page.next === null) break
      before = page.next
    }
    assert.deepEqual(seen, Array.from({ length: 7 }, (_, i) => `${tenant}-${6 - i}`), `${tenant}: every entry once, newest first, in pages of 3`)
    assert.equal(await b.get(tenant, `${tenant}-3`), JSON.stringify({ callId: `${tenant}-3` }))
    assert.deepEqual((await b.page(tenant, { limit: 10, isError: true })).entries.length, 1)
  }
  console.log(`journal on the cluster: ${batch.length} entries of ${tenants.length} tenants on ${nodes.size} masters`)
})

test('approvals on a cluster: listed on the other instance, each decided exactly once by two racing deciders', TIMEOUT, async (t) => {
  const { c, raw, prefix } = await setup(t)
  const a = new RedisApprovalStore({ target: clusterTarget(c), keyPrefix: prefix })
  const b = new RedisApprovalStore({ target: clusterTarget(c), keyPrefix: prefix })
  t.after(async () => { await a.close(); await b.close() })
  await Promise.all([a.migrated, b.migrated])

  const now = Date.now()
  const records: ApprovalRecord[] = Array.from({ length: 12 }, (_, i) => ({
    approvalId: `apr_${prefix.replace(/[^a-z0-9]/g, '')}${i}`,
    userId: i % 2 === 0 ? 'acme' : '',
    name: 'bash',
    callId: `call-${i}`,
    rule: 'bash',
    status: 'pending',
    createdAt: now + i,
    expiresAt: now + 600_000,
    request: '{}'
  }))
  for (const r of records) await a.put(r)
  const recordNodes = new Set(await Promise.all(records.map(async (r) => await nodeOf(raw, `${prefix}{approval:${r.approvalId}}:rec`))))
  assert.ok(recordNodes.size >= 2, 'records spread over the masters')

  assert.deepEqual((await b.listPending('acme', now, 100)).map((r) => r.approvalId), records.filter((r) => r.userId === 'acme').map((r) => r.approvalId))
  assert.equal((await b.listPending('', now, 100)).length, 6)
  assert.equal((await b.get(records[1]?.approvalId as string))?.callId, 'call-1', 'found by approvalId alone')

  let wins = 0
  for (const r of records) {
    const outcomes = await Promise.all([
      a.decide(r.approvalId, 'approved', { now: Date.now(), decidedBy: 'key-a', reason: 'ok' }),
      b.decide(r.approvalId, 'denied', { now: Date.now(), decidedBy: 'key-b', reason: 'no' })
    ])
    const ok = outcomes.filter((o) => o.ok)
    assert.equal(ok.length, 1, `${r.approvalId}: exactly one decision wins`)
    assert.ok(outcomes.some((o) => !o.ok && o.reason === 'decided'))
    wins += ok.length
  }
  assert.equal(wins, records.length)
  assert.deepEqual(await a.listPending('acme', Date.now(), 100), [], 'nothing pending after the decisions')
  assert.equal(await raw.zcard(`${prefix}{approvals:acme}:pending`), 0, 'off the pending index')
})

test('a gateway app with REDIS_CLUSTER_NODES registers a server and lists it; a second app sees it', TIMEOUT, async (t) => {
  const c = await cluster()
  const env = { REDIS_CLUSTER_NODES: c.nodes.join(','), REDIS_KEY_PREFIX: uniquePrefix(), EGRESS_ALLOW: '127.0.0.1/32' }
  const one = await buildTestApp(t, { env })
  const two = await buildTestApp(t, { env })
  const put = await one.inject({ method: 'PUT', url: '/users/acme/mcp/servers/local', payload: { type: 'http', url: 'http://127.0.0.1:9/mcp' } })
  assert.ok(put.statusCode === 200 || put.statusCode === 201, put.body)
  const listed = (await two.inject({ method: 'GET', url: '/users/acme/mcp/servers' })).json() as { servers: Array<{ serverId: string }> }
  assert.deepEqual(listed.servers.map((s) => s.serverId), ['local'])
  const ready = await one.inject({ method: 'GET', url: '/readyz' })
  assert.equal(ready.statusCode, 200, ready.body)
  assert.equal(ready.json().registry.backend, 'redis-cluster')
  assert.equal((await two.inject({ method: 'GET', url: '/status' })).json().registry.backend, 'redis-cluster')
})
