/**
 * POST /mcp, a call's log messages carried to the client that made it (issue 30): a 2026-07-28
 * client that sends a per-request `logLevel` gets its servers' `notifications/message` at that
 * level and above on the call's stream (a 2026-07-28 server is asked at that level; a legacy
 * server's lines below it are dropped by the gateway), and none without one; a legacy client gets
 * every line of the call.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { LoggingMessageNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startAskingFixture } from '../../../scripts/lib/mcp-fixtures/asking-server.js'
import { startModernFixture } from '../../../scripts/lib/mcp-fixtures/modern-server.js'
import { buildTestApp } from '../../helpers/app.js'
import { MODERN } from '../../helpers/mcp-raw.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'

async function setup (t: TestContext): Promise<string> {
  const modern = await startModernFixture({
    register: (server) => {
      server.registerTool('chatty', { description: 'logs at debug and info' }, async (ctx) => {
        await ctx.mcpReq.log('debug', 'modern detail')
        await ctx.mcpReq.log('info', 'modern progress')
        return { content: [{ type: 'text', text: 'chatted' }] }
      })
    }
  })
  t.after(async () => await modern.close())
  const legacy = await startAskingFixture()
  t.after(async () => await legacy.close())
  const app = await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ADMIN}:*,${ACME}:acme` } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  for (const [id, url] of [['modern', modern.url], ['legacy', legacy.url]]) {
    const put = await fetch(`${base}/mcp/servers/${id}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'streamable_http', url })
    })
    assert.equal(put.status, 201, await put.text())
  }
  return base
}

/** A raw 2026-07-28 tools/call; the messages of its answer (SSE events, or the one JSON body). */
async function modernCall (base: string, server: string, tool: string, logLevel?: string): Promise<Array<Record<string, any>>> {
  const meta: Record<string, unknown> = {
    'io.modelcontextprotocol/protocolVersion': MODERN,
    'io.modelcontextprotocol/clientCapabilities': {},
    'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    ...(logLevel !== undefined ? { 'io.modelcontextprotocol/logLevel': logLevel } : {})
  }
  const res = await fetch(`${base}/mcp?mcp=${server}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${ACME}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': tool
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: tool, arguments: {}, _meta: meta } })
  })
  const body = await res.text()
  assert.equal(res.status, 200, body)
  if ((res.headers.get('content-type') ?? '').startsWith('application/json')) return [JSON.parse(body)]
  return body.split('\n').filter((line) => line.startsWith('data: ') && line.length > 6).map((line) => JSON.parse(line.slice(6)))
}

const logs = (messages: Array<Record<string, any>>): unknown[] =>
  messages.filter((m) => m.method === 'notifications/message').map((m) => m.params.data)

test('a 2026-07-28 client with logLevel gets its call\'s log lines at that level and above, from a server of either era; none without it', async (t) => {
  const base = await setup(t)
  for (const [server, line] of [['modern', 'modern progress'], ['legacy', 'progress made']] as const) {
    const tools = 'chatty'
    const asked = await modernCall(base, server, tools, 'info')
    assert.deepEqual(logs(asked), [line], `${server}: ${JSON.stringify(asked)}`)
    assert.equal(asked.at(-1)?.result?.content?.[0]?.text, 'chatted')
    const quiet = await modernCall(base, server, tools)
    assert.deepEqual(logs(quiet), [], `${server}: ${JSON.stringify(quiet)}`)
    assert.equal(quiet.at(-1)?.result?.content?.[0]?.text, 'chatted')
  }
})

test('a legacy client gets every log line of its call', async (t) => {
  const base = await setup(t)
  const client = new LegacyClient({ name: 'legacy', version: '1.0.0' }, { capabilities: {} })
  await client.connect(new LegacyTransport(new URL(`${base}/mcp?mcp=legacy`), { requestInit: { headers: { authorization: `Bearer ${ACME}` } } }))
  t.after(async () => await client.close())
  const lines: unknown[] = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { lines.push(n.params.data) })
  const tools = await client.listTools()
  const chatty = tools.tools.find((tool) => tool.name.endsWith('chatty'))
  assert.ok(chatty !== undefined)
  const result = await client.callTool({ name: chatty.name, arguments: {} }) as { content: Array<{ text?: string }> }
  assert.equal(result.content[0]?.text, 'chatted')
  assert.deepEqual(lines, ['detail', 'progress made'])
})
