import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'

// Per-route rules are declared on the routes (config: public, requireKey, admin, invoke) and read
// by the plugins; these tests pin the corners where the rules combine.

const KEYS = 'admin-key-0123456789abcdef:*,tenant-key-0123456789abcdef:acme'
const ADMIN = { authorization: 'Bearer admin-key-0123456789abcdef' }
const ACME = { authorization: 'Bearer tenant-key-0123456789abcdef' }

test('GET /metrics with METRICS_REQUIRE_KEY needs a key but, like every public route, is not rate limited', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, METRICS_REQUIRE_KEY: 'true', RATE_LIMIT_PER_MINUTE: '1' } })
  assert.equal((await app.inject({ method: 'GET', url: '/metrics' })).statusCode, 401)
  for (let i = 0; i < 3; i++) {
    const res = await app.inject({ method: 'GET', url: '/metrics', headers: ACME })
    assert.equal(res.statusCode, 200, `scrape ${i + 1}`)
  }
  // The same key on a rate-limited route: the first request fits the minute, the second does not.
  assert.equal((await app.inject({ method: 'GET', url: '/tools', headers: ACME })).statusCode, 200)
  assert.equal((await app.inject({ method: 'GET', url: '/tools', headers: ACME })).statusCode, 429)
})

test('admin routes answer 403 GW_FORBIDDEN to a tenant key, after validation, and serve an admin key', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  const status = await app.inject({ method: 'GET', url: '/status', headers: ACME })
  assert.equal(status.statusCode, 403)
  assert.equal(status.json().code, 'GW_FORBIDDEN')
  // The refusal names the route, not one admin feature (it was 'Global servers are managed with an admin key' on every one).
  assert.equal(status.json().message, 'GET /status needs an admin key')
  const policy = await app.inject({ method: 'DELETE', url: '/users/acme/policy', headers: ACME })
  assert.equal(policy.statusCode, 403)
  assert.equal(policy.json().message, 'DELETE /users/{userId}/policy needs an admin key')
  assert.equal((await app.inject({ method: 'GET', url: '/status', headers: ADMIN })).statusCode, 200)
  // A malformed request is a 400 whoever sends it (the admin rule runs with the handler, after validation).
  const bad = await app.inject({ method: 'PUT', url: '/mcp/servers/gh', headers: ACME, payload: { type: 'streamable_http', url: 5 } })
  assert.equal(bad.statusCode, 400)
})

test('invocation metrics count /invoke answers; a refused /mcp request (JSON-RPC answer) is not an invocation', async (t) => {
  const app = await buildTestApp(t)
  const invocations = async (): Promise<string[]> => {
    const text = (await app.inject({ method: 'GET', url: '/metrics' })).body
    return text.split('\n').filter((l) => l.startsWith('gateway_invocations_total{'))
  }
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' }
  const mcp = await app.inject({ method: 'POST', url: '/mcp', headers, payload: '{' })
  assert.equal(mcp.statusCode, 400)
  assert.equal(mcp.json().jsonrpc, '2.0')
  assert.deepEqual((await invocations()).filter((l) => l.includes('endpoint="/mcp"')), [])

  const invoke = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'no_such_tool' } })
  assert.equal(invoke.statusCode, 404)
  assert.ok((await invocations()).some((l) => l.includes('endpoint="/invoke"') && l.includes('GW_TOOL_NOT_FOUND')), 'the refused /invoke is counted')
})
