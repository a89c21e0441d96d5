/**
 * Tool search (SPEC 17, README "Tool search"): GET /tools/search, search mode (`mode=search`,
 * `pinned=`, the `tool_search` meta tool over POST /invoke), and provider-native deferral
 * (`defer=true`) checked against the `openai` and `@anthropic-ai/sdk` types. Real MCP servers
 * (SDK fixtures on loopback) registered for two tenants and globally; the boundaries are the
 * allow-list, the tenant and the tool policy.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import type { Responses } from 'openai/resources/responses/responses'
import type { Tool as AnthropicTool, ToolSearchToolBm25_20251119 as AnthropicSearchTool } from '@anthropic-ai/sdk/resources/messages/messages'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { buildTestApp } from '../../helpers/app.js'
import { FILES, GLOBEX_TOOLS, str, tool, toolServer, TRACKER } from '../../helpers/search-tools.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

const ADMIN = 'k-admin-search-0123'
const ACME = 'k-acme-search-0123'
const GLOBEX = 'k-globex-search-0123'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`

type Method = 'GET' | 'PUT' | 'POST' | 'DELETE'

async function call (app: FastifyInstance, key: string, method: Method, url: string, body?: unknown): Promise<{ status: number, json: any }> {
  const res = await app.inject({ method, url, headers: { authorization: `Bearer ${key}` }, ...(body !== undefined ? { payload: body as object } : {}) })
  return { status: res.statusCode, json: res.body === '' ? undefined : res.json() }
}

async function fixture (t: TestContext, tools: Tool[]): Promise<string> {
  const server = await startStreamableHttpFixture({ factory: toolServer(tools) })
  t.after(async () => await server.close())
  return server.url
}

/** acme has `tracker` and `files`, globex has `tracker` (its own tools), and a global `files` exists too. */
async function setup (t: TestContext): Promise<FastifyInstance> {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, EGRESS_ALLOW: '127.0.0.1/32' } })
  const [tracker, files, globex] = await Promise.all([fixture(t, TRACKER), fixture(t, FILES), fixture(t, GLOBEX_TOOLS)])
  const servers = [
    [ACME, '/users/acme/mcp/servers/tracker', tracker], [ACME, '/users/acme/mcp/servers/files', files], [GLOBEX, '/users/globex/mcp/servers/tracker', globex]
  ]
  for (const [key, path, url] of servers as Array<[string, string, string]>) {
    const r = await call(app, key, 'PUT', path, { type: 'streamable_http', url })
    assert.equal(r.status, 201, JSON.stringify(r.json))
  }
  return app
}

const names = (tools: any[]): string[] => tools.map((t) => t.name ?? t.function?.name)
const natural = (name: string): string => name.replace(/^user_[a-z]+_tool_/, '')

test('GET /tools/search ranks exactly the allow-listed tools of the caller\'s tenant, with scores, in the requested format', async (t) => {
  const app = await setup(t)
  let r = await call(app, ACME, 'GET', '/tools/search?q=open+a+new+bug+report&mcp=tracker,files&functions=calculate&userId=acme&limit=3')
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.total, 8, 'four tracker tools, three file tools, calculate')
  assert.equal(natural(r.json.tools[0].function.name), 'create_issue', JSON.stringify(r.json))
  assert.equal(r.json.tools[0].type, 'function')
  assert.equal(r.json.scores.length, r.json.tools.length)
  assert.ok(r.json.tools.length <= 3)
  for (let i = 1; i < r.json.scores.length; i++) assert.ok(r.json.scores[i - 1] >= r.json.scores[i], 'best first')
  assert.ok(!names(r.json.tools).some((n) => n.includes('report')), 'never another tenant\'s tool')

  r = await call(app, ACME, 'GET', '/tools/search?q=rename+a+folder&mcp=tracker,files&userId=acme&format=anthropic&limit=2')
  assert.equal(natural(r.json.tools[0].name), 'move_file', JSON.stringify(r.json))
  assert.ok('input_schema' in r.json.tools[0], 'the anthropic format')

  // Never beyond the allow-list: the file tools are not searched when only the tracker is selected.
  r = await call(app, ACME, 'GET', '/tools/search?q=read+file+contents+directory&mcp=tracker&userId=acme')
  assert.equal(r.json.total, 4)
  assert.ok(!names(r.json.tools).some((n) => /file|directory/.test(n)), JSON.stringify(names(r.json.tools)))

  // The other tenant's search finds its own tool for the same words, and acme's key cannot search for globex.
  r = await call(app, GLOBEX, 'GET', '/tools/search?q=open+a+new+bug+report&mcp=tracker&userId=globex')
  assert.deepEqual(names(r.json.tools).map(natural), ['create_issue_report'])
  r = await call(app, ACME, 'GET', '/tools/search?q=bug&mcp=tracker&userId=globex')
  assert.equal(r.status, 403, JSON.stringify(r.json))

  // An unknown server is reported, not an error; a query without a searchable word matches nothing.
  r = await call(app, ACME, 'GET', '/tools/search?q=the+of+a&mcp=tracker,nosuch&userId=acme')
  assert.equal(r.status, 200)
  assert.deepEqual(r.json.tools, [])
  assert.deepEqual(r.json.unresolved.map((u: any) => u.name), ['nosuch'])
  // Bad input: a clear 400.
  for (const bad of ['/tools/search?mcp=tracker', '/tools/search?q=&mcp=tracker', '/tools/search?q=x&limit=0', `/tools/search?q=${'x'.repeat(1001)}`]) {
    r = await call(app, ACME, 'GET', bad)
    assert.equal(r.status, 400, bad)
    assert.equal(r.json.code, 'GW_BAD_REQUEST')
  }
})

test('search follows the registry and the policy at once: a new server is searched, a denied tool never found', async (t) => {
  const app = await setup(t)
  let r = await call(app, ACME, 'GET', '/tools/search?q=merge+pull+request&mcp=tracker&userId=acme')
  assert.equal(natural(r.json.tools[0].function.name), 'merge_pull_request')

  r = await call(app, ADMIN, 'PUT', '/users/acme/policy', { deny: ['*merge_pull_request'] })
  assert.equal(r.status, 201, JSON.stringify(r.json))
  r = await call(app, ACME, 'GET', '/tools/search?q=merge+pull+request&mcp=tracker&userId=acme')
  assert.equal(r.json.total, 3)
  assert.ok(!names(r.json.tools).some((n) => n.includes('merge')), JSON.stringify(names(r.json.tools)))

  // A server added to the registry is in the next search of a listing that names it (the version token moved).
  const url = await fixture(t, [tool('send_slack_message', 'Post a message to a Slack channel', { channel: str, text: str })])
  r = await call(app, ACME, 'GET', '/tools/search?q=notify+the+team+channel&mcp=tracker,chat&userId=acme')
  assert.deepEqual(r.json.unresolved.map((u: any) => u.name), ['chat'])
  assert.equal((await call(app, ACME, 'PUT', '/users/acme/mcp/servers/chat', { type: 'streamable_http', url })).status, 201)
  r = await call(app, ACME, 'GET', '/tools/search?q=notify+the+team+channel&mcp=tracker,chat&userId=acme')
  assert.equal(natural(r.json.tools[0].function.name), 'send_slack_message', JSON.stringify(r.json))
})

test('search mode lists tool_search and the pinned tools; tool_search over /invoke finds tools the same allow-list then calls', async (t) => {
  const app = await setup(t)
  const allow = { mcp: ['tracker', 'files'], functions: ['calculate'] }
  let r = await call(app, ACME, 'GET', '/tools?mcp=tracker,files&functions=calculate&userId=acme&mode=search&pinned=calculate')
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.deepEqual(names(r.json.tools), ['tool_search', 'calculate'])
  const searchTool = r.json.tools[0].function
  assert.match(searchTool.description, /Searches 8 tools from calculate, files, tracker\.$/)
  assert.deepEqual(searchTool.parameters.required, ['query'])

  // A pinned name that is not in the listing is reported; strict makes it a 400.
  r = await call(app, ACME, 'GET', '/tools?mcp=tracker&userId=acme&mode=search&pinned=calculate')
  assert.deepEqual(r.json.unresolved, [{ kind: 'pinned', name: 'calculate', reason: 'Not a tool of this listing (the allow-list, after the tool policy)' }])
  r = await call(app, ACME, 'GET', '/tools?mcp=tracker&userId=acme&mode=search&pinned=calculate&strict=true')
  assert.equal(r.status, 400)
  assert.equal(r.json.code, 'GW_UNRESOLVED')
  r = await call(app, ACME, 'GET', '/tools?mcp=tracker&userId=acme&pinned=calculate')
  assert.equal(r.status, 400, 'pinned without a mode that uses it')

  // The model calls tool_search; the orchestrator passes the listing's allow-list, as for any call.
  const search = (args: object, over: object | null = allow): object =>
    ({ name: 'tool_search', arguments: args, userId: 'acme', ...(over !== null ? { allow: over } : {}) })
  r = await call(app, ACME, 'POST', '/invoke', { ...search({ query: 'list the files in a folder', limit: 2 }), trace: true })
  assert.equal(r.status, 200, JSON.stringify(r.json))
  assert.equal(r.json.isError, false, r.json.output)
  const found = /^## (\S+)/m.exec(r.json.output)?.[1]
  assert.ok(found !== undefined && natural(found) === 'list_directory', r.json.output)
  assert.match(r.json.output, /Parameters: \{"type":"object","properties":\{"path":\{"type":"string"\}\}/)
  assert.equal(r.json.trace.matches[0].name, found)
  // ... and then calls the found tool by that name, under the same allow-list.
  r = await call(app, ACME, 'POST', '/invoke', { name: found, arguments: { path: '/tmp' }, userId: 'acme', allow })
  assert.equal(r.json.output, 'ran list_directory {"path":"/tmp"}')

  // tool_search never finds beyond the call's allow-list, and needs one.
  r = await call(app, ACME, 'POST', '/invoke', search({ query: 'comment on the issue listing the files in a folder' }, { mcp: ['tracker'] }))
  assert.doesNotMatch(r.json.output, /list_directory|read_text_file/)
  assert.match(r.json.output, /^\d of 4 tools match/)
  r = await call(app, ACME, 'POST', '/invoke', search({ query: 'files' }, null))
  assert.equal(r.json.isError, true)
  assert.match(r.json.output, /call it with `allow`/)
  // Its arguments are checked like any tool's.
  r = await call(app, ACME, 'POST', '/invoke', search({ limit: 3 }))
  assert.equal(r.json.isError, true)
  assert.equal(r.json.error.code, 'GW_INVALID_ARGUMENTS')

  // The policy decides tool_search like any tool.
  assert.equal((await call(app, ADMIN, 'PUT', '/users/acme/policy', { deny: ['tool_search'] })).status, 201)
  r = await call(app, ACME, 'GET', '/tools?mcp=tracker,files&functions=calculate&userId=acme&mode=search&pinned=calculate')
  assert.deepEqual(names(r.json.tools), ['calculate'])
  r = await call(app, ACME, 'POST', '/invoke', search({ query: 'files' }))
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_POLICY_DENIED')
})

test('defer=true: the providers\' own tool search tool and defer_loading, in the shapes the openai and @anthropic-ai/sdk types accept', async (t) => {
  const app = await setup(t)
  const base = '/tools?mcp=tracker,files&functions=calculate&userId=acme&defer=true&pinned=calculate'
  let r = await call(app, ACME, 'GET', `${base}&format=responses`)
  assert.equal(r.status, 200, JSON.stringify(r.json))
  const searchTool: Responses.ToolSearchTool = { type: 'tool_search' }
  assert.deepEqual(r.json.tools[0], searchTool)
  assert.equal(r.json.tools.length, 9)
  for (const listed of r.json.tools.slice(1)) {
    // Every field of the response's tool, typed by the SDK: an unknown or mistyped field fails to compile, a missing or extra one fails here.
    const { name, description, parameters, strict } = listed
    const typed: Responses.FunctionTool = { type: 'function', name, description, parameters, strict }
    if (name !== 'calculate') typed.defer_loading = true
    assert.deepEqual(listed, typed, name)
  }

  r = await call(app, ACME, 'GET', `${base}&format=anthropic`)
  const bm25: AnthropicSearchTool = { type: 'tool_search_tool_bm25_20251119', name: 'tool_search_tool_bm25' }
  assert.deepEqual(r.json.tools[0], bm25)
  for (const listed of r.json.tools.slice(1)) {
    const { name, description, input_schema: inputSchema } = listed
    const typed: AnthropicTool = { name, description, input_schema: inputSchema }
    if (name !== 'calculate') typed.defer_loading = true
    assert.deepEqual(listed, typed, name)
  }

  for (const bad of [`${base}&format=openai`, `${base}&format=responses&mode=search`]) {
    r = await call(app, ACME, 'GET', bad)
    assert.equal(r.status, 400, bad)
    assert.equal(r.json.code, 'GW_BAD_REQUEST')
  }
})
