import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HttpError, INTERNAL_MESSAGE } from '../../../src/errors.js'
import { duplicateRequestId, jsonRpcRefusalBody } from '../../../src/mcp-server/json-rpc.js'

test('a /mcp refusal body carries the HTTP status and GW_ code in error.data, every 5xx message hidden', () => {
  assert.deepEqual(jsonRpcRefusalBody(new HttpError('GW_RATE_LIMITED', 'Too many streams')), {
    jsonrpc: '2.0', id: null, error: { code: -32000, message: 'Too many streams', data: { statusCode: 429, code: 'GW_RATE_LIMITED' } }
  })
  assert.deepEqual(jsonRpcRefusalBody(new HttpError('GW_MALFORMED_JSON', 'Parse error: x')).error.code, -32700)
  assert.deepEqual(
    jsonRpcRefusalBody(new HttpError('GW_INTERNAL', 'MCP exchange failed')).error,
    { code: -32000, message: INTERNAL_MESSAGE, data: { statusCode: 500, code: 'GW_INTERNAL' } }
  )
  assert.deepEqual(
    jsonRpcRefusalBody(new TypeError('x is undefined')).error,
    { code: -32000, message: INTERNAL_MESSAGE, data: { statusCode: 500, code: 'GW_INTERNAL' } }
  )
})

test('a /mcp refusal keeps the id of the single request it refuses; a batch, a notification or no body gets null', () => {
  const refused = new HttpError('GW_FORBIDDEN', 'Not your tenant')
  assert.equal(jsonRpcRefusalBody(refused, { jsonrpc: '2.0', id: 7, method: 'tools/list' }).id, 7)
  assert.equal(jsonRpcRefusalBody(refused, { jsonrpc: '2.0', id: 'req-1', method: 'tools/list' }).id, 'req-1')
  assert.equal(jsonRpcRefusalBody(refused, [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }]).id, null)
  assert.equal(jsonRpcRefusalBody(refused, { jsonrpc: '2.0', method: 'notifications/initialized' }).id, null)
  assert.equal(jsonRpcRefusalBody(refused, { jsonrpc: '2.0', id: { not: 'an id' }, method: 'x' }).id, null)
  assert.equal(jsonRpcRefusalBody(refused).id, null)
})

test('refusals of a message as it is are JSON-RPC -32600 (a prototype key, a duplicate id in a batch)', () => {
  for (const code of ['GW_PROTOTYPE_KEY', 'GW_DUPLICATE_REQUEST_ID'] as const) {
    assert.deepEqual(jsonRpcRefusalBody(new HttpError(code, 'x')).error, { code: -32600, message: 'x', data: { statusCode: 400, code } })
  }
})

test('duplicateRequestId: the first id two requests of a batch share; ids match exactly, notifications and answers have none', () => {
  const request = (id: unknown): Record<string, unknown> => ({ jsonrpc: '2.0', id, method: 'tools/list' })
  assert.equal(duplicateRequestId([request(1), request(2), request(1)]), 1)
  assert.equal(duplicateRequestId([request('a'), request(2), request('a'), request(2)]), 'a')
  assert.equal(duplicateRequestId([request(1), request('1'), request(0)]), undefined)
  // A client's answers (no method) and notifications (no id) are no requests.
  assert.equal(duplicateRequestId([request(1), { jsonrpc: '2.0', id: 1, result: {} }, { jsonrpc: '2.0', method: 'notifications/initialized' }]), undefined)
  assert.equal(duplicateRequestId([]), undefined)
})
