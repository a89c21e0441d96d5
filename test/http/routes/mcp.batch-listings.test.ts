/**
 * A JSON-RPC batch on /mcp answers at most 4 listings (tools, resources, templates, prompts): the SDK answers a
 * batch as one JSON text, and a 4.8 KB batch of 100 tools/list over a tenant's 4 MB listing was answered with
 * 418 MB (an audit). Past the fourth, each listing is a JSON-RPC error with data.code GW_RATE_LIMITED; the rest of
 * the batch runs.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildTestApp, listenOnLoopback } from '../../helpers/app.js'

const HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25' }

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
    headers: HEADERS,
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

test('listings a batch answers hold their bytes until the answer is sent: past the tenant\'s share they are refused, then answered again', async (t) => {
  // The SDK writes a batch's answer as one JSON text, a copy of each listing: 25 concurrent batches of 4 tools/list
  // over a 4 MB listing took the gateway to 1.2 GB of RSS (an audit). A share of 1 byte: one listing at a time.
  const base = await listenOnLoopback(await buildTestApp(t, { mcp: { answerBytes: { tenant: 1, instance: 1 << 30 } } }))
  const batch = JSON.stringify([
    { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    { jsonrpc: '2.0', id: 3, method: 'ping' }
  ])
  const post = async (): Promise<Array<{ id: number, result?: { tools?: unknown[] }, error?: { message: string, data?: { code?: string } } }>> => {
    const res = await fetch(`${base}/mcp?functions=calculate`, { method: 'POST', headers: HEADERS, body: batch })
    assert.equal(res.status, 200)
    return await res.json() as Awaited<ReturnType<typeof post>>
  }
  for (let round = 0; round < 2; round++) {
    let answers = await post()
    // The previous round's answer is given back when its response closes, a moment after the client has read it.
    for (let i = 0; i < 100 && answers.every((a) => a.id === 3 || a.error !== undefined); i++) {
      await sleep(20)
      answers = await post()
    }
    const listed = answers.filter((a) => a.id !== 3)
    assert.equal(listed.filter((a) => Array.isArray(a.result?.tools)).length, 1, JSON.stringify(answers).slice(0, 500))
    const refused = listed.find((a) => a.error !== undefined)
    assert.equal(refused?.error?.data?.code, 'GW_RATE_LIMITED')
    assert.match(refused?.error?.message ?? '', /waiting to be sent/)
    assert.deepEqual(answers.find((a) => a.id === 3)?.result, {})
  }
  // A single tools/list (the lean path) writes the cached listing's own bytes: it holds nothing.
  const single = await fetch(`${base}/mcp?functions=calculate`, { method: 'POST', headers: HEADERS, body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }) })
  assert.ok(Array.isArray(((await single.json()) as { result: { tools: unknown[] } }).result.tools))
})
