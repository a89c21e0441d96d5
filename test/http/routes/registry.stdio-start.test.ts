import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../../helpers/app.js'
import { stdioFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

// A stdio server's first start can take far longer than a listing may wait (`npx -y` downloads
// the package). Here the fixture sleeps 2 s before serving, and the listing and normal connect
// deadlines are 200 ms: only the first-connect deadline (MCP_STDIO_FIRST_CONNECT_MS) lets it
// start at all, and only a background warm-up lets a listing find it running.
const SLOW_START = {
  MCP_LIST_TIMEOUT_MS: '200',
  MCP_CONNECT_TIMEOUT_MS: '200',
  MCP_STDIO_FIRST_CONNECT_MS: '120000'
}
const slowServer = (marker: string): Record<string, unknown> => ({
  type: 'stdio',
  ...stdioFixture('stdio-server.ts', [marker]),
  env: { FIXTURE_START_DELAY_MS: '2000' }
})

/** Polls GET /status (which lists nothing and connects nothing) until the client `id` is connected. */
async function connected (app: FastifyInstance, id: string): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const status = (await app.inject({ method: 'GET', url: '/status' })).json()
    if (status.clients[id]?.connected === true) return
    await sleep(100)
  }
  assert.fail(`client ${id} never connected`)
}

test('a slow stdio server: registration starts it, a listing meanwhile says starting (not a timeout), then lists its tools', async (t) => {
  const app = await buildTestApp(t, { env: SLOW_START })
  const put = await app.inject({ method: 'PUT', url: '/mcp/servers/slow', payload: slowServer('SLOW') })
  assert.equal(put.statusCode, 201, put.body)

  const during = (await app.inject({ method: 'GET', url: '/tools?mcp=slow' })).json()
  assert.deepEqual(during.tools, [])
  assert.equal(during.unavailable.length, 1, JSON.stringify(during))
  assert.equal(during.unavailable[0].serverId, 'slow')
  assert.match(during.unavailable[0].reason, /^starting: first connection in progress/)

  // Nothing but the warm-up connects it: /status neither lists nor connects.
  await connected(app, 'slow')
  const after = (await app.inject({ method: 'GET', url: '/tools?mcp=slow' })).json()
  assert.deepEqual(after.unavailable, [])
  assert.ok(after.tools.some((x: { function: { name: string } }) => x.function.name === 'echo'), JSON.stringify(after))
  const res = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'echo', arguments: { text: 'x' } } })
  assert.equal(res.json().output, 'SLOW:x')
})

test('a tenant\'s stdio server (registered by an admin) is started by its registration too', async (t) => {
  const app = await buildTestApp(t, { env: SLOW_START })
  const put = await app.inject({ method: 'PUT', url: '/users/alice/mcp/servers/slow', payload: slowServer('T') })
  assert.equal(put.statusCode, 201, put.body)
  const during = (await app.inject({ method: 'GET', url: '/tools?mcp=slow&userId=alice' })).json()
  assert.match(during.unavailable[0]?.reason ?? '', /^starting: /, JSON.stringify(during))
  await connected(app, 'user_alice_service_slow')
  const after = (await app.inject({ method: 'GET', url: '/tools?mcp=user_alice_service_slow' })).json()
  assert.deepEqual(after.unavailable, [])
  assert.ok(after.tools.some((x: { function: { name: string } }) => x.function.name === 'user_alice_tool_echo'), JSON.stringify(after))
})

test('global stdio servers known at start-up are started in the background', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-servers-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'servers.json')
  await writeFile(file, JSON.stringify({ mcpServers: { boot: slowServer('BOOT') } }))
  const app = await buildTestApp(t, { env: { ...SLOW_START, MCP_SERVERS_FILE: file } })
  await connected(app, 'boot')
  const listing = (await app.inject({ method: 'GET', url: '/tools?mcp=boot' })).json()
  assert.deepEqual(listing.unavailable, [])
  assert.ok(listing.tools.some((x: { function: { name: string } }) => x.function.name === 'echo'))
})

test('GET /mcp/servers/{serverId}/tools: the live listing of a global server, 404 for an unknown id, admin only', async (t) => {
  const app = await buildTestApp(t, {
    env: { API_KEYS: 'admin-key-0123456789:*,acme-key-0123456789:acme', MCP_LIST_TIMEOUT_MS: '60000', MCP_CONNECT_TIMEOUT_MS: '60000' }
  })
  const admin = { authorization: 'Bearer admin-key-0123456789' }
  const put = await app.inject({
    method: 'PUT',
    url: '/mcp/servers/local',
    headers: admin,
    payload: { type: 'stdio', ...stdioFixture('stdio-server.ts', ['L']) }
  })
  assert.equal(put.statusCode, 201, put.body)

  const res = await app.inject({ method: 'GET', url: '/mcp/servers/local/tools', headers: admin })
  assert.equal(res.statusCode, 200, res.body)
  const body = res.json()
  assert.equal(body.serverId, 'local')
  const echo = body.tools.find((x: { name: string }) => x.name === 'echo')
  assert.ok(echo?.inputSchema?.properties?.text, res.body)

  const missing = await app.inject({ method: 'GET', url: '/mcp/servers/nope/tools', headers: admin })
  assert.equal(missing.statusCode, 404)
  assert.equal(missing.json().code, 'GW_SERVER_NOT_FOUND')
  const bad = await app.inject({ method: 'GET', url: '/mcp/servers/bad_id/tools', headers: admin })
  assert.equal(bad.statusCode, 400)
  const tenant = await app.inject({ method: 'GET', url: '/mcp/servers/local/tools', headers: { authorization: 'Bearer acme-key-0123456789' } })
  assert.equal(tenant.statusCode, 403)
})
