import { test } from 'node:test'
import assert from 'node:assert/strict'
import { renderTools, toGeminiSchema } from '../../../src/routing/formats.js'
import type { ListedTool } from '../../../src/routing/router.js'

const schema = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object',
  properties: {
    owner: { type: 'string', format: 'email' },
    nested: { type: 'object', properties: { deep: { anyOf: [{ type: 'string' }, { type: 'null' }] } }, additionalProperties: false },
    mode: { const: 'fast' },
    ref: { $ref: '#/$defs/Item' },
    maybe: { type: ['integer', 'null'] }
  },
  required: ['owner'],
  additionalProperties: false,
  $defs: { Item: { type: 'object', properties: { id: { type: 'integer' } }, additionalProperties: false } }
}
const tool: ListedTool = {
  name: 'user_1_tool_x',
  entry: {
    route: 'user_mcp',
    source: 's',
    name: 'user_1_tool_x',
    spec: { name: 'x', description: 'd', inputSchema: schema, title: 'X', annotations: { readOnlyHint: true } }
  }
}

test('openai, responses, anthropic, mcp pass the MCP schema through whole; strict says whether it qualifies', () => {
  // `maybe` and the others are optional: strict mode would change their meaning, so strict is false.
  assert.deepEqual(
    renderTools([tool], 'openai'),
    [{ type: 'function', function: { name: 'user_1_tool_x', description: 'd', parameters: schema, strict: false } }]
  )
  assert.deepEqual(renderTools([tool], 'responses'), [{ type: 'function', name: 'user_1_tool_x', description: 'd', parameters: schema, strict: false }])
  assert.deepEqual(renderTools([tool], 'anthropic'), [{ name: 'user_1_tool_x', description: 'd', input_schema: schema }])
  assert.deepEqual(
    renderTools([tool], 'mcp'),
    [{ name: 'user_1_tool_x', title: 'X', description: 'd', inputSchema: schema, annotations: { readOnlyHint: true } }]
  )
})

test('openai and responses: strict is true for a schema that qualifies; responses closes open objects, chat never rewrites', () => {
  const open = { type: 'object', properties: { q: { type: 'string' }, n: { type: ['integer', 'null'] } }, required: ['q', 'n'] }
  const closed = { ...open, additionalProperties: false }
  const listed = (s: Record<string, unknown>): ListedTool => ({
    name: 't',
    entry: { route: 'function', source: 't', name: 't', spec: { name: 't', description: '', inputSchema: s } }
  })
  assert.deepEqual(renderTools([listed(closed)], 'openai')[0]?.function, { name: 't', description: '', parameters: closed, strict: true })
  assert.deepEqual(renderTools([listed(open)], 'openai')[0]?.function, { name: 't', description: '', parameters: open, strict: false })
  assert.deepEqual(renderTools([listed(open)], 'responses')[0], { type: 'function', name: 't', description: '', parameters: closed, strict: true })
  assert.deepEqual(
    open,
    { type: 'object', properties: { q: { type: 'string' }, n: { type: ['integer', 'null'] } }, required: ['q', 'n'] },
    'input not modified'
  )
})

test('gemini: only Gemini Schema fields; upper-case types; int64 fields as strings; $ref inlined; null -> nullable; const -> enum', () => {
  const g = toGeminiSchema({
    ...schema,
    properties: {
      ...schema.properties,
      name: { type: 'string', minLength: 1, maxLength: 64, pattern: '^a' },
      tags: { type: 'array', items: { type: 'string' }, maxItems: 3, uniqueItems: true }
    }
  })
  const text = JSON.stringify(g)
  for (const banned of ['$schema', 'additionalProperties', '$ref', '$defs', '"const"', '"null"', 'uniqueItems']) {
    assert.ok(!text.includes(banned), `${banned} in ${text}`)
  }
  const props = g.properties as Record<string, any>
  assert.equal(g.type, 'OBJECT')
  assert.deepEqual(props.owner, { type: 'STRING', description: 'format: email' })
  assert.deepEqual(props.nested.properties.deep, { type: 'STRING', nullable: true })
  assert.deepEqual(props.mode, { type: 'STRING', enum: ['fast'] })
  assert.deepEqual(props.ref, { type: 'OBJECT', properties: { id: { type: 'INTEGER' } } })
  assert.deepEqual(props.maybe, { type: 'INTEGER', nullable: true })
  assert.deepEqual(props.name, { type: 'STRING', pattern: '^a', minLength: '1', maxLength: '64' })
  assert.deepEqual(props.tags, { type: 'ARRAY', items: { type: 'STRING' }, maxItems: '3' })
  assert.deepEqual(g.required, ['owner'])
  // the input is not modified
  assert.ok('$defs' in schema)
})

test('gemini: no type beside anyOf; non-string enums described; allOf merged; exclusive bounds made inclusive', () => {
  const g = toGeminiSchema({
    type: 'object',
    properties: {
      either: { type: 'object', anyOf: [{ properties: { a: { type: 'string' } } }, { properties: { b: { type: 'string' } } }] },
      multi: { type: ['string', 'integer'] },
      level: { enum: [1, 2, 3], description: 'Level' },
      both: {
        allOf: [{ type: 'object', properties: { x: { type: 'number', exclusiveMinimum: 0 } }, required: ['x'] }, { properties: { y: { type: 'boolean' } } }]
      },
      choice: { oneOf: [{ type: 'string' }, { type: 'integer' }, { type: 'null' }] }
    }
  })
  const props = g.properties as Record<string, any>
  assert.deepEqual(
    props.either,
    { anyOf: [{ type: 'OBJECT', properties: { a: { type: 'STRING' } } }, { type: 'OBJECT', properties: { b: { type: 'STRING' } } }] }
  )
  assert.deepEqual(props.multi, { anyOf: [{ type: 'STRING' }, { type: 'INTEGER' }] })
  assert.deepEqual(props.level, { type: 'INTEGER', description: 'Level (one of: 1, 2, 3)' })
  assert.deepEqual(props.both, { type: 'OBJECT', properties: { x: { type: 'NUMBER', minimum: 0 }, y: { type: 'BOOLEAN' } }, required: ['x'] })
  assert.deepEqual(props.choice, { anyOf: [{ type: 'STRING' }, { type: 'INTEGER' }], nullable: true })
})

test('gemini: a tool without parameters has no parameters field (Gemini refuses an OBJECT without properties)', () => {
  const bare: ListedTool = {
    name: 'b',
    entry: { route: 'function', source: 'b', name: 'b', spec: { name: 'b', description: 'x', inputSchema: { type: 'object', properties: {} } } }
  }
  assert.deepEqual(renderTools([bare], 'gemini'), [{ name: 'b', description: 'x' }])
})

test('gemini: a recursive $ref is cut at a depth instead of looping', () => {
  const recursive = {
    type: 'object',
    properties: { node: { $ref: '#/definitions/Node' } },
    definitions: { Node: { type: 'object', properties: { child: { $ref: '#/definitions/Node' } } } }
  }
  const g = toGeminiSchema(recursive)
  assert.ok(JSON.stringify(g).length < 20_000)
  assert.ok(!JSON.stringify(g).includes('$ref'))
})

test('a tool without an object schema gets an empty object schema', () => {
  const bare: ListedTool = {
    name: 'b',
    entry: { route: 'function', source: 'b', name: 'b', spec: { name: 'b', description: '', inputSchema: undefined as unknown as Record<string, unknown> } }
  }
  assert.deepEqual(renderTools([bare], 'anthropic'), [{ name: 'b', description: '', input_schema: { type: 'object', properties: {} } }])
  const untyped: ListedTool = {
    name: 'u',
    entry: { route: 'function', source: 'u', name: 'u', spec: { name: 'u', description: '', inputSchema: { properties: { a: {} } } } }
  }
  assert.deepEqual(renderTools([untyped], 'mcp')[0]?.inputSchema, { properties: { a: {} }, type: 'object' })
})

test('gemini: a schema type that is a name of Object.prototype is unknown, not a function', () => {
  const g = toGeminiSchema({ type: 'object', properties: { a: { type: 'constructor' }, b: { type: ['toString', 'string'] } } })
  assert.deepEqual(JSON.parse(JSON.stringify(g)), g, 'the schema is plain JSON')
  assert.equal((g as { properties: { b: { type: string } } }).properties.b.type, 'STRING')
  assert.equal(typeof (g as { properties: { a: { type?: unknown } } }).properties.a.type !== 'function', true)
})
