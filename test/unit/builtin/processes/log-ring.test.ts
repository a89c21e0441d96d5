import { test } from 'node:test'
import assert from 'node:assert/strict'
import { LogRing } from '../../../../src/builtin/processes/log-ring.js'

test('LogRing: absolute offsets survive dropping old text; truncated when the cursor fell behind', () => {
  const r = new LogRing(10)
  r.append('0123456789')
  assert.deepEqual(r.read(0, 100), { offset: 0, nextOffset: 10, truncated: false, content: '0123456789' })
  r.append('abcde')
  assert.equal(r.start, 5)
  assert.equal(r.end, 15)
  assert.deepEqual(r.read(0, 3), { offset: 5, nextOffset: 8, truncated: true, content: '567' })
  assert.deepEqual(r.read(12, 100), { offset: 12, nextOffset: 15, truncated: false, content: 'cde' })
  assert.deepEqual(r.read(99, 100), { offset: 15, nextOffset: 15, truncated: false, content: '' })
  r.append('X'.repeat(25))
  assert.equal(r.start, 30)
  assert.equal(r.read(30, 100).content, 'X'.repeat(10))
})
