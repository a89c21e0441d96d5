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
})

test('a body with a __proto__ key (or constructor.prototype) is refused as such, not as malformed JSON: 400 GW_PROTOTYPE_KEY, on /mcp -32600', async (t) => {
  const app = await buildTestApp(t)
  // Valid JSON texts that Fastify's parser refused as "Body is not valid JSON": never parsed into an object the
  // gateway could merge into another (prototype poisoning), and told apart from a syntax error.
  const keys = [
    '{"name":"calculate","arguments":{"expression":"1+1","__proto__":{"admin":true}}}',
    '{"name":"calculate","__proto__":{"admin":true},"arguments":{"expression":"1+1"}}',
    '{"name":"calculate","arguments":{"expression":"1+1","x":[{"constructor":{"prototype":{"admin":true}}}]}}'
  ]
  for (const payload of keys) {
    const res = await post(app, '/invoke', payload)
    assert.equal(res.statusCode, 400, res.body)
    assert.equal(res.json().code, 'GW_PROTOTYPE_KEY')
    assert.match(res.json().message, /__proto__.*constructor.*prototype/)
    const rpc = await post(app, '/mcp', `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":${payload}}`)
    assert.equal(rpc.statusCode, 400, rpc.body)
    assert.equal(rpc.json().error.code, -32600)
    assert.equal(rpc.json().error.message, res.json().message)
    assert.deepEqual(rpc.json().error.data, { statusCode: 400, code: 'GW_PROTOTYPE_KEY' })
  }
  assert.equal(({} as Record<string, unknown>).admin, undefined, 'no prototype was changed')
  // Malformed JSON that holds the key is still malformed; a plain "constructor" member is no prototype key.
  assert.equal((await post(app, '/invoke', '{"__proto__":{"a":1},')).json().code, 'GW_MALFORMED_JSON')
  const plain = await post(app, '/invoke', '{"name":"calculate","arguments":{"expression":"1+1","constructor":"x"}}')
  assert.equal(plain.statusCode, 200, plain.body)
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

test('a body holding an object of more than 10,000 members is 413 before it is parsed, on the app and on /mcp; ' +
  'wide arrays and JSON in strings are not', async (t) => {
  const app = await buildTestApp(t)
  // 150,000 distinct keys in 1.3 MB (under BODY_LIMIT_BYTES) cost the gateway ~340 ms of CPU per request, most of it on
  // the event loop (JSON.parse of a dictionary-mode object, validation, the journal's masking and serialising): ten a
  // second from one tenant key were two busy cores. An object of 10,001 members is refused at once.
  const wide = (members: number): Record<string, number> => {
    const o: Record<string, number> = {}
    for (let i = 0; i < members; i++) o[i.toString(36)] = 0
    return o
  }
  for (const members of [10_001, 150_000]) {
    const res = await post(app, '/invoke', JSON.stringify({ name: 'calculate', arguments: { expression: '1+2', extra: wide(members) } }))
    assert.equal(res.statusCode, 413, res.body.slice(0, 300))
    assert.equal(res.json().code, 'GW_PAYLOAD_TOO_LARGE')
    assert.match(res.json().message, /an object of more than 10000 members/)
  }
  const rpc = await post(app, '/mcp', JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'calculate', arguments: wide(20_000) } }))
  assert.equal(rpc.statusCode, 413, rpc.body.slice(0, 300))
  assert.equal(rpc.json().error.data.code, 'GW_PAYLOAD_TOO_LARGE')
  // At the bound, the call goes on (the tool refuses the unknown member itself).
  const atBound = await post(app, '/invoke', JSON.stringify({ name: 'calculate', arguments: { expression: '1+2', extra: wide(9_999) } }))
  assert.equal(atBound.statusCode, 200, atBound.body.slice(0, 300))
  // Many small objects (rows of a table), and a JSON text of many members inside a string argument, are no wide object.
  const rows = Array.from({ length: 40_000 }, (_, i) => ({ id: i, name: 'x' }))
  const inString = JSON.stringify(wide(50_000))
  for (const extra of [rows, inString]) {
    const res = await post(app, '/invoke', JSON.stringify({ name: 'calculate', arguments: { expression: '1+2', extra } }))
    assert.equal(res.statusCode, 200, res.body.slice(0, 300))
  }
})
