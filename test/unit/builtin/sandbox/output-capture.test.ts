import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HeadTailCapture } from '../../../../src/builtin/sandbox/output-capture.js'

test('HeadTailCapture keeps head and tail and counts the dropped bytes', () => {
  const c = new HeadTailCapture(10)
  c.push(Buffer.from('abcde'))
  c.push(Buffer.from('0123456789'))
  c.push(Buffer.from('vwxyz'))
  assert.equal(c.totalBytes, 20)
  assert.equal(c.text(), 'abcde\n[... truncated 10 bytes ...]\nvwxyz')
  const small = new HeadTailCapture(100)
  small.push(Buffer.from('hello'))
  assert.equal(small.text(), 'hello')
})

test('HeadTailCapture handles one chunk larger than the whole budget', () => {
  const c = new HeadTailCapture(4)
  c.push(Buffer.from('0123456789'))
  assert.equal(c.text(), '01\n[... truncated 6 bytes ...]\n89')
})
