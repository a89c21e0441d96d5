import { test } from 'node:test'
import assert from 'node:assert/strict'
import { checkParamHeaders, paramHeadersOf } from '../../../src/mcp-server/param-headers.js'

const schema = {
  type: 'object',
  properties: {
    region: { type: 'string', 'x-mcp-header': 'Region' },
    count: { type: 'integer', 'x-mcp-header': 'Count' },
    plain: { type: 'string' },
    odd: { type: 'string', 'x-mcp-header': 'Bad Name' },
    nested: { type: 'object', properties: { tenant: { type: 'string', 'x-mcp-header': 'Tenant' } } }
  }
}

const headers = (h: Record<string, string>) => (name: string): string | undefined => h[name]

test('the x-mcp-header parameters of a schema, nested ones included; a header name that is not a token is ignored', () => {
  assert.deepEqual(paramHeadersOf(schema), [
    { path: ['region'], header: 'Region', type: 'string' },
    { path: ['count'], header: 'Count', type: 'integer' },
    { path: ['nested', 'tenant'], header: 'Tenant', type: 'string' }
  ])
  assert.deepEqual(paramHeadersOf({ type: 'object' }), [])
  assert.deepEqual(paramHeadersOf(null), [])
  assert.deepEqual(paramHeadersOf({ properties: { a: { 'x-mcp-header': 42 } } }), [])
})

test('Mcp-Param headers: present and equal passes; absent, different, or bad Base64 is a mismatch naming the header', () => {
  const declared = paramHeadersOf(schema)
  const ok = checkParamHeaders(declared, { region: 'us-west1', count: 3, nested: { tenant: 'acme' } },
    headers({ 'mcp-param-region': 'us-west1', 'mcp-param-count': '3', 'mcp-param-tenant': 'acme' }))
  assert.equal(ok, undefined)
  // Whitespace around a value is not part of it (RFC 9110 5.5); numbers compare as numbers.
  assert.equal(checkParamHeaders(declared, { region: 'eu', count: 42 }, headers({ 'mcp-param-region': '  eu ', 'mcp-param-count': '42.0' })), undefined)
  // The Base64 form decodes to UTF-8; without both sentinels a value is literal.
  const hello = Buffer.from('Héllo').toString('base64')
  assert.equal(checkParamHeaders(declared, { region: 'Héllo' }, headers({ 'mcp-param-region': `=?base64?${hello}?=` })), undefined)
  assert.equal(checkParamHeaders(declared, { region: `=?base64?${hello}` }, headers({ 'mcp-param-region': `=?base64?${hello}` })), undefined)

  const missing = checkParamHeaders(declared, { region: 'us' }, headers({}))
  assert.equal(missing?.header, 'Mcp-Param-Region')
  assert.match(missing?.message ?? '', /absent/)
  assert.match(checkParamHeaders(declared, { region: 'us' }, headers({ 'mcp-param-region': 'eu' }))?.message ?? '', /"eu".*region="us"/)
  assert.match(checkParamHeaders(declared, { region: 'Hello' }, headers({ 'mcp-param-region': '=?base64?SGVsbG8?=' }))?.message ?? '', /invalid Base64/)
  assert.match(checkParamHeaders(declared, { region: 'Hello' }, headers({ 'mcp-param-region': '=?base64?SGVs!!!bG8=?=' }))?.message ?? '', /invalid Base64/)
  assert.equal(checkParamHeaders(declared, { count: 3 }, headers({ 'mcp-param-count': '4' }))?.header, 'Mcp-Param-Count')
  assert.equal(checkParamHeaders(declared, { nested: { tenant: 'a' } }, headers({ 'mcp-param-tenant': 'b' }))?.header, 'Mcp-Param-Tenant')
})

test('no argument, a null or an object argument expects no header; a header without an argument is ignored', () => {
  const declared = paramHeadersOf(schema)
  assert.equal(checkParamHeaders(declared, {}, headers({})), undefined)
  assert.equal(checkParamHeaders(declared, { region: null }, headers({})), undefined)
  assert.equal(checkParamHeaders(declared, { region: { not: 'a primitive' } }, headers({})), undefined)
  assert.equal(checkParamHeaders(declared, undefined, headers({ 'mcp-param-region': 'x' })), undefined)
  // An inherited property is not an argument.
  assert.equal(checkParamHeaders(declared, Object.create({ region: 'x' }), headers({})), undefined)
})
