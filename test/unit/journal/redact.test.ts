import { test } from 'node:test'
import assert from 'node:assert/strict'
import { capField, prepareField, prepareText, utf8Head } from '../../../src/journal/redact.js'

// What is masked, and what is not, is the detector's corpus: test/unit/secrets/detector.test.ts.

test('capping: under the budget a value is kept as is; over it, a marked head of at most the budget', () => {
  assert.deepEqual(capField({ a: 1 }, 100), { a: 1 })
  assert.equal(capField('short', 100), 'short')
  const big = 'é'.repeat(100)
  const capped = capField(big, 51) as { $capped: true, bytes: number, limit: number, head: string }
  assert.equal(capped.$capped, true)
  assert.equal(capped.bytes, 200)
  assert.equal(capped.limit, 51)
  assert.equal(capped.head, 'é'.repeat(25), 'never a split character')
  assert.equal(utf8Head('a😀b', 3), 'a')
  assert.equal(utf8Head('a😀b', 5), 'a😀')
})

test('a 10 MB argument is capped to 16 KiB, hashed whole, and its head masked', () => {
  const args = { token: 'tok-secret-1', blob: 'x'.repeat(10 * 1024 * 1024), note: 'Bearer abcdefghijklmnop' }
  const { stored, json } = prepareField(args, 16 * 1024)
  const s = stored as { $capped: boolean, bytes: number, head: string }
  assert.equal(s.$capped, true)
  assert.ok(s.bytes > 10 * 1024 * 1024)
  assert.ok(Buffer.byteLength(s.head) <= 16 * 1024)
  assert.ok(!s.head.includes('tok-secret-1'))
  assert.ok(json.length > 10 * 1024 * 1024, 'the hash covers the whole (masked) value')
  assert.ok(!json.includes('tok-secret-1'), 'what is hashed is masked')
  const out = prepareText('y'.repeat(100_000), 16 * 1024) as { $capped: boolean, bytes: number }
  assert.equal(out.$capped, true)
  assert.equal(out.bytes, 100_000)
})
