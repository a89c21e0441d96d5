import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { BYTE_CHUNKS, TailBuffer, TEXT_CHUNKS } from '../../../../src/builtin/sandbox/tail-buffer.js'

test('TailBuffer keeps the last max characters of any pushes, and what it dropped adds up to the rest', () => {
  fc.assert(fc.property(fc.integer({ min: 1, max: 20 }), fc.array(fc.string({ maxLength: 30 }), { maxLength: 30 }), (max, pushes) => {
    const tail = new TailBuffer(max, TEXT_CHUNKS)
    let dropped = 0
    for (const text of pushes) dropped += tail.push(text)
    const all = pushes.join('')
    const kept = all.slice(Math.max(0, all.length - max))
    assert.equal(tail.length, kept.length)
    assert.equal(dropped, all.length - kept.length)
    assert.equal(tail.contents(), kept)
    assert.ok(tail.chunkCount <= 1)
  }))
})

test('TailBuffer of bytes: a chunk larger than the whole tail is copied, a smaller one is cut in place', () => {
  const tail = new TailBuffer(4, BYTE_CHUNKS)
  const big = Buffer.from('0123456789')
  assert.equal(tail.push(big), 6)
  big.fill('x')
  assert.equal(tail.contents().toString(), '6789')
  const small = Buffer.from('abc')
  assert.equal(tail.push(small), 3)
  assert.equal(tail.chunkCount, 2)
  small[2] = 'C'.charCodeAt(0)
  assert.equal(tail.contents().toString(), '9abC')
  assert.equal(tail.length, 4)
})
