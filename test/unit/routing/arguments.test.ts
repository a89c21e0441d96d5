import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parseArguments } from '../../../src/routing/arguments.js'

test('arguments a model emitted as a JSON string: parsed; not JSON or not an object refused; an object too wide to parse refused unread', () => {
  assert.deepEqual(parseArguments('{"a": 1}'), { ok: true, value: { a: 1 } })
  assert.deepEqual(parseArguments('  '), { ok: true, value: {} })
  assert.equal(parseArguments('[1]').ok, false)
  assert.equal(parseArguments('{').ok, false)
  // The body's own scan sees one string: the object inside it is the same cost (150,000 keys: ~340 ms per call).
  const wide = JSON.stringify(Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [i.toString(36), 0])))
  const refused = parseArguments(wide)
  assert.equal(refused.ok, false)
  assert.match(refused.ok ? '' : refused.message, /an object of more than 10000 members/)
  const atBound = JSON.stringify(Object.fromEntries(Array.from({ length: 10_000 }, (_, i) => [i.toString(36), 0])))
  assert.equal(parseArguments(atBound).ok, true)
})
