import { test } from 'node:test'
import assert from 'node:assert/strict'
import { renderTools, toGeminiSchema } from '../../../src/tools/formats.js'
import type { ListedTool } from '../../../src/tools/router.js'

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
  entry: { route: 'user_mcp', source: 's', name: 'user_1_tool_x', spec: { name: 'x', description: 'd', inputSchema: schema, title: 'X', annotations: { readOnlyHint: true } } }
}

test('openai, responses, anthropic, mcp pass the MCP schema through whole', () => {
  assert.deepEqual(renderTools([tool], 'openai'), [{ type: 'function', function: { name: 'user_1_tool_x', description: 'd', parameters: schema } }])
  assert.deepEqual(renderTools([tool], 'responses'), [{ type: 'function', name: 'user_1_tool_x', description: 'd', parameters: schema }])
  assert.deepEqual(renderTools([tool], 'anthropic'), [{ name: 'user_1_tool_x', description: 'd', input_schema: schema }])
  assert.deepEqual(renderTools([tool], 'mcp'), [{ name: 'user_1_tool_x', title: 'X', description: 'd', inputSchema: schema, annotations: { readOnlyHint: true } }])
})

test('gemini: $schema, additionalProperties removed; $ref inlined; anyOf/type with null -> nullable; const -> enum', () => {
  const g = toGeminiSchema(schema)
  const text = JSON.stringify(g)
  for (const banned of ['$schema', 'additionalProperties', '$ref', '$defs', '"const"', '"null"']) {
    assert.ok(!text.includes(banned), `${banned} in ${text}`)
  }
  const props = g.properties as Record<string, any>
  assert.deepEqual(props.nested.properties.deep, { type: 'string', nullable: true })
  assert.deepEqual(props.mode, { enum: ['fast'] })
  assert.deepEqual(props.ref, { type: 'object', properties: { id: { type: 'integer' } } })
  assert.deepEqual(props.maybe, { type: 'integer', nullable: true })
  assert.deepEqual(g.required, ['owner'])
  // the input is not modified
  assert.ok('$defs' in schema)
})

test('gemini: a recursive $ref is cut at a depth instead of looping', () => {
  const recursive = { type: 'object', properties: { node: { $ref: '#/definitions/Node' } }, definitions: { Node: { type: 'object', properties: { child: { $ref: '#/definitions/Node' } } } } }
  const g = toGeminiSchema(recursive)
  assert.ok(JSON.stringify(g).length < 20_000)
  assert.ok(!JSON.stringify(g).includes('$ref'))
})

test('a tool without an object schema gets an empty object schema', () => {
  const bare: ListedTool = { name: 'b', entry: { route: 'function', source: 'b', name: 'b', spec: { name: 'b', description: '', inputSchema: undefined as unknown as Record<string, unknown> } } }
  assert.deepEqual(renderTools([bare], 'anthropic'), [{ name: 'b', description: '', input_schema: { type: 'object', properties: {} } }])
})
