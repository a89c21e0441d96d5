import { test } from 'node:test'
import assert from 'node:assert/strict'
import { jsonOnce, responseChunks } from '../../../src/mcp-server/known-json.js'

const joined = (chunks: Array<string | Buffer>): string => chunks.map((chunk) => chunk.toString()).join('')

test('a response holding a known listing is its JSON.stringify, byte for byte, whatever its keys and their order', () => {
  const tools = [{ name: 'a', description: 'é "quoted" \n line', inputSchema: { type: 'object' } }, { name: 'b' }]
  const other = [{ uri: 'x' }]
  jsonOnce(tools)
  jsonOnce(other)
  const messages = [
    { jsonrpc: '2.0', id: 1, result: { tools } },
    { result: { tools }, jsonrpc: '2.0', id: 'x' },
    { jsonrpc: '2.0', id: 2, result: { resultType: 'complete', tools, ttlMs: 0, cacheScope: 'private', _meta: { k: { v: 1 } } } },
    { jsonrpc: '2.0', skipped: undefined, id: 3, result: { gone: undefined, tools, resources: other, nextCursor: undefined } },
    { jsonrpc: '2.0', id: 4, result: { a: 1, tools, b: [1, 2], other } }
  ]
  for (const message of messages) {
    const chunks = responseChunks(message)
    assert.ok(chunks !== undefined, JSON.stringify(message))
    assert.equal(joined(chunks), JSON.stringify(message))
    JSON.parse(joined(chunks))
  }
})

test('the known bytes are handed on as they are: the same Buffer for every answer, made once', () => {
  const tools = [{ name: 'a' }]
  const bytes = jsonOnce(tools)
  assert.equal(jsonOnce(tools), bytes)
  const first = responseChunks({ jsonrpc: '2.0', id: 1, result: { tools } })
  const second = responseChunks({ jsonrpc: '2.0', id: 2, result: { tools } })
  assert.ok(first?.includes(bytes))
  assert.ok(second?.includes(bytes))
})

test('a response without a known value is left to the caller', () => {
  assert.equal(responseChunks({ jsonrpc: '2.0', id: 1, result: { tools: [{ name: 'a' }] } }), undefined, 'an equal array is not the known one')
  assert.equal(responseChunks({ jsonrpc: '2.0', id: 1, error: { code: -1, message: 'x' } }), undefined)
  assert.equal(responseChunks({ jsonrpc: '2.0', id: 1, result: [1] }), undefined)
  assert.equal(responseChunks({ jsonrpc: '2.0', id: 1, result: null }), undefined)
})
