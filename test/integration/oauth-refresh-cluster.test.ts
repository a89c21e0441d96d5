/**
 * Refresh single-flight across instances (SPEC 16): two gateways on one Redis, a tenant's token
 * expired, 8 calls at once (4 on each): one refresh at the authorization server, every call passes.
 * The fixture rotates refresh tokens and revokes the grant when a used one comes back, so a second
 * refresh would not just be waste: it would fail every later call. The stored record is sealed.
 */
import { after, before, test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { browser, startAuthorizationServer, startProtectedMcpServer } from '../../scripts/lib/oauth-fixtures/index.js'
import type { AuthorizationServer, ProtectedMcpServer } from '../../scripts/lib/oauth-fixtures/index.js'
import { buildTestApp } from '../helpers/app.js'
import { REDIS_URL, redisForTest } from '../helpers/redis.js'

let as: AuthorizationServer
let mcp: ProtectedMcpServer

before(async () => {
  as = await startAuthorizationServer({ accessTokenTtl: 2 })
  mcp = await startProtectedMcpServer({ issuer: as.issuer })
})

after(async () => {
  await mcp.close()
  await as.close()
})

test('8 concurrent calls on two instances after expiry: one refresh, all pass; the record in Redis is sealed', async (t) => {
  const redis = await redisForTest(t)
  if (redis === undefined) return
  const env = {
    REDIS_URL,
    REDIS_KEY_PREFIX: redis.prefix,
    CLUSTER_SECRET: 'oauth-cluster-secret-0123456789',
    EGRESS_ALLOW: '127.0.0.1/32',
    PUBLIC_URL: 'http://127.0.0.1:9',
    LOAD_EXAMPLES: 'false',
    SECRETS_KEY: 'YSdqi4D+lk82wD8geYaX6FXtLlow49URdGkDN/icEME='
  }
  const [a, b] = [await buildTestApp(t, { env }), await buildTestApp(t, { env })]
  const put = await a.inject({ method: 'PUT', url: '/users/alice/mcp/servers/docs', payload: { url: mcp.url, auth: { type: 'oauth' } } })
  assert.equal(put.statusCode, 201, put.body)
  const started = await b.inject({ method: 'POST', url: '/users/alice/mcp/servers/docs/oauth/authorize', payload: {} })
  const back = new URL(await browser(started.json().authorizationUrl, { account: 'alice-account' }))
  // Started on B, completed on A: the state lives in Redis.
  assert.equal((await a.inject({ method: 'GET', url: `${back.pathname}${back.search}` })).statusCode, 200)
  const call = async (app: typeof a): Promise<{ isError: boolean, output: string }> =>
    (await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'user_alice_tool_whoami', userId: 'alice', arguments: {} } })).json()
  // Both instances connected and holding the first token.
  for (const app of [a, b]) assert.equal((await call(app)).isError, false)

  const refreshes = as.stats().grants.refresh_token
  await sleep(2300)
  const results = await Promise.all([a, b, a, b, a, b, a, b].map(call))
  for (const r of results) {
    assert.equal(r.isError, false, r.output)
    assert.equal(JSON.parse(r.output).sub, 'alice-account')
  }
  assert.equal(as.stats().grants.refresh_token, refreshes + 1, 'one refresh for the 8 calls on both instances')

  const keys = await redis.redis.keys(`${redis.prefix}*oauth*`)
  assert.ok(keys.length > 0, 'the connection is kept in Redis')
  for (const key of keys) {
    const value = (await redis.redis.type(key)) === 'string' ? await redis.redis.get(key) : ''
    // Sealed: the box's envelope, no field name of a token record. (Not /eyJ/: random base64url holds those
    // three characters in about one key of seventy, which failed this test once on a sealed value.)
    assert.match(value ?? '', /^enc:v1:/, `${key} is sealed`)
    assert.doesNotMatch(value ?? '', /refresh_token|access_token|"expires/, `${key} holds the tokens sealed`)
  }
})
