import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { buildTestApp } from '../helpers/app.js'

// Random bodies, names, arguments and query strings against the real app: never a 500, never a
// crash, and every error in the one JSON shape.

/** Names that an object-literal lookup would find on Object.prototype. */
const PROTO_NAMES = ['toString', 'constructor', '__proto__', 'hasOwnProperty', 'valueOf', 'isPrototypeOf', '__defineGetter__']

test('HTTP API fuzz: random invoke bodies, batch entries and /tools queries never give a 500', async (t) => {
  // Random `bash` commands may be generated: they run in the real sandbox, never on the host.
  const app = await buildTestApp(t, { env: { SANDBOX: 'bwrap' } })
  const names = fc.oneof(
    fc.constantFrom('calculate', 'json_query', 'text_stats', 'read_file', 'write_file', 'glob', 'grep', 'bash', 'edit', 'user_a_tool_x', 'a__b'),
    fc.constantFrom(...PROTO_NAMES),
    fc.string({ maxLength: 80 })
  )
  const anyJson = fc.jsonValue({ maxDepth: 3 })
  const body = fc.record({
    name: fc.oneof(names, anyJson),
    arguments: fc.oneof(
      anyJson,
      fc.dictionary(fc.constantFrom('path', 'expression', 'text', 'action', 'command', 'pattern', 'content', 'json'), anyJson),
      fc.string()
    ),
    userId: fc.oneof(fc.constant(undefined), fc.string({ maxLength: 70 })),
    context: fc.oneof(fc.constant(undefined), anyJson),
    allow: fc.oneof(fc.constant(undefined), anyJson)
  }, { requiredKeys: [] })
  await fc.assert(fc.asyncProperty(body, async (b) => {
    const res = await app.inject({ method: 'POST', url: '/invoke', payload: JSON.stringify(b), headers: { 'content-type': 'application/json' } })
    assert.ok(res.statusCode < 500, `${res.statusCode} ${res.body} for ${JSON.stringify(b)}`)
    const json = res.json()
    if (res.statusCode !== 200) assert.equal(typeof json.code, 'string')
    else assert.equal(typeof json.output, 'string')
  }), { numRuns: 400 })
  await fc.assert(fc.asyncProperty(fc.array(body, { maxLength: 5 }), async (calls) => {
    const res = await app.inject({ method: 'POST', url: '/invoke/batch', payload: { calls } })
    assert.ok(res.statusCode < 500, `${res.statusCode} ${res.body}`)
  }), { numRuns: 60 })
  const query = fc.dictionary(
    fc.constantFrom('functions', 'mcp', 'userId', 'format', 'strict', 'x'),
    fc.oneof(fc.constantFrom(...PROTO_NAMES), fc.string({ maxLength: 40 }))
  )
  await fc.assert(fc.asyncProperty(query, async (q) => {
    const res = await app.inject({ method: 'GET', url: '/tools', query: q })
    assert.ok(res.statusCode < 500, `${res.statusCode} ${res.body}`)
  }), { numRuns: 300 })
  // Every name of Object.prototype in every place a name goes, not left to chance (functions=toString was a 500).
  for (const name of PROTO_NAMES) {
    for (const key of ['functions', 'mcp', 'userId', 'format']) {
      const res = await app.inject({ method: 'GET', url: '/tools', query: { [key]: name } })
      assert.ok(res.statusCode < 500, `GET /tools?${key}=${name}: ${res.statusCode} ${res.body}`)
    }
    const res = await app.inject({ method: 'POST', url: '/invoke', payload: { name, arguments: {} } })
    assert.ok(res.statusCode < 500, `POST /invoke ${name}: ${res.statusCode} ${res.body}`)
  }
  assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
})
