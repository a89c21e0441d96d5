import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HttpError, INTERNAL_MESSAGE } from '../../../src/errors.js'
import { jsonRpcRefusalBody } from '../../../src/mcp-server/json-rpc.js'

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
