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
