import { test } from 'node:test'
import assert from 'node:assert/strict'
import { rgPortable } from '../../../../../src/builtin/tools/grep/rg.js'

test('rgPortable keeps patterns whose Rust meaning differs in Node', () => {
  assert.equal(rgPortable('foo\\(\\d+\\)', false), true)
  assert.equal(rgPortable('^import .* from', false), true)
  for (const p of ['\\bword', '\\s+', 'caf\u00e9', '[[:alpha:]]', '[a&&b]', '[^]x', '\\u0041', '\\x{41}', '\\p{L}', '\\1']) {
    assert.equal(rgPortable(p, false), false, p)
  }
  assert.equal(rgPortable('[^k]', true), false)
})
