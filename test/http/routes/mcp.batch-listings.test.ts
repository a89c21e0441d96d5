/**
 * A JSON-RPC batch on /mcp answers at most 4 listings (tools, resources, templates, prompts): the SDK answers a
 * batch as one JSON text, and a 4.8 KB batch of 100 tools/list over a tenant's 4 MB listing was answered with
 * 418 MB (an audit). Past the fourth, each listing is a JSON-RPC error with data.code GW_RATE_LIMITED; the rest of
 * the batch runs.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'

test('a batch of 7 listings: 4 answered, the others refused with GW_RATE_LIMITED; other requests of the batch still run', async (t) => {
  const app = await buildTestApp(t)
  const listings = ['tools/list', 'tools/list', 'prompts/list', 'resources/list', 'tools/list', 'resources/templates/list', 'tools/list']
  const batch = [
    ...listings.map((method, i) => ({ jsonrpc: '2.0', id: i + 1, method })),
    { jsonrpc: '2.0', id: 99, method: 'ping' }
  ]
  const res = await app.inject({
    method: 'POST',
    url: '/mcp?functions=calculate',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' },
    payload: JSON.stringify(batch)
  })
  assert.equal(res.statusCode, 200, res.body)
  const answers = res.json() as Array<{ id: number, result?: unknown, error?: { code: number, message: string, data?: { code?: string } } }>
  const byId = new Map(answers.map((a) => [a.id, a]))
  const answered = listings.map((_, i) => byId.get(i + 1)).filter((a) => a?.result !== undefined)
  const refused = listings.map((_, i) => byId.get(i + 1)).filter((a) => a?.error !== undefined)
  assert.equal(answered.length, 4, res.body.slice(0, 2000))
  assert.equal(refused.length, 3)
  for (const r of refused) {
    assert.equal(r?.error?.data?.code, 'GW_RATE_LIMITED')
    assert.match(r?.error?.message ?? '', /at most 4 listings/)
  }
  assert.deepEqual(byId.get(99)?.result, {}, 'the rest of the batch ran')
})
