import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { createMemoryRegistryStore } from '../../src/registry/memory-store.js'
import type { ServerConfig } from '../../src/registry/server-config.js'
import { buildTestApp } from '../helpers/app.js'
import { InProcessConnector, markerServer } from '../../scripts/lib/mcp-fixtures/in-process-connector.js'

const server = (name: string, extra: Partial<ServerConfig> = {}): ServerConfig =>
  ({ type: 'streamable_http', url: `memory://${name}`, enabled: true, priority: 0, ...extra })

/**
 * Five tiers where names collide on purpose:
 * - tier 3 local MCP `svc_x` and tier 4 function `svc_x`
 * - tier 2 tenant `u1` tool `svc_x`, tool `shared`; tier 5 global `shared`
 * - tier 4 function `fn_a` and tier 5 global `fn_a`
 * - global `dup` on g-low (priority 0), g-high (priority 5), and g-a / g-b (tie)
 * - tenants `1` and `1-2` each with server `s` and tool `t`
 */
async function setup (t: TestContext): Promise<{ app: FastifyInstance, connector: InProcessConnector }> {
  const store = createMemoryRegistryStore()
  const connector = new InProcessConnector()
    .add('u1-main', markerServer('u1-main', ['svc_x', 'shared', 'read_file', 'only_user']))
    .add('global-main', markerServer('global-main', ['shared', 'fn_a', 'read_file', 'only_global']))
    .add('g-low', markerServer('g-low', ['dup']))
    .add('g-high', markerServer('g-high', ['dup']))
    .add('tie-a', markerServer('tie-a', ['tie']))
    .add('tie-b', markerServer('tie-b', ['tie']))
    .add('one', markerServer('user-1', ['t']))
    .add('one-two', markerServer('user-1-2', ['t']))
  t.after(async () => await connector.close())
  await store.put({ kind: 'user', userId: 'u1' }, 'main', server('u1-main'))
  await store.put({ kind: 'global' }, 'main', server('global-main'))
  await store.put({ kind: 'global' }, 'g-low', server('g-low'))
  await store.put({ kind: 'global' }, 'g-high', server('g-high', { priority: 5 }))
  await store.put({ kind: 'global' }, 'tie-b', server('tie-b'))
  await store.put({ kind: 'global' }, 'tie-a', server('tie-a'))
  await store.put({ kind: 'user', userId: '1' }, 's', server('one'))
  await store.put({ kind: 'user', userId: '1-2' }, 's', server('one-two'))
  const app = await buildTestApp(t, {
    env: { FUNCTIONS_DIR: 'test/fixtures/functions/priority', MCP_SERVICES_DIR: 'test/fixtures/mcp-services/priority', LOAD_EXAMPLES: 'false' },
    overrides: { directory: store, connector }
  })
  return { app, connector }
}

async function invoke (app: FastifyInstance, body: Record<string, unknown>): Promise<{ status: number, json: Record<string, any> }> {
  const res = await app.inject({ method: 'POST', url: '/invoke', payload: body })
  return { status: res.statusCode, json: res.json() }
}

test('each tier wins over the tiers below it', async (t) => {
  const { app } = await setup(t)
  // tier 3 over tier 4
  let r = await invoke(app, { name: 'svc_x' })
  assert.equal(r.status, 200)
  assert.equal(r.json.route, 'local_mcp')
  assert.match(r.json.output, /^local_mcp:svc_x/)
  // tier 2 over tier 3 (raw name + userId resolves through the full priority with the tenant's servers)
  r = await invoke(app, { name: 'svc_x', userId: 'u1' })
  assert.equal(r.json.route, 'user_mcp')
  assert.match(r.json.output, /^u1-main:svc_x/)
  // tier 4 over tier 5
  r = await invoke(app, { name: 'fn_a' })
  assert.equal(r.json.route, 'function')
  assert.match(r.json.output, /^function:fn_a/)
  // tier 2 over tier 5, and tier 5 when there is no tenant
  r = await invoke(app, { name: 'shared', userId: 'u1' })
  assert.equal(r.json.route, 'user_mcp')
  r = await invoke(app, { name: 'shared' })
  assert.equal(r.json.route, 'global_mcp')
  assert.match(r.json.output, /^global-main:shared/)
  // each tier alone
  assert.equal((await invoke(app, { name: 'only_fn' })).json.route, 'function')
  assert.equal((await invoke(app, { name: 'svc_only' })).json.route, 'local_mcp')
  assert.equal((await invoke(app, { name: 'only_global' })).json.route, 'global_mcp')
  assert.equal((await invoke(app, { name: 'user_u1_tool_only_user' })).json.route, 'user_mcp')
})

test('global collisions are deterministic: higher priority, then the smaller serverId', async (t) => {
  const { app } = await setup(t)
  let r = await invoke(app, { name: 'dup' })
  assert.match(r.json.output, /^g-high:dup/)
  r = await invoke(app, { name: 'tie' })
  assert.match(r.json.output, /^tie-a:tie/)
  // the loser stays reachable by its qualified name
  r = await invoke(app, { name: 'g-low__dup' })
  assert.match(r.json.output, /^g-low:dup/)
  r = await invoke(app, { name: 'tie-b__tie' })
  assert.match(r.json.output, /^tie-b:tie/)
  // and the listing exposes it under that name, with a diagnostic
  const res = await app.inject({ method: 'GET', url: '/tools?mcp=g-low,g-high' })
  const body = res.json()
  const names = body.tools.map((x: any) => x.function.name).sort()
  assert.deepEqual(names, ['dup', 'g-low__dup'])
  assert.ok(body.diagnostics.some((d: any) => d.type === 'shadowed' && d.source === 'g-low' && d.exposedAs === 'g-low__dup'))
})

test('built-in names cannot be captured by remote tools', async (t) => {
  const { app } = await setup(t)
  // A tenant and a global server both offer `read_file`; the listing renames them.
  const res = await app.inject({ method: 'GET', url: '/tools?mcp=main&userId=u1' })
  const names = res.json().tools.map((x: any) => x.function.name)
  assert.ok(names.includes('user_u1_tool_read_file'))
  const global = await app.inject({ method: 'GET', url: '/tools?mcp=main' })
  const body = global.json()
  const globalNames = body.tools.map((x: any) => x.function.name)
  assert.ok(!globalNames.includes('read_file'), 'the global read_file must not be listed under the built-in name')
  assert.ok(globalNames.includes('main__read_file'))
  assert.ok(body.diagnostics.some((d: any) => d.name === 'read_file' && d.shadowedBy === 'builtin'))
  // Calling it by its qualified name reaches the remote tool.
  const r = await invoke(app, { name: 'main__read_file' })
  assert.equal(r.json.route, 'global_mcp')
  assert.match(r.json.output, /^global-main:read_file/)
})

test('isolation: user 1 never sees or reaches anything of user 1-2', async (t) => {
  const { app, connector } = await setup(t)
  let r = await invoke(app, { name: 'user_1_tool_t', userId: '1' })
  assert.equal(r.json.route, 'user_mcp')
  assert.match(r.json.output, /^user-1:t/)
  r = await invoke(app, { name: 'user_1-2_tool_t', userId: '1-2' })
  assert.match(r.json.output, /^user-1-2:t/)
  r = await invoke(app, { name: 't', userId: '1' })
  assert.match(r.json.output, /^user-1:t/)
  // another tenant's encoded name is a 403
  r = await invoke(app, { name: 'user_1-2_tool_t', userId: '1' })
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_TENANT_MISMATCH')
  r = await invoke(app, { name: 'user_1_tool_t', userId: '1-2' })
  assert.equal(r.status, 403)
  // listings are keyed exactly
  const l1 = (await app.inject({ method: 'GET', url: '/tools?mcp=s&userId=1' })).json()
  assert.deepEqual(l1.tools.map((x: any) => x.function.name), ['user_1_tool_t'])
  assert.equal(l1.tools[0].function.description, 't of user-1')
  const l12 = (await app.inject({ method: 'GET', url: '/tools?mcp=s&userId=1-2' })).json()
  assert.deepEqual(l12.tools.map((x: any) => x.function.name), ['user_1-2_tool_t'])
  const forbidden = await app.inject({ method: 'GET', url: '/tools?mcp=user_1-2_service_s&userId=1' })
  assert.equal(forbidden.statusCode, 403)
  const cat = (await app.inject({ method: 'GET', url: '/catalog?userId=1' })).json()
  assert.ok(cat.tools.some((x: any) => x.name === 'user_1_tool_t'))
  assert.ok(!cat.tools.some((x: any) => String(x.name).includes('1-2')))
  // every call went to a client keyed by the exact tenant
  assert.ok(connector.calls.every((c) => c.key === 'user_1_service_s' || c.key === 'user_1-2_service_s'))
  assert.ok(connector.calls.some((c) => c.key === 'user_1-2_service_s'))
})

test('an encoded name never falls back to a global server', async (t) => {
  const { app } = await setup(t)
  const r = await invoke(app, { name: 'user_u1_tool_only_global', userId: 'u1' })
  assert.equal(r.status, 404)
  assert.equal(r.json.code, 'GW_TOOL_NOT_FOUND')
})

test('allow is enforced with the listing policy', async (t) => {
  const { app } = await setup(t)
  // allowed: the function
  let r = await invoke(app, { name: 'only_fn', allow: { functions: ['only_fn'] } })
  assert.equal(r.status, 200)
  // not in the allow-list: 403 even though the tool exists
  r = await invoke(app, { name: 'only_fn', allow: { functions: ['fn_a'] } })
  assert.equal(r.status, 403)
  assert.equal(r.json.code, 'GW_NOT_ALLOWED')
  // an empty allow-list allows nothing
  r = await invoke(app, { name: 'only_fn', allow: {} })
  assert.equal(r.status, 403)
  // unknown everywhere: 404 rather than 403
  r = await invoke(app, { name: 'nope', allow: { functions: ['nope'] } })
  assert.equal(r.status, 404)
  // a server in allow.mcp allows its tools under the names the listing gives
  r = await invoke(app, { name: 'user_u1_tool_shared', userId: 'u1', allow: { mcp: ['main'] } })
  assert.equal(r.json.route, 'user_mcp')
  r = await invoke(app, { name: 'only_global', allow: { mcp: ['g-high'] } })
  assert.equal(r.status, 403)
  // with allow, the name resolves in the allowed listing: `svc_x` named in functions is the local MCP tool
  r = await invoke(app, { name: 'svc_x', userId: 'u1', allow: { functions: ['svc_x'] } })
  assert.equal(r.json.route, 'local_mcp')
})

test('GET /tools: only what is named; empty means nothing; unresolved and strict', async (t) => {
  const { app } = await setup(t)
  let body = (await app.inject({ method: 'GET', url: '/tools' })).json()
  assert.deepEqual(body.tools, [])
  body = (await app.inject({ method: 'GET', url: '/tools?functions=&mcp=' })).json()
  assert.deepEqual(body.tools, [])
  body = (await app.inject({ method: 'GET', url: '/tools?functions=only_fn,missing&mcp=nosuch,bad_id' })).json()
  assert.deepEqual(body.tools.map((x: any) => x.function.name), ['only_fn'])
  assert.deepEqual(body.unresolved.map((u: any) => [u.kind, u.name]), [['function', 'missing'], ['mcp', 'bad_id'], ['mcp', 'nosuch']])
  const strict = await app.inject({ method: 'GET', url: '/tools?functions=only_fn,missing&strict=true' })
  assert.equal(strict.statusCode, 400)
  assert.equal(strict.json().code, 'GW_UNRESOLVED')
  assert.match(strict.json().message, /missing/)
})

test('a dead or slow server shows in unavailable and the others still list', async (t) => {
  const { app, connector } = await setup(t)
  connector.kill('g-low')
  const body = (await app.inject({ method: 'GET', url: '/tools?mcp=g-low,g-high,main' })).json()
  assert.deepEqual(body.unavailable.map((u: any) => u.serverId), ['g-low'])
  assert.ok(body.tools.some((x: any) => x.function.name === 'dup'))
  assert.ok(body.tools.some((x: any) => x.function.name === 'only_global'))
})
