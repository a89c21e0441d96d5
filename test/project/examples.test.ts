import { test } from 'node:test'
import assert from 'node:assert/strict'
import { evaluate } from '../../examples/functions/calculate.js'
import { currentTime } from '../../examples/functions/current-time.js'
import { query } from '../../examples/functions/json-query.js'

test('calculate: precedence, associativity, functions, errors', () => {
  const table: Array<[string, number]> = [
    ['1 + 2 * 3', 7], ['(1 + 2) * 3', 9], ['2 ^ 3 ^ 2', 512], ['-2 ^ 2', -4], ['2 ** 3', 8], ['10 % 4', 2],
    ['sqrt(16) + abs(-3)', 7], ['max(1, 5, 3)', 5], ['round(pi * 100) / 100', 3.14], ['1e3 / 4', 250], ['.5 + .25', 0.75], ['--3', 3]
  ]
  for (const [expr, value] of table) assert.equal(evaluate(expr), value, expr)
  for (const bad of ['1 +', '2 * (3', 'foo(1)', 'process.exit()', '1 / 0', '"a"', '1 2', 'x']) {
    assert.throws(() => evaluate(bad), Error, bad)
  }
  assert.throws(() => evaluate('('.repeat(500) + '1' + ')'.repeat(500)), /nested too deeply/)
})

test('json_query: JSONPath subset', () => {
  const doc = { orders: [{ id: 1, items: [{ sku: 'a' }, { sku: 'b' }] }, { id: 2, items: [{ sku: 'c' }] }], meta: { 'odd key': true } }
  assert.deepEqual(query(doc, '$.orders[*].items[0].sku'), ['a', 'c'])
  assert.deepEqual(query(doc, '$..sku'), ['a', 'b', 'c'])
  assert.deepEqual(query(doc, '$.orders[-1].id'), [2])
  assert.deepEqual(query(doc, "$.meta['odd key']"), [true])
  assert.deepEqual(query(doc, '$.missing.deeper'), [])
  assert.deepEqual(query([1, 2, 3], '$[*]'), [1, 2, 3])
  assert.throws(() => query(doc, 'orders'), /starts with/)
  assert.throws(() => query(doc, '$.orders[?(@.id>1)]'), /Unsupported selector/)
})

test('current_time: a real zone and a bad one', async () => {
  const ctx = { callId: 'c', userId: undefined, signal: new AbortController().signal }
  const r = await currentTime.handler({ timeZone: 'Asia/Kolkata' }, ctx) as Record<string, string>
  assert.match(r.localDateTime!, /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+05:30$/)
  const utc = await currentTime.handler({}, ctx) as Record<string, string>
  assert.match(utc.localDateTime!, /\+00:00$/)
  assert.ok(Math.abs(Date.parse(utc.utc!) - Date.now()) < 60_000)
  assert.throws(() => currentTime.handler({ timeZone: 'Mars/Olympus' }, ctx), /Unknown time zone/)
})
