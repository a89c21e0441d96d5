import { test } from 'node:test'
import assert from 'node:assert/strict'
import { encodeHeaderValue } from '../../../src/remote-mcp/mcp-headers.js'

const b64 = (s: string): string => `=?base64?${Buffer.from(s, 'utf8').toString('base64')}?=`

test('a plain field value is sent as is', () => {
  for (const v of ['echo', 'get_weather', 'file:///tmp/a b.txt', 'a\tb', '~!@#$%^&*()']) assert.equal(encodeHeaderValue(v), v)
})

test('non-ASCII, control characters, surrounding whitespace, an empty value and a value that looks encoded are base64 of their UTF-8', () => {
  for (const v of ['héllo', '名前', 'a\nb', 'a\u0000b', ' padded', 'padded ', '', '=?base64?YQ==?=', 'del\u007f']) {
    assert.equal(encodeHeaderValue(v), b64(v), JSON.stringify(v))
    const inner = encodeHeaderValue(v).slice('=?base64?'.length, -'?='.length)
    assert.equal(Buffer.from(inner, 'base64').toString('utf8'), v, 'decodes back')
  }
})
