/**
 * Tool search on two instances sharing one Redis (README "Tool search"): a server registered
 * through A is searched through B at once (B's index is keyed by the listing's version token,
 * which the registry change moved), and what a 2026-07-28 /mcp client's tool_search found
 * through A is in its search-mode listing through B (the working set lives in Redis).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { REDIS_URL, redisForTest } from '../helpers/redis.js'
import { MODERN } from '../helpers/mcp-raw.js'
import { FILES, TRACKER, toolServer } from '../helpers/search-tools.js'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'

const ALICE = 'k-alice-search-cluster-01'

test('two instances: a server registered through A is searched through B; a /mcp search through A is listed through B', async (t) => {
  const redis = await redisForTest(t)
  if (redis === undefined) return
  const env = {
    REDIS_URL,
    REDIS_KEY_PREFIX: redis.prefix,
    CLUSTER_SECRET: 'search-cluster-secret-0123456789',
    EGRESS_ALLOW: '127.0.0.1/32',
    API_KEYS: `${ALICE}:alice`
  }
  const [a, b] = [await buildTestApp(t, { env }), await buildTestApp(t, { env })]
  const auth = { authorization: `Bearer ${ALICE}` }
  const fixtures = await Promise.all([TRACKER, FILES].map(async (tools) => await startStreamableHttpFixture({ factory: toolServer(tools) })))
  t.after(async () => { for (const f of fixtures) await f.close() })
  const search = async (app: FastifyInstance, q: string): Promise<any> =>
    (await app.inject({ method: 'GET', url: `/tools/search?q=${encodeURIComponent(q)}&mcp=tracker,files&userId=alice&limit=2`, headers: auth })).json()

  const register = async (id: string, url: string): Promise<{ statusCode: number, body: string }> =>
    await a.inject({ method: 'PUT', url: `/users/alice/mcp/servers/${id}`, headers: auth, payload: { type: 'streamable_http', url } })
  let put = await register('tracker', fixtures[0]!.url)
  assert.equal(put.statusCode, 201, put.body)
  let found = await search(b, 'rename a file')
  assert.equal(found.total, 4, JSON.stringify(found))
  assert.deepEqual(found.unresolved.map((u: any) => u.name), ['files'])

  put = await register('files', fixtures[1]!.url)
  assert.equal(put.statusCode, 201, put.body)
  // B's cached index of this allow-list is for the old version token: the next search rebuilds it (pub/sub may take a moment).
  const deadline = Date.now() + 10_000
  do {
    found = await search(b, 'rename a file')
  } while (found.total !== 7 && Date.now() < deadline)
  assert.equal(found.total, 7)
  assert.equal(found.tools[0].function.name, 'user_alice_tool_move_file')

  const [urlA, urlB] = [await listenOnLoopback(a), await listenOnLoopback(b)]
  const connect = async (base: string): Promise<Client> => {
    const client = new Client({ name: 'search-cluster', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp?mcp=tracker,files&userId=alice&mode=search`), { requestInit: { headers: auth } }))
    t.after(async () => await client.close())
    return client
  }
  const [onA, onB] = [await connect(urlA), await connect(urlB)]
  assert.deepEqual((await onB.listTools()).tools.map((x) => x.name), ['tool_search'])
  const result = await onA.callTool({ name: 'tool_search', arguments: { query: 'merge a pull request', limit: 1 } })
  assert.match(JSON.stringify(result.content), /user_alice_tool_merge_pull_request/)
  assert.deepEqual((await onB.listTools()).tools.map((x) => x.name), ['tool_search', 'user_alice_tool_merge_pull_request'])
  const keys = await redis.redis.keys(`${redis.prefix}{search:*}:found`)
  assert.equal(keys.length, 1, 'one working set, in Redis, under a hashed key')
  assert.doesNotMatch(keys[0] as string, /alice|tracker/)
})
