/**
 * GET /tools in every format, over built-ins, the example functions and an MCP server with
 * awkward schemas, checked against the providers' own packages: OpenAI's strict-mode converter
 * (`toStrictJsonSchema`, which refuses what strict mode refuses), the MCP SDK's `ToolSchema`,
 * and @google/genai's request pipeline. Anthropic's SDK has no validator, so its documented
 * constraints are checked by hand.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { toStrictJsonSchema } from 'openai/lib/transform'
import { GoogleGenAI, Type } from '@google/genai'
import type { FunctionDeclaration } from '@google/genai'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema, ToolSchema } from '@modelcontextprotocol/sdk/types.js'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { buildTestApp } from '../../helpers/app.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

/** Schemas MCP servers really send: zod output with $schema, $ref/$defs, null unions, const, open maps, optional props. */
const AWKWARD: Tool[] = [
  {
    name: 'refs',
    description: 'All properties required, $defs and $ref, draft-07 $schema.',
    inputSchema: {
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { target: { $ref: '#/$defs/Point' }, label: { type: ['string', 'null'] } },
      required: ['target', 'label'],
      additionalProperties: false,
      $defs: { Point: { type: 'object', properties: { x: { type: 'number' }, y: { type: 'number' } }, required: ['x', 'y'] } }
    }
  },
  {
    name: 'closed',
    description: 'Already strict as written.',
    inputSchema: { type: 'object', properties: { q: { type: 'string', enum: ['a', 'b'] } }, required: ['q'], additionalProperties: false }
  },
  {
    name: 'optional_null',
    description: 'Optional properties and anyOf with null.',
    inputSchema: {
      type: 'object',
      properties: {
        when: { anyOf: [{ type: 'string', format: 'date-time' }, { type: 'null' }] },
        limit: { type: 'integer', minimum: 1, maximum: 100, default: 10 },
        name: { type: 'string', minLength: 1, maxLength: 40 }
      },
      required: ['name']
    }
  },
  {
    name: 'consts_and_maps',
    description: 'const, numeric enums, an open map, a tuple, oneOf.',
    inputSchema: {
      type: 'object',
      properties: {
        kind: { const: 'fixed' },
        level: { enum: [1, 2, 3] },
        headers: { type: 'object', additionalProperties: { type: 'string' } },
        pair: { type: 'array', items: [{ type: 'string' }, { type: 'integer' }], minItems: 2, maxItems: 2 },
        choice: { oneOf: [{ type: 'string' }, { type: 'object', properties: { id: { type: 'integer' } } }] }
      },
      required: ['kind'],
      additionalProperties: true
    }
  },
  {
    name: 'recursive',
    description: 'A tree through a recursive $ref.',
    inputSchema: {
      type: 'object',
      properties: { root: { $ref: '#/definitions/Node' } },
      required: ['root'],
      definitions: { Node: { type: 'object', properties: { value: { type: 'string' }, children: { type: 'array', items: { $ref: '#/definitions/Node' } } } } }
    }
  },
  { name: 'no_args', description: 'Takes nothing.', inputSchema: { type: 'object' } }
]

function awkwardServer (): Server {
  const server = new Server({ name: 'awkward', version: '1.0.0' }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: AWKWARD }))
  server.setRequestHandler(CallToolRequestSchema, async (r) => ({ content: [{ type: 'text' as const, text: r.params.name }] }))
  return server
}

const FUNCTIONS = '@builtin,current_time,calculate,text_slugify'

async function appWithAwkwardServer (t: TestContext): Promise<FastifyInstance> {
  const fixture = await startStreamableHttpFixture({ factory: () => awkwardServer() })
  t.after(async () => await fixture.close())
  const app = await buildTestApp(t)
  const put = await app.inject({ method: 'PUT', url: '/mcp/servers/awk', payload: { type: 'http', url: fixture.url } })
  assert.equal(put.statusCode, 201, put.body)
  return app
}

async function list (app: FastifyInstance, format: string): Promise<any[]> {
  const res = await app.inject({ method: 'GET', url: `/tools?functions=${FUNCTIONS}&mcp=awk&format=${format}` })
  assert.equal(res.statusCode, 200, res.body)
  const body = res.json()
  assert.deepEqual(body.unresolved, [])
  assert.deepEqual(body.unavailable, [])
  // 8 built-ins, 3 example functions, 6 awkward MCP tools
  assert.equal(body.tools.length, 17, JSON.stringify(body.tools.map((x: any) => x.name ?? x.function?.name)))
  return body.tools
}

function canonical (v: unknown): unknown {
  if (Array.isArray(v)) return v.map(canonical)
  if (v === null || typeof v !== 'object') return v
  return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, k === 'required' && Array.isArray(x) ? [...x].sort() : canonical(x)]))
}

/** strict: true must be a schema OpenAI's converter accepts and leaves as it is (it changes or refuses anything else). */
function assertStrictHonest (name: string, parameters: Record<string, unknown>, strict: unknown): void {
  assert.equal(typeof strict, 'boolean', `${name}: strict must be set`)
  if (strict === true) assert.deepEqual(canonical(toStrictJsonSchema(structuredClone(parameters) as never)), canonical(parameters), name)
}

const byName = <T extends Record<string, any>>(tools: T[], key: (t: T) => string): Map<string, T> => new Map(tools.map((t) => [key(t), t]))

test('format=openai: Chat function tools, MCP schemas whole, strict true only when the schema qualifies as written', async (t) => {
  const app = await appWithAwkwardServer(t)
  const tools = byName(await list(app, 'openai'), (x) => x.function.name)
  for (const [name, tool] of tools) {
    assert.equal(tool.type, 'function')
    assert.deepEqual(Object.keys(tool.function).sort(), ['description', 'name', 'parameters', 'strict'])
    assertStrictHonest(name, tool.function.parameters, tool.function.strict)
  }
  for (const served of AWKWARD) assert.deepEqual(tools.get(served.name)?.function.parameters, served.inputSchema, served.name)
  assert.equal(tools.get('closed')?.function.strict, true)
  assert.equal(tools.get('refs')?.function.strict, false, 'Chat never rewrites, and $schema is outside the strict subset')
  assert.equal(tools.get('optional_null')?.function.strict, false)
})

test('format=responses: every tool says strict; a closable schema is closed and strict, anything else is whole and non-strict', async (t) => {
  const app = await appWithAwkwardServer(t)
  const tools = byName(await list(app, 'responses'), (x) => x.name)
  for (const [name, tool] of tools) {
    assert.equal(tool.type, 'function')
    assertStrictHonest(name, tool.parameters, tool.strict)
    const served = AWKWARD.find((a) => a.name === name)
    if (served && tool.strict === false) assert.deepEqual(tool.parameters, served.inputSchema, name)
  }
  const refs = tools.get('refs')
  assert.equal(refs?.strict, true)
  assert.equal(refs?.parameters.$defs.Point.additionalProperties, false)
  assert.equal(tools.get('closed')?.strict, true)
  for (const name of ['optional_null', 'consts_and_maps', 'recursive', 'read_file']) assert.equal(tools.get(name)?.strict, false, name)
  assert.equal(tools.get('no_args')?.strict, true)
  assert.deepEqual(tools.get('no_args')?.parameters, { type: 'object', additionalProperties: false })
})

test('format=anthropic: what the Messages API documents (no validator ships with @anthropic-ai/sdk)', async (t) => {
  const app = await appWithAwkwardServer(t)
  for (const tool of await list(app, 'anthropic')) {
    assert.deepEqual(Object.keys(tool).sort(), ['description', 'input_schema', 'name'])
    assert.match(tool.name, /^[a-zA-Z0-9_-]{1,64}$/)
    assert.equal(tool.input_schema.type, 'object', tool.name)
    assert.equal(typeof tool.description, 'string')
  }
})

test('format=mcp: every tool parses with the MCP SDK\'s ToolSchema', async (t) => {
  const app = await appWithAwkwardServer(t)
  for (const tool of await list(app, 'mcp')) {
    const parsed = ToolSchema.safeParse(tool)
    assert.ok(parsed.success, `${tool.name}: ${JSON.stringify(parsed.error?.issues)}`)
  }
})

/** Keys of @google/genai's `Schema` (a TypeScript interface, so listed here). */
const GEMINI_SCHEMA_KEYS = new Set([
  'anyOf', 'default', 'description', 'enum', 'example', 'format', 'items', 'maxItems', 'maxLength', 'maxProperties',
  'maximum', 'minItems', 'minLength', 'minProperties', 'minimum', 'nullable', 'pattern', 'properties',
  'propertyOrdering', 'required', 'title', 'type'
])
const INT64 = ['maxItems', 'maxLength', 'maxProperties', 'minItems', 'minLength', 'minProperties']

function assertGeminiSchema (path: string, s: Record<string, any>): void {
  for (const key of Object.keys(s)) assert.ok(GEMINI_SCHEMA_KEYS.has(key), `${path}: ${key} is not a Gemini Schema field`)
  if ('type' in s) assert.ok((Object.values(Type) as string[]).includes(s.type), `${path}: type ${s.type}`)
  assert.ok(!('type' in s && 'anyOf' in s), `${path}: type beside anyOf`)
  for (const key of INT64) if (key in s) assert.match(s[key], /^\d+$/, `${path}.${key}`)
  if ('enum' in s) assert.ok(s.enum.every((e: unknown) => typeof e === 'string'), `${path}: enum of strings`)
  if (s.type === 'STRING' && 'format' in s) assert.ok(['enum', 'date-time'].includes(s.format), `${path}: format ${s.format}`)
  for (const [k, v] of Object.entries(s.properties ?? {})) assertGeminiSchema(`${path}.${k}`, v as Record<string, any>)
  if (s.items) assertGeminiSchema(`${path}[]`, s.items)
  for (const [i, v] of (s.anyOf ?? []).entries()) assertGeminiSchema(`${path}|${i}`, v)
}

test('format=gemini: FunctionDeclarations that go through @google/genai unchanged, as tools: [{ functionDeclarations }]', async (t) => {
  const app = await appWithAwkwardServer(t)
  const declarations: FunctionDeclaration[] = await list(app, 'gemini')
  for (const d of declarations) {
    assert.ok(d.name)
    if (d.parameters) {
      assert.equal(d.parameters.type, Type.OBJECT)
      assert.ok(Object.keys(d.parameters.properties ?? {}).length > 0, `${d.name}: an OBJECT without properties`)
      assertGeminiSchema(d.name, d.parameters as Record<string, any>)
    }
  }
  assert.equal(declarations.find((d) => d.name === 'no_args')?.parameters, undefined)

  // The package rewrites `parameters` on the way out (processJsonSchema: it throws on `type`
  // beside `anyOf`, maps types, and sends schemas with $schema as parametersJsonSchema). The
  // Gemini API cannot be reached from tests, so a loopback server stands in for it and records
  // the request the package built.
  const bodies: any[] = []
  const fake = createServer((req, res) => {
    let data = ''
    req.on('data', (c) => { data += String(c) })
    req.on('end', () => {
      bodies.push(JSON.parse(data))
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ candidates: [{ content: { role: 'model', parts: [{ text: 'ok' }] } }] }))
    })
  })
  await new Promise<void>((resolve) => fake.listen(0, '127.0.0.1', resolve))
  t.after(() => fake.close())
  const ai = new GoogleGenAI({ apiKey: 'test-key', httpOptions: { baseUrl: `http://127.0.0.1:${(fake.address() as AddressInfo).port}` } })
  await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hi', config: { tools: [{ functionDeclarations: structuredClone(declarations) }] } })
  assert.equal(bodies.length, 1)
  const sent = bodies[0].tools[0].functionDeclarations
  assert.deepEqual(sent, declarations, 'the package sends the declarations exactly as listed')
})
