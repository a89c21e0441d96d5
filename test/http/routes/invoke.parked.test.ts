/**
 * A legacy server that asks its client mid-call (elicitation/create pushed on the call's stream),
 * for callers that answer in a later request (issue 30): REST (`POST /invoke` with
 * clientCapabilities) and a 2026-07-28 /mcp client get `input_required` with the server's
 * question, the call parked on the gateway with its upstream request open; the retry with
 * `inputResponses` and the handle continues it and gets the result, under one callId. A retry of
 * another tenant, a handle whose call ended, and a caller that declared nothing are covered too.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { startAskingFixture } from '../../../scripts/lib/mcp-fixtures/asking-server.js'
import { buildTestApp } from '../../helpers/app.js'
import { MODERN } from '../../helpers/mcp-raw.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const GLOBEX = 'globex-key-0123456789'
const TOOL = 'user_acme_tool_ask_name'

interface Gw { post: (path: string, key: string, body: unknown, headers?: Record<string, string>) => Promise<{ status: number, json: any }> }

async function setup (t: TestContext): Promise<Gw> {
  const upstream = await startAskingFixture()
  t.after(async () => await upstream.close())
  const app = await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex` } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  const gw: Gw = {
    async post (path, key, body, headers = {}) {
      const res = await fetch(base + path, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
        body: JSON.stringify(body)
      })
      return { status: res.status, json: await res.json() }
    }
  }
  const put = await fetch(`${base}/users/acme/mcp/servers/asker`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'streamable_http', url: upstream.url })
  })
  assert.equal(put.status, 201, await put.text())
  return gw
}

const call = { name: TOOL, arguments: {}, allow: { mcp: ['asker'] }, userId: 'acme' }
const ELICIT = { elicitation: {} }
const accept = (key: string, name: string): Record<string, unknown> => ({ [key]: { action: 'accept', content: { name } } })

test('REST: a legacy server\'s pushed question is input_required; the retry with the answer continues the parked call under one callId', async (t) => {
  const gw = await setup(t)
  const first = await gw.post('/invoke', ACME, { ...call, clientCapabilities: { elicitation: {} } })
  assert.equal(first.status, 200, JSON.stringify(first.json))
  assert.equal(first.json.status, 'input_required')
  const [key, question] = Object.entries(first.json.inputRequests as Record<string, { method: string, params: { message: string } }>)[0] ?? []
  assert.ok(key !== undefined && question !== undefined)
  assert.equal(question.method, 'elicitation/create')
  assert.equal(question.params.message, 'Your name?')

  // Another tenant with the handle is refused; the call still waits for its owner.
  const theft = { ...call, clientCapabilities: ELICIT, inputResponses: accept(key, 'Mallory'), requestState: first.json.requestState }
  const stolen = await gw.post('/invoke', GLOBEX, theft)
  assert.notEqual(stolen.status, 200, JSON.stringify(stolen.json))

  const done = await gw.post('/invoke', ACME, {
    ...call, clientCapabilities: ELICIT, inputResponses: accept(key, 'Ada'), requestState: first.json.requestState
  })
  assert.equal(done.status, 200, JSON.stringify(done.json))
  assert.equal(done.json.isError, false, JSON.stringify(done.json))
  assert.equal(done.json.output, 'hello Ada')
  assert.equal(done.json.status, undefined)
  assert.equal(done.json.callId, first.json.callId)

  // The call ended: its handle continues nothing.
  const again = await gw.post('/invoke', ACME, {
    ...call, clientCapabilities: ELICIT, inputResponses: accept(key, 'Ada'), requestState: first.json.requestState
  })
  assert.equal(again.status, 400, JSON.stringify(again.json))
  assert.equal(again.json.code, 'GW_INVALID_REQUEST_STATE')
  assert.match(again.json.message, /no longer waits/)
})

test('REST: a caller that declared nothing is never asked: the server\'s question fails upstream and the call ends as its tool says', async (t) => {
  const gw = await setup(t)
  const plain = await gw.post('/invoke', ACME, call)
  assert.equal(plain.status, 200)
  assert.equal(plain.json.status, undefined)
  assert.equal(plain.json.isError, true, JSON.stringify(plain.json))
})

test('2026-07-28 /mcp: the pushed question reaches the client as input_required; the retry gets the result', async (t) => {
  const gw = await setup(t)
  const meta = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': { elicitation: { form: {} } },
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }
  }
  const headers = { 'mcp-protocol-version': MODERN, 'mcp-method': 'tools/call', 'mcp-name': TOOL }
  const path = '/mcp?mcp=user_acme_service_asker'
  const first = await gw.post(path, ACME, { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: TOOL, arguments: {}, _meta: meta } }, headers)
  assert.equal(first.json.result?.resultType, 'input_required', JSON.stringify(first.json))
  const key = Object.keys(first.json.result.inputRequests)[0] as string
  const done = await gw.post(path, ACME, {
    jsonrpc: '2.0',
    id: 2,
    method: 'tools/call',
    params: { name: TOOL, arguments: {}, inputResponses: accept(key, 'Grace'), requestState: first.json.result.requestState, _meta: meta }
  }, headers)
  assert.deepEqual(done.json.result?.content, [{ type: 'text', text: 'hello Grace' }], JSON.stringify(done.json))
})
