import { test } from 'node:test'
import assert from 'node:assert/strict'
import { toStrictJsonSchema } from 'openai/lib/transform'
import { strictParameters } from '../../../src/routing/openai-strict.js'

/** Sorts every `required` list: OpenAI's helper rewrites it in property order, which means the same. */
function canonical (v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical)
  if (v === null || typeof v !== 'object') return v
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === 'required' && Array.isArray(x) ? [...x].sort() : canonical(x)]))
}

/** OpenAI's own strict-mode converter must accept the schema and leave it as it is. */
function assertOpenAIFixpoint (schema: Record<string, unknown>): void {
  assert.deepEqual(canonical(toStrictJsonSchema(structuredClone(schema) as never)), canonical(schema))
}

const qualifying = {
  type: 'object',
  properties: {
    path: { type: 'string', description: 'p', pattern: '^[a-z]+$' },
    when: { type: ['string', 'null'], format: 'date-time' },
    count: { type: 'integer', minimum: 0, exclusiveMaximum: 10 },
    mode: { enum: ['a', 'b'], type: 'string' },
    item: { $ref: '#/$defs/Item' },
    list: { type: 'array', items: { anyOf: [{ type: 'string' }, { type: 'null' }] }, maxItems: 4 },
    fixed: { type: 'string', const: 'x' }
  },
  required: ['path', 'when', 'count', 'mode', 'item', 'list', 'fixed'],
  $defs: { Item: { type: 'object', properties: { id: { type: 'integer' } }, required: ['id'] } }
}

test('a schema whose properties are all required is closed for strict mode and OpenAI\'s converter leaves it unchanged', () => {
  const closed = strictParameters({ $schema: 'http://json-schema.org/draft-07/schema#', ...qualifying }, 'close')
  assert.ok(closed)
  assert.equal(closed.additionalProperties, false)
  assert.equal((closed.$defs as any).Item.additionalProperties, false)
  assert.ok(!('$schema' in closed))
  assertOpenAIFixpoint(closed)
  // as-is: not yet closed, so not strict; once closed it is returned as the same object
  assert.equal(strictParameters(qualifying, 'as-is'), undefined)
  assert.equal(strictParameters(closed, 'as-is'), closed)
})

test('anything strict mode would change or refuse makes the schema non-strict', () => {
  const base = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false }
  assert.ok(strictParameters(base, 'as-is'))
  const cases: Array<[string, Record<string, unknown>]> = [
    ['an optional property (required + nullable would change its meaning)', { ...base, properties: { a: { type: 'string' }, b: { type: 'string' } } }],
    ['additionalProperties true', { ...base, additionalProperties: true }],
    ['additionalProperties as a schema', { ...base, additionalProperties: { type: 'string' } }],
    ['a default', { ...base, properties: { a: { type: 'string', default: 'x' } } }],
    ['minLength', { ...base, properties: { a: { type: 'string', minLength: 1 } } }],
    ['allOf', { ...base, properties: { a: { allOf: [{ type: 'string' }] } } }],
    ['an unsupported format', { ...base, properties: { a: { type: 'string', format: 'uri' } } }],
    ['an array without items', { ...base, properties: { a: { type: 'array' } } }],
    ['a tuple', { ...base, properties: { a: { type: 'array', items: [{ type: 'string' }] } } }],
    ['a schema without a type', { ...base, properties: { a: {} } }],
    ['a boolean schema', { ...base, properties: { a: true } }],
    ['a dangling $ref', { ...base, properties: { a: { $ref: '#/$defs/Nope' } } }],
    ['a $ref with a constraining sibling', { ...base, properties: { a: { $ref: '#', minimum: 1 } } }],
    ['a root anyOf', { ...base, anyOf: [{ required: ['a'] }] }],
    ['a nested open object', { ...base, properties: { a: { type: 'object', properties: { x: { type: 'string' } }, required: [] } } }],
    ['objects in anyOf that start with the same key', {
      ...base,
      properties: {
        a: {
          anyOf: [
            { type: 'object', properties: { k: { type: 'string' } }, required: ['k'], additionalProperties: false },
            { type: 'object', properties: { k: { type: 'number' } }, required: ['k'], additionalProperties: false }
          ]
        }
      }
    }]
  ]
  for (const [why, schema] of cases) {
    assert.equal(strictParameters(schema, 'close'), undefined, why)
  }
})

test('nesting deeper than OpenAI\'s limit of 10 objects is not strict', () => {
  const nest = (levels: number): Record<string, unknown> => levels === 0
    ? { type: 'string' }
    : { type: 'object', properties: { n: nest(levels - 1) }, required: ['n'], additionalProperties: false }
  assert.ok(strictParameters(nest(10), 'as-is'))
  assert.equal(strictParameters(nest(11), 'as-is'), undefined)
})
