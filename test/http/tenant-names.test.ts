import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../helpers/app.js'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'

// Listing and invoking decide the acting tenant with one rule: whatever a request can list
// under a tenant-encoded name (`user_{u}_service_{s}`), it can invoke (`user_{u}_tool_{t}`),
// and what one refuses the other refuses, in open mode and with keys.

const ADMIN = 'admin-key-0123456789'
const ALICE = 'alice-key-0123456789'
const BOB = 'bob-key-0123456789'

async function gateway (t: TestContext, keyed: boolean): Promise<FastifyInstance> {
  const fixture = await startStreamableHttpFixture({ marker: 'A' })
  t.after(async () => await fixture.close())
  const app = await buildTestApp(t, {
    env: { EGRESS_ALLOW: '127.0.0.1/32', ...(keyed ? { API_KEYS: `${ADMIN}:*,${ALICE}:alice,${BOB}:bob` } : {}) }
  })
  const res = await app.inject({
    method: 'PUT',
    url: '/users/alice/mcp/servers/everything',
    payload: { type: 'streamable_http', url: fixture.url },
    headers: keyed ? { authorization: `Bearer ${ADMIN}` } : {}
  })
  assert.equal(res.statusCode, 201, res.body)
  return app
}

interface Outcome { status: number, code?: string, tools?: string[], output?: string }

async function list (app: FastifyInstance, query: string, key?: string): Promise<Outcome> {
  const res = await app.inject({ method: 'GET', url: `/tools?${query}`, headers: key ? { authorization: `Bearer ${key}` } : {} })
  const body = res.json()
  return res.statusCode === 200
    ? { status: 200, tools: body.tools.map((x: { function: { name: string } }) => x.function.name) }
    : { status: res.statusCode, code: body.code }
}

async function invoke (app: FastifyInstance, payload: Record<string, unknown>, key?: string): Promise<Outcome> {
  const res = await app.inject({ method: 'POST', url: '/invoke', payload, headers: key ? { authorization: `Bearer ${key}` } : {} })
  const body = res.json()
  return res.statusCode === 200 ? { status: 200, output: body.output } : { status: res.statusCode, code: body.code }
}

/** The cases every mode runs: [userId in the request or none, key]. */
async function agree (app: FastifyInstance, userId: string | undefined, key: string | undefined): Promise<{ listed: Outcome, invoked: Outcome }> {
  const listed = await list(app, `mcp=user_alice_service_everything${userId ? `&userId=${userId}` : ''}`, key)
  const invoked = await invoke(app, { name: 'user_alice_tool_echo', arguments: { text: 'hi' }, ...(userId ? { userId } : {}) }, key)
  return { listed, invoked }
}

test('open mode: an encoded name implies its tenant for listing and invoking alike; another userId is refused by both', async (t) => {
  const app = await gateway(t, false)

  let { listed, invoked } = await agree(app, undefined, undefined)
  assert.equal(listed.status, 200, JSON.stringify(listed))
  assert.ok(listed.tools?.includes('user_alice_tool_echo'), JSON.stringify(listed))
  assert.deepEqual(invoked, { status: 200, output: 'A:hi' })

  ;({ listed, invoked } = await agree(app, 'alice', undefined))
  assert.equal(listed.status, 200)
  assert.ok(listed.tools?.includes('user_alice_tool_echo'))
  assert.deepEqual(invoked, { status: 200, output: 'A:hi' })

  ;({ listed, invoked } = await agree(app, 'bob', undefined))
  assert.deepEqual(listed, { status: 403, code: 'GW_TENANT_MISMATCH' })
  assert.deepEqual(invoked, { status: 403, code: 'GW_TENANT_MISMATCH' })

  // Two tenants in one request: neither path guesses.
  assert.deepEqual(await list(app, 'mcp=user_alice_service_everything,user_bob_service_everything'), { status: 403, code: 'GW_TENANT_MISMATCH' })
  assert.deepEqual(
    await invoke(app, { name: 'user_alice_tool_echo', arguments: { text: 'x' }, allow: { mcp: ['user_bob_service_everything'] } }),
    { status: 403, code: 'GW_TENANT_MISMATCH' }
  )
  // The allow-list form of the same listing invokes too.
  assert.deepEqual(
    await invoke(app, { name: 'user_alice_tool_echo', arguments: { text: 'y' }, allow: { mcp: ['user_alice_service_everything'] } }),
    { status: 200, output: 'A:y' }
  )

  // /mcp, whose URL is an allow-list, follows the same rule for tools/list and tools/call.
  const rpc = async (query: string, body: Record<string, unknown>): Promise<{ status: number, json: any }> => {
    const res = await app.inject({ method: 'POST', url: `/mcp?${query}`, payload: { jsonrpc: '2.0', id: 1, ...body }, headers: { accept: 'application/json, text/event-stream' } })
    return { status: res.statusCode, json: res.json() }
  }
  const mcpList = await rpc('mcp=user_alice_service_everything', { method: 'tools/list' })
  assert.equal(mcpList.status, 200, JSON.stringify(mcpList.json))
  assert.ok(mcpList.json.result.tools.some((x: { name: string }) => x.name === 'user_alice_tool_echo'), JSON.stringify(mcpList.json))
  const mcpCall = await rpc('mcp=user_alice_service_everything', { method: 'tools/call', params: { name: 'user_alice_tool_echo', arguments: { text: 'z' } } })
  assert.equal(mcpCall.json.result?.content?.[0]?.text, 'A:z', JSON.stringify(mcpCall.json))
  assert.equal((await rpc('mcp=user_alice_service_everything&userId=bob', { method: 'tools/list' })).status, 403)
})

test('with keys: a tenant key reaches only its own tenant, listing and invoking alike; an admin key follows the open-mode rule', async (t) => {
  const app = await gateway(t, true)

  for (const userId of [undefined, 'alice']) {
    const { listed, invoked } = await agree(app, userId, ALICE)
    assert.equal(listed.status, 200, `alice ${userId ?? '-'}: ${JSON.stringify(listed)}`)
    assert.ok(listed.tools?.includes('user_alice_tool_echo'))
    assert.deepEqual(invoked, { status: 200, output: 'A:hi' })
  }
  // Bob's key never reaches alice's server, whatever the request says.
  for (const userId of [undefined, 'bob', 'alice']) {
    const { listed, invoked } = await agree(app, userId, BOB)
    assert.deepEqual(listed, { status: 403, code: 'GW_TENANT_MISMATCH' }, `bob ${userId ?? '-'}`)
    assert.deepEqual(invoked, { status: 403, code: 'GW_TENANT_MISMATCH' }, `bob ${userId ?? '-'}`)
  }
  // An admin key may act for alice, with or without naming her; not for bob through alice's names.
  for (const userId of [undefined, 'alice']) {
    const { listed, invoked } = await agree(app, userId, ADMIN)
    assert.equal(listed.status, 200, `admin ${userId ?? '-'}: ${JSON.stringify(listed)}`)
    assert.ok(listed.tools?.includes('user_alice_tool_echo'))
    assert.deepEqual(invoked, { status: 200, output: 'A:hi' })
  }
  const { listed, invoked } = await agree(app, 'bob', ADMIN)
  assert.deepEqual(listed, { status: 403, code: 'GW_TENANT_MISMATCH' })
  assert.deepEqual(invoked, { status: 403, code: 'GW_TENANT_MISMATCH' })
})
