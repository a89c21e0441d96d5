import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'

// plugins/json-body.ts is the one application/json parser: registered on the app (the gateway's
// error body) and again on the /mcp routes (a JSON-RPC parse error).

const json = { 'content-type': 'application/json' }
const mcpHeaders = { ...json, accept: 'application/json, text/event-stream' }

async function post (app: FastifyInstance, url: string, payload: string): Promise<LightMyRequestResponse> {
  return await app.inject({ method: 'POST', url, headers: url === '/mcp' ? mcpHeaders : json, payload })
}

test('on the app: an empty JSON body is no body, a malformed one is 400 GW_MALFORMED_JSON in the error body', async (t) => {
  const app = await buildTestApp(t)
  // No body: the route's schema refuses it (it needs one), not the parser.
  const empty = await post(app, '/invoke', '  ')
  assert.equal(empty.statusCode, 400)
  assert.equal(empty.json().code, 'GW_BAD_REQUEST')
  // A route whose body is optional takes an empty JSON body as none.
  const del = await app.inject({ method: 'DELETE', url: '/users/acme/policy', headers: json, payload: '' })
  assert.equal(del.statusCode, 200, del.body)

  const bad = await post(app, '/invoke', '{"name":')
  assert.equal(bad.statusCode, 400)
  assert.deepEqual(Object.keys(bad.json()).sort(), ['code', 'error', 'message', 'statusCode'])
  assert.equal(bad.json().code, 'GW_MALFORMED_JSON')
  assert.match(bad.json().message, /^Malformed JSON body: /)
  // Fastify's parser, prototype poisoning refused.
  const poisoned = await post(app, '/invoke', '{"name":"calculate","__proto__":{"admin":true}}')
  assert.equal(poisoned.statusCode, 400)
  assert.equal(poisoned.json().code, 'GW_MALFORMED_JSON')
})

test('on /mcp: a malformed or empty POST body is a JSON-RPC parse error (-32700) with the HTTP status 400', async (t) => {
  const app = await buildTestApp(t)
  for (const [payload, message] of [['{"jsonrpc":', /^Parse error: Body is not valid JSON/], ['', /^Parse error: empty body$/]] as const) {
    const res = await post(app, '/mcp', payload)
    assert.equal(res.statusCode, 400)
    const body = res.json()
    assert.equal(body.jsonrpc, '2.0')
    assert.equal(body.error.code, -32700)
    assert.match(body.error.message, message)
    assert.deepEqual(body.error.data, { statusCode: 400, code: 'GW_MALFORMED_JSON' })
  }
  // The app's parser is untouched by the /mcp one.
  assert.match((await post(app, '/invoke', '{')).json().message, /^Malformed JSON body: /)
})

test('a JSON body with a Content-Encoding the gateway does not decode is 415, on the app and on /mcp', async (t) => {
  const app = await buildTestApp(t)
  const { gzipSync } = await import('node:zlib')
  const call = JSON.stringify({ name: 'calculate', arguments: { expression: '1+2' } })
  // Compressed bytes were read as JSON text ("Malformed JSON body: Unexpected token"), and a plain body labelled gzip was run.
  for (const payload of [gzipSync(call), call]) {
    const res = await app.inject({ method: 'POST', url: '/invoke', headers: { ...json, 'content-encoding': 'gzip' }, payload })
    assert.equal(res.statusCode, 415, res.body)
    assert.equal(res.json().code, 'GW_UNSUPPORTED_MEDIA_TYPE')
    assert.match(res.json().message, /Content-Encoding gzip/)
  }
  const rpc = await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { ...mcpHeaders, 'content-encoding': 'br' },
    payload: '{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
  })
  assert.equal(rpc.statusCode, 415, rpc.body)
  assert.equal(rpc.json().error.data.code, 'GW_UNSUPPORTED_MEDIA_TYPE')
  // identity is no coding at all.
  const plain = await app.inject({ method: 'POST', url: '/invoke', headers: { ...json, 'content-encoding': 'identity' }, payload: call })
  assert.equal(plain.statusCode, 200, plain.body)
})
