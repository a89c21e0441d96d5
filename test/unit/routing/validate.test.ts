import { test } from 'node:test'
import assert from 'node:assert/strict'
import { ArgumentValidator } from '../../../src/routing/validate.js'

const schema = (n: number): Record<string, unknown> => ({ type: 'object', properties: { [`p${n}`]: { type: 'string' } }, required: [`p${n}`] })

test('the same schema content is compiled once, whatever object carries it (every tool-list refresh brings new objects)', () => {
  const v = new ArgumentValidator()
  for (let i = 0; i < 500; i++) {
    const copy = JSON.parse(JSON.stringify(schema(1))) as Record<string, unknown>
    assert.deepEqual(v.validate(copy, { p1: 'x' }), { ok: true })
    assert.equal(v.validate(copy, { p1: 1 }).ok, false)
  }
  assert.equal(v.stats().compiles, 1)
})

test('compiled schemas are bounded: past the limit the oldest are dropped and Ajv starts afresh, and validation stays right', () => {
  const v = new ArgumentValidator({ maxSchemas: 50 })
  for (let i = 0; i < 400; i++) {
    assert.deepEqual(v.validate(schema(i), { [`p${i}`]: 'x' }), { ok: true })
    assert.match((v.validate(schema(i), {}) as { message: string }).message, new RegExp(`missing required property 'p${i}'`))
  }
  const stats = v.stats()
  assert.ok(stats.cached <= 50, `${stats.cached} cached`)
  assert.ok(stats.compilesOnCurrentAjv <= 100, `${stats.compilesOnCurrentAjv} compiles kept by the current Ajv instances`)
  assert.equal(stats.compiles, 400)
})

test('a server\'s pattern is matched in linear time: a backtracking pattern and a tenant\'s argument cannot hold the event loop', { timeout: 60_000 }, () => {
  const v = new ArgumentValidator()
  // The attack, both halves a tenant's (its own server's schema, its call's argument): in V8's
  // engine 28 `a`s took 2 s and each one more doubles it; 5,000 would never end.
  const schema = { type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } }, patternProperties: { '^k(a+)+$': { type: 'number' } } }
  assert.equal(v.validate(schema, { s: `${'a'.repeat(5000)}!` }).ok, false)
  assert.equal(v.validate(schema, { [`k${'a'.repeat(5000)}!`]: 'not checked: the key does not match' }).ok, true)
  assert.equal(v.validate(schema, { [`k${'a'.repeat(5000)}`]: 'x' }).ok, false)
  assert.equal(v.validate(schema, { s: 'aaaa' }).ok, true)
  // ECMAScript syntax without a linear-time form (a lookahead) is left to the server.
  assert.equal(v.validate({ type: 'object', properties: { s: { type: 'string', pattern: '^(?!foo)' } } }, { s: 'foobar' }).ok, true)
  const dated = { type: 'object', properties: { s: { type: 'string', pattern: '\\d{4}-\\d{2}' }, n: { type: 'number' } } }
  assert.equal(v.validate(dated, { s: 'x2026-12y', n: 1 }).ok, true)
  assert.equal(v.validate({ type: 'object', properties: { s: { type: 'string', pattern: '^\\d{4}$' } } }, { s: '12345' }).ok, false)
})
