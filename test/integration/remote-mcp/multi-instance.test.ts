import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { startGateway } from '../../../scripts/lib/gateway-process.js'
import { REDIS_URL, redisForTest } from '../../helpers/redis.js'

async function json (url: string, init?: RequestInit): Promise<{ status: number, body: any }> {
  const res = await fetch(url, { ...init, headers: { 'content-type': 'application/json', ...(init?.headers ?? {}) } })
  return { status: res.status, body: await res.json() }
}

test('two gateway processes on one Redis: registered through A is usable through B at once; removed through B disconnects A', async (t) => {
  const env = await redisForTest(t)
  if (!env) return
  const upstream = await startStreamableHttpFixture({ marker: 'shared' })
  t.after(async () => await upstream.close())
  const common = {
    REDIS_URL,
    REDIS_KEY_PREFIX: env.prefix,
    SECRETS_KEY: Buffer.alloc(32, 9).toString('base64'),
    EGRESS_ALLOW: '127.0.0.1/32',
    SANDBOX: 'none',
    LOAD_EXAMPLES: 'false'
  }
  const [a, b] = await Promise.all([startGateway(t, common), startGateway(t, common)])

  const put = await json(`${a.url}/users/t1/mcp/servers/s`, { method: 'PUT', body: JSON.stringify({ type: 'http', url: upstream.url, headers: { 'X-Api-Key': 'plain-secret-xyz' } }) })
  assert.equal(put.status, 201)

  // B sees it at once (no polling): the write and its invalidation are atomic in Redis
  const listed = await json(`${b.url}/tools?mcp=s&userId=t1`)
  assert.ok(listed.body.tools.some((x: any) => x.function.name === 'user_t1_tool_echo'), JSON.stringify(listed.body))
  const viaB = await json(`${b.url}/invoke`, { method: 'POST', body: JSON.stringify({ name: 'user_t1_tool_echo', userId: 't1', arguments: { text: 'b' } }) })
  assert.equal(viaB.body.output, 'shared:b')
  const viaA = await json(`${a.url}/invoke`, { method: 'POST', body: JSON.stringify({ name: 'user_t1_tool_echo', userId: 't1', arguments: { text: 'a' } }) })
  assert.equal(viaA.body.output, 'shared:a')
  assert.equal((await json(`${a.url}/status`)).body.userClients, 1)

  // at rest in Redis: ciphertext only
  const raw = JSON.stringify(await env.redis.hgetall(`${env.prefix}{reg:u:t1}:srv`))
  assert.ok(raw.includes('enc:v1:'), raw)
  assert.ok(!raw.includes('plain-secret-xyz'), raw)

  // removal through B reaches A over pub/sub: A's client is closed and A no longer lists it
  const del = await json(`${b.url}/users/t1/mcp/servers/s`, { method: 'DELETE' })
  assert.equal(del.status, 200)
  let clients = -1
  for (let i = 0; i < 50 && clients !== 0; i++) {
    clients = (await json(`${a.url}/status`)).body.userClients
    if (clients !== 0) await sleep(100)
  }
  assert.equal(clients, 0, 'A dropped its client')
  const afterA = await json(`${a.url}/tools?mcp=s&userId=t1`)
  assert.deepEqual(afterA.body.unresolved.map((u: any) => u.name), ['s'])
  const callA = await json(`${a.url}/invoke`, { method: 'POST', body: JSON.stringify({ name: 'user_t1_tool_echo', userId: 't1', arguments: { text: 'gone' } }) })
  assert.equal(callA.status, 404)
  assert.equal(await a.stop(), 0)
  assert.equal(await b.stop(), 0)
})
