import assert from 'node:assert/strict'
import { test } from 'node:test'
import { RedisApprovalStore } from '../../../src/approvals/index.js'
import type { ApprovalRecord } from '../../../src/approvals/index.js'
import { redisForTest, REDIS_URL } from '../../helpers/redis.js'

function record (approvalId: string, userId: string, now: number): ApprovalRecord {
  return { approvalId, userId, name: 'bash', callId: `call-${approvalId}`, rule: 'bash', status: 'pending', createdAt: now, expiresAt: now + 600_000, request: '{}' }
}

test('redis approvals: layout, one decision wins, the pending index follows', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const store = new RedisApprovalStore({ url: REDIS_URL, keyPrefix: r.prefix })
  t.after(async () => await store.close())
  await store.migrated
  const now = Date.now()
  await store.put(record('apr_1', 'acme', now))
  await store.put(record('apr_2', '', now + 1))
  assert.equal(await r.redis.hget(`${r.prefix}{approval:apr_1}:rec`, 'userId'), 'acme')
  assert.deepEqual(await r.redis.zrange(`${r.prefix}{approvals:acme}:pending`, 0, -1), ['apr_1'])
  assert.deepEqual(await r.redis.zrange(`${r.prefix}{approvals:_global}:pending`, 0, -1), ['apr_2'])

  const [x, y] = await Promise.all([
    store.decide('apr_1', 'approved', { now, decidedBy: 'a', reason: '' }),
    store.decide('apr_1', 'denied', { now, decidedBy: 'b', reason: '' })
  ])
  assert.equal([x, y].filter((o) => o.ok).length, 1)
  assert.deepEqual(await r.redis.zrange(`${r.prefix}{approvals:acme}:pending`, 0, -1), [])

  // A decision whose index update never happened (the decider died in between): skipped and removed.
  await r.redis.hset(`${r.prefix}{approval:apr_2}:rec`, 'status', 'denied')
  assert.deepEqual(await store.listPending('', now, 10), [])
  assert.equal(await r.redis.zcard(`${r.prefix}{approvals:_global}:pending`), 0)
})

test('redis approvals: keys of the untagged layout are moved once on start-up', async (t) => {
  const r = await redisForTest(t)
  if (r === undefined) return
  const p = r.prefix
  const now = Date.now()
  const old = record('apr_old', 'acme', now)
  await r.redis.hset(`${p}approval:apr_old`, Object.fromEntries(Object.entries(old).map(([k, v]) => [k, String(v)])))
  await r.redis.pexpire(`${p}approval:apr_old`, 3_600_000)
  await r.redis.zadd(`${p}approvals:pending:acme`, old.expiresAt, 'apr_old')

  const store = new RedisApprovalStore({ url: REDIS_URL, keyPrefix: p })
  t.after(async () => await store.close())
  const result = await store.migrated
  assert.deepEqual(result, { ran: true, renamed: 2, merged: 0, skipped: 0 })
  assert.equal(await r.redis.exists(`${p}approval:apr_old`, `${p}approvals:pending:acme`), 0)
  assert.ok(await r.redis.pttl(`${p}{approval:apr_old}:rec`) > 0, 'the TTL moved with the key')
  assert.deepEqual((await store.listPending('acme', now, 10)).map((x) => x.approvalId), ['apr_old'])
  const decided = await store.decide('apr_old', 'approved', { now, decidedBy: 'k', reason: '' })
  assert.equal(decided.ok, true)
})
