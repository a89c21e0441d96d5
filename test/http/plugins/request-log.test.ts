import { test } from 'node:test'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import assert from 'node:assert/strict'
import { Writable } from 'node:stream'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { TEST_QUOTA } from '../../helpers/app.js'

/** The app with its log lines collected as parsed JSON (info level). */
async function loggedApp (t: TestContext): Promise<{ app: FastifyInstance, lines: Array<Record<string, any>> }> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-ws-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const lines: Array<Record<string, any>> = []
  const stream = new Writable({
    write (chunk: Buffer, _enc, done) {
      for (const l of chunk.toString().split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l))
      done()
    }
  })
  const app = await buildApp(loadConfig({ SANDBOX: 'none', ...TEST_QUOTA, WORKSPACES_DIR: workspaces }), { logger: { level: 'info', stream } })
  t.after(async () => await app.close())
  return { app, lines }
}

test('one log line per request: an invoke carries its tool, tier, tenant and outcome; a refusal its code; probes stay out of info', async (t) => {
  const { app, lines } = await loggedApp(t)
  const perRequest = (): Array<Record<string, any>> => lines.filter((l) => l.reqId !== undefined)

  const ok = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1+2' }, userId: 'acme' } })
  assert.equal(ok.statusCode, 200)
  let mine = perRequest()
  assert.equal(mine.length, 1, JSON.stringify(mine))
  assert.equal(mine[0]?.msg, 'request completed')
  assert.deepEqual({ tool: mine[0]?.tool, route: mine[0]?.route, tenant: mine[0]?.tenant, outcome: mine[0]?.outcome, status: mine[0]?.res?.statusCode },
    { tool: 'calculate', route: 'function', tenant: 'acme', outcome: 'ok', status: 200 })
  assert.equal(typeof mine[0]?.responseTime, 'number')
  // The client's address and the request line (Fastify's req serializer once dropped the address).
  assert.deepEqual(mine[0]?.req, { method: 'POST', url: '/invoke', remoteAddress: '127.0.0.1' })

  lines.length = 0
  assert.equal((await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'no_such_tool' } })).statusCode, 404)
  mine = perRequest()
  assert.equal(mine.length, 1, JSON.stringify(mine))
  assert.equal(mine[0]?.code, 'GW_TOOL_NOT_FOUND')
  assert.equal(mine[0]?.res?.statusCode, 404)

  lines.length = 0
  assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
  assert.deepEqual(perRequest(), [])
})

test('credentials in the logged URL and in a refusal message are redacted by the secret detector', async (t) => {
  const { app, lines } = await loggedApp(t)
  const pat = 'ghp_' + 'A1b2C3d4E5'.repeat(4)

  // A refusal's message quotes the tool name it was given; the URL carries a token in its path.
  const refused = await app.inject({ method: 'POST', url: '/invoke', payload: { name: pat, arguments: {} } })
  assert.equal(refused.statusCode, 404, refused.body)
  const missing = await app.inject({ method: 'GET', url: `/hooks/${pat}?api_key=k-12345678&page=2` })
  assert.equal(missing.statusCode, 404)
  const logged = lines.filter((l) => l.reqId !== undefined && l.msg === 'request completed')
  assert.equal(logged.length, 2, JSON.stringify(lines))
  assert.equal(logged[0]?.code, 'GW_TOOL_NOT_FOUND')
  assert.match(String(logged[0]?.error), /\[redacted\]/)
  assert.equal(logged[1]?.req?.url, '/hooks/[redacted]?api_key=[redacted]&page=2')
  const text = JSON.stringify(lines)
  for (const secret of [pat, 'k-12345678']) assert.ok(!text.includes(secret), `${secret} logged: ${text}`)
})

test('/mcp: a request the MCP SDK refuses is logged as a refusal (info), not as an error', async (t) => {
  const { app, lines } = await loggedApp(t)
  const post = async (payload: string, headers: Record<string, string> = {}): Promise<number> => (await app.inject({
    method: 'POST',
    url: '/mcp',
    headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', 'mcp-protocol-version': '2026-07-28', ...headers },
    payload
  })).statusCode
  // No JSON-RPC message, an empty batch (the SDK's entry refuses both), and a body that is not JSON-typed.
  assert.equal(await post('{}'), 400)
  assert.equal(await post('[]'), 400)
  assert.equal(await post('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', { 'content-type': 'text/plain' }), 415)
  const errors = lines.filter((l) => l.level >= 50)
  assert.deepEqual(errors, [], 'a client\'s malformed request is not an error of the gateway')
  const refused = lines.filter((l) => l.msg === 'MCP (2026-07-28) request refused')
  assert.equal(refused.length, 2, JSON.stringify(lines.map((l) => l.msg)))
  assert.ok(refused.every((l) => l.level === 30 && typeof l.reason === 'string' && l.reason.startsWith('Rejected inbound request')), JSON.stringify(refused))
  // The SDK's reason quotes the MCP-Protocol-Version header it refused: a credential put there is not logged.
  const token = 'ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8'
  assert.equal(await post('{"jsonrpc":"2.0","id":1,"method":"tools/list"}', { 'mcp-protocol-version': token }), 400)
  const quoted = lines.filter((l) => l.msg === 'MCP (2026-07-28) request refused').at(-1)
  assert.match(String(quoted?.reason), /header names protocol revision \[redacted\]/)
  assert.ok(!JSON.stringify(lines).includes(token), 'the token is in no log line')
  // A notification naming a revision the SDK does not serve: its typed refusal (UnsupportedProtocolVersionError) quotes the value.
  lines.length = 0
  assert.equal(await post('{"jsonrpc":"2.0","method":"notifications/x"}', { 'mcp-protocol-version': token }), 400)
  assert.deepEqual(lines.filter((l) => l.level >= 50), [], 'an unsupported revision is the client\'s mistake')
  assert.match(String(lines.find((l) => l.msg === 'MCP (2026-07-28) request refused')?.reason), /^Unsupported protocol version: \[redacted\]/)
  assert.ok(!JSON.stringify(lines).includes(token), 'the token is in no log line')
  // The text/plain body never reached the SDK: the gateway's own 415, its code in the JSON-RPC error's data.
  const headers = { accept: 'application/json, text/event-stream', 'content-type': 'text/plain' }
  const plain = await app.inject({ method: 'POST', url: '/mcp', headers, payload: '{}' })
  assert.equal(plain.json<{ error: { data: { code: string } } }>().error.data.code, 'GW_UNSUPPORTED_MEDIA_TYPE')
})

test('/mcp: the name of a tool that does not exist is logged as a refusal\'s message is: masked, and clipped', async (t) => {
  const { app, lines } = await loggedApp(t)
  const token = 'ghp_' + 'A1b2C3d4E5'.repeat(4)
  const call = async (name: string): Promise<void> => {
    const res = await app.inject({
      method: 'POST',
      url: '/mcp',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json' },
      payload: { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: {} } }
    })
    assert.equal(res.statusCode, 200, res.body)
  }
  await call(token)
  await call('x'.repeat(100_000))
  const logged = lines.filter((l) => l.reqId !== undefined && l.msg === 'request completed')
  assert.equal(logged.length, 2, JSON.stringify(lines).slice(0, 2000))
  assert.deepEqual(logged.map((l) => l.outcome), ['GW_TOOL_NOT_FOUND', 'GW_TOOL_NOT_FOUND'])
  assert.equal(logged[0]?.tool, '[redacted]')
  assert.equal(logged[1]?.tool, 'x'.repeat(200) + '...')
  assert.ok(!JSON.stringify(lines).includes(token), 'the token is in no log line')
})
