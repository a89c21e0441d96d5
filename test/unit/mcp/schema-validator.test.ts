import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { InMemoryTransport } from '@modelcontextprotocol/sdk/inMemory.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { SharedSchemaValidator } from '../../../src/mcp/schema-validator.js'

type Schema = Parameters<SharedSchemaValidator['getValidator']>[0]

const numberResult = { type: 'object', properties: { n: { type: 'number' } }, required: ['n'] }

test('the same schema text compiles once, whichever object carries it', () => {
  const v = new SharedSchemaValidator()
  const a = v.getValidator(structuredClone(numberResult))
  const b = v.getValidator(structuredClone(numberResult))
  assert.deepEqual(v.stats(), { cached: 1, compiled: 1, sharedAjvSchemas: 1 })
  assert.deepEqual(a({ n: 1 }), { valid: true, data: { n: 1 }, errorMessage: undefined })
  const refused = b({ n: 'one' })
  assert.equal(refused.valid, false)
  assert.match(refused.errorMessage ?? '', /must be number/)
})

test('formats are validated, as the SDK default validator does', () => {
  const v = new SharedSchemaValidator()
  const check = v.getValidator({ type: 'object', properties: { at: { type: 'string', format: 'date-time' } } })
  assert.equal(check({ at: '2026-12-03T10:00:00Z' }).valid, true)
  assert.equal(check({ at: 'yesterday' }).valid, false)
})

test('two tenants\' schemas with the same $id and different content never resolve to each other', () => {
  const v = new SharedSchemaValidator()
  // Tenant A's server declares urn:result as a number; tenant B's declares the same id as a string.
  const asNumber = { $id: 'https://schemas.example/result.json', type: 'object', properties: { v: { type: 'number' } }, required: ['v'] }
  const asString = { $id: 'https://schemas.example/result.json', type: 'object', properties: { v: { type: 'string' } }, required: ['v'] }
  const a = v.getValidator(asNumber)
  const b = v.getValidator(asString)
  assert.equal(a({ v: 1 }).valid, true)
  assert.equal(a({ v: 'x' }).valid, false)
  assert.equal(b({ v: 'x' }).valid, true)
  assert.equal(b({ v: 1 }).valid, false)
  // A nested $id registered by one schema is not a name the other can reach.
  const nested = { type: 'object', $defs: { item: { $id: 'https://schemas.example/item.json', type: 'integer' } }, properties: { i: { $ref: 'https://schemas.example/item.json' } } }
  const other = { type: 'object', properties: { i: { $ref: 'https://schemas.example/item.json' } } }
  assert.equal(v.getValidator(nested)({ i: 2 }).valid, true)
  assert.throws(() => v.getValidator(other), /can't resolve reference https:\/\/schemas.example\/item.json/)
})

test('the cache is bounded: the least recently used schema leaves and is compiled again when asked', () => {
  const v = new SharedSchemaValidator(2)
  const schema = (n: number): Record<string, unknown> => ({ type: 'object', properties: { [`k${n}`]: { type: 'number' } } })
  v.getValidator(schema(1))
  v.getValidator(schema(2))
  v.getValidator(schema(1)) // 1 is now the most recent
  v.getValidator(schema(3)) // 2 leaves
  assert.deepEqual(v.stats(), { cached: 2, compiled: 3, sharedAjvSchemas: 2 })
  v.getValidator(schema(1))
  assert.equal(v.stats().compiled, 3, 'schema 1 was still cached')
  v.getValidator(schema(2))
  assert.equal(v.stats().compiled, 4, 'schema 2 was evicted, so it compiles again')
  assert.equal(v.getValidator(schema(2))({ k2: 'x' }).valid, false, 'a recompiled schema still validates')
})

test('the caller changing its schema object later does not change the validator', () => {
  const v = new SharedSchemaValidator()
  const schema = structuredClone(numberResult) as { properties: { n: { type: string } } }
  const check = v.getValidator(schema as never)
  schema.properties.n.type = 'string'
  assert.equal(check({ n: 1 }).valid, true)
  assert.equal(check({ n: 'x' }).valid, false)
})

test('SDK clients sharing one validator still refuse structured output that breaks the tool\'s outputSchema', async (t) => {
  const shared = new SharedSchemaValidator()
  let answer: Record<string, unknown> = { n: 1 }
  // A low-level server: McpServer would check its own output first, and the client's check is the one under test.
  const serve = async (): Promise<Client> => {
    const server = new Server({ name: 'schema-fixture', version: '1.0.0' }, { capabilities: { tools: {} } })
    server.setRequestHandler(ListToolsRequestSchema, async () => ({
      tools: [{ name: 'count', inputSchema: { type: 'object' }, outputSchema: numberResult as never }]
    }))
    server.setRequestHandler(CallToolRequestSchema, async () => ({ content: [{ type: 'text', text: 'ok' }], structuredContent: answer }))
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
    await server.connect(serverSide)
    const client = new Client({ name: 'test', version: '1.0.0' }, { jsonSchemaValidator: shared })
    await client.connect(clientSide)
    t.after(async () => { await client.close(); await server.close() })
    await client.listTools()
    return client
  }
  const first = await serve()
  const second = await serve()
  assert.deepEqual(shared.stats(), { cached: 1, compiled: 1, sharedAjvSchemas: 1 }, 'the second client reused the first one\'s compiled schema')
  const ok = await second.callTool({ name: 'count', arguments: {} })
  assert.deepEqual(ok.structuredContent, { n: 1 })
  answer = { n: 'many' }
  await assert.rejects(first.callTool({ name: 'count', arguments: {} }), /must be number/)
  await assert.rejects(second.callTool({ name: 'count', arguments: {} }), /must be number/)
})

test('a schema that does not compile throws, as the SDK default does, and leaves nothing behind in the shared instance', () => {
  const v = new SharedSchemaValidator()
  const broken = { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } }
  for (let i = 0; i < 50; i++) assert.throws(() => v.getValidator(broken), /can't resolve reference/)
  assert.deepEqual(v.stats(), { cached: 0, compiled: 50, sharedAjvSchemas: 0 })
  assert.equal(v.getValidator(numberResult)({ n: 1 }).valid, true)
  assert.deepEqual(v.stats(), { cached: 1, compiled: 51, sharedAjvSchemas: 1 })
})

test('evicted schemas leave the shared Ajv instance too', () => {
  const v = new SharedSchemaValidator(3)
  for (let i = 0; i < 20; i++) v.getValidator({ type: 'object', properties: { [`k${i}`]: { type: 'string' } } })
  assert.deepEqual(v.stats(), { cached: 3, compiled: 20, sharedAjvSchemas: 3 })
})

test('the dialect is the schema\'s own: none or 2020-12 as 2020-12 (MCP\'s default), 2019-09 as 2019-09, draft-07 as draft-07', () => {
  const v = new SharedSchemaValidator()
  // 2020-12 tuples are prefixItems; without $schema a schema is 2020-12.
  const tuple = { type: 'array', prefixItems: [{ type: 'string' }, { type: 'number' }] }
  assert.equal(v.getValidator(tuple)(['a', 1]).valid, true)
  assert.equal(v.getValidator(tuple)(['a', 'b']).valid, false)
  const declared = { $schema: 'https://json-schema.org/draft/2020-12/schema', ...tuple, $defs: { n: { type: 'number' } } }
  assert.equal(v.getValidator(declared)(['a', 2]).valid, true)
  assert.equal(v.getValidator(declared)([1, 2]).valid, false)
  // draft-07 tuples are an items array.
  // (The SDK's schema type has no draft-07 tuple form.)
  const draft07 = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'array', items: [{ type: 'string' }, { type: 'number' }] } as unknown as Schema
  assert.equal(v.getValidator(draft07)(['a', 1]).valid, true)
  assert.equal(v.getValidator(draft07)(['a', 'b']).valid, false)
  // 2019-09 has dependentRequired.
  const d2019 = { $schema: 'https://json-schema.org/draft/2019-09/schema', type: 'object', dependentRequired: { card: ['cvv'] } }
  assert.equal(v.getValidator(d2019)({ card: '4111' }).valid, false)
  assert.equal(v.getValidator(d2019)({ card: '4111', cvv: '123' }).valid, true)
  assert.equal(v.stats().compiled, 4)
})

test('a server\'s outputSchema pattern is matched in linear time: its own structuredContent cannot hold the event loop', { timeout: 60_000 }, () => {
  const v = new SharedSchemaValidator()
  // The server publishes the pattern and sends the content: in V8's engine 28 `a`s and a `!` took
  // 2 s, each one more doubling it. Both dialects, and a schema with an $id (an Ajv of its own).
  for (const extra of [{}, { $schema: 'http://json-schema.org/draft-07/schema#' }, { $id: 'https://schemas.example/out.json' }]) {
    const check = v.getValidator({ ...extra, type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } } as Schema)
    assert.equal(check({ s: `${'a'.repeat(5000)}!` }).valid, false)
    assert.equal(check({ s: 'aaa' }).valid, true)
  }
})
