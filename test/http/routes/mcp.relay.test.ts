/**
 * POST /mcp, a legacy client (2025-11-25) whose call's server asks it something (issue 30): the
 * gateway sends the request on the call's own response stream and the client's answer, POSTed
 * back, continues the call. Both eras of the server: a legacy server's elicitation/create,
 * sampling/createMessage and roots/list pushed during the call (on the gateway's relay
 * connection, which declares the capabilities upstream), and a 2026-07-28 server's
 * input_required (each inputRequest asked in turn, the call retried with the answers). The
 * call's log messages reach the client too. Attacks: another tenant answering with a stolen id
 * changes nothing; a client that did not declare a capability is never asked.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import {
  CreateMessageRequestSchema, ElicitationCompleteNotificationSchema, ElicitRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema
} from '@modelcontextprotocol/sdk/types.js'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { startAskingFixture } from '../../../scripts/lib/mcp-fixtures/asking-server.js'
import { startModernFixture } from '../../../scripts/lib/mcp-fixtures/modern-server.js'
import { buildTestApp } from '../../helpers/app.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const GLOBEX = 'globex-key-0123456789'
const NAME_SCHEMA = { type: 'object' as const, properties: { name: { type: 'string' as const } }, required: ['name'] }

async function startLegacyAsker (t: TestContext): Promise<string> {
  return (await startAsker(t)).url
}

async function startAsker (t: TestContext): Promise<Awaited<ReturnType<typeof startAskingFixture>>> {
  const fixture = await startAskingFixture()
  t.after(async () => await fixture.close())
  return fixture
}

async function startGateway (t: TestContext, env: Record<string, string> = {}): Promise<string> {
  const app = await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`, ...env } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  return `http://127.0.0.1:${address.port}`
}

async function register (base: string, userId: string, id: string, url: string): Promise<void> {
  const res = await fetch(`${base}/users/${userId}/mcp/servers/${id}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'streamable_http', url })
  })
  assert.equal(res.status, 201, await res.text())
}

async function legacyClient (t: TestContext, url: string, key: string, capabilities: Record<string, unknown>): Promise<LegacyClient> {
  const client = new LegacyClient({ name: 'legacy', version: '1.0.0' }, { capabilities })
  await client.connect(new LegacyTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${key}` } } }))
  t.after(async () => await client.close())
  return client
}

function text (result: unknown): string {
  return ((result as { content: Array<{ text?: string }> }).content[0]?.text) ?? ''
}

test('a legacy server\'s elicitation, sampling and roots requests reach the legacy client on its call\'s stream; its answers continue the call', async (t) => {
  const base = await startGateway(t)
  await register(base, 'acme', 'asker', await startLegacyAsker(t))
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_asker`, ACME, { elicitation: {}, sampling: {}, roots: {} })
  const asked: string[] = []
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked.push(`elicit:${req.params.message}`)
    return { action: 'accept', content: { name: 'Ada' } }
  })
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
    const first = req.params.messages[0]?.content as { type?: string, text?: string } | undefined
    asked.push(`sample:${first?.type === 'text' ? String(first.text) : ''}`)
    return { role: 'assistant', content: { type: 'text', text: 'forty-two' }, model: 'test-model' }
  })
  client.setRequestHandler(ListRootsRequestSchema, async () => ({ roots: [{ uri: 'file:///work/a' }, { uri: 'file:///work/b' }] }))
  const logs: unknown[] = []
  client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => { logs.push(n.params.data) })

  const tools = await client.listTools()
  const name = (suffix: string): string => {
    const found = tools.tools.find((tool) => tool.name.endsWith(suffix))
    assert.ok(found !== undefined, `${suffix} in ${tools.tools.map((tool) => tool.name).join(', ')}`)
    return found.name
  }
  assert.equal(text(await client.callTool({ name: name('ask_name'), arguments: {} })), 'hello Ada')
  assert.equal(text(await client.callTool({ name: name('sample'), arguments: { prompt: 'the answer?' } })), 'model said: forty-two')
  assert.equal(text(await client.callTool({ name: name('roots'), arguments: {} })), 'file:///work/a,file:///work/b')
  assert.deepEqual(asked, ['elicit:Your name?', 'sample:the answer?'])
  // The call's log message came on its stream, before its result.
  assert.deepEqual(logs, ['asking for a name'])
})

test('a 2026-07-28 server\'s input_required reaches a legacy client as elicitation/create on the call\'s stream; the retry carries its answer', async (t) => {
  const modern = await startModernFixture({
    register: (server) => {
      server.registerTool('greet', { description: 'asks for a name, then greets' }, async (ctx) => {
        const answer = ctx.mcpReq.inputResponses?.who as { action?: string, content?: { name?: string } } | undefined
        if (answer?.action === 'accept' && ctx.mcpReq.requestState() === 'round-1') return { content: [{ type: 'text', text: `hello ${answer.content?.name ?? '?'}` }] }
        return {
          resultType: 'input_required',
          inputRequests: { who: { method: 'elicitation/create', params: { mode: 'form', message: 'Your name?', requestedSchema: NAME_SCHEMA } } },
          requestState: 'round-1'
        } as never
      })
    }
  })
  t.after(async () => await modern.close())
  const base = await startGateway(t)
  await register(base, 'acme', 'modern', modern.url)
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_modern`, ACME, { elicitation: { form: {} } })
  let asked = 0
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    asked++
    assert.equal(req.params.message, 'Your name?')
    return { action: 'accept', content: { name: 'Grace' } }
  })
  const tools = await client.listTools()
  const greet = tools.tools.find((tool) => tool.name.endsWith('greet'))
  assert.ok(greet !== undefined)
  assert.equal(text(await client.callTool({ name: greet.name, arguments: {} })), 'hello Grace')
  assert.equal(asked, 1)
})

test('attack: another tenant that answers a client request with its id changes nothing; the owner\'s answer still continues the call', async (t) => {
  const base = await startGateway(t)
  await register(base, 'acme', 'asker', await startLegacyAsker(t))
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_asker`, ACME, { elicitation: {} })
  client.setRequestHandler(ElicitRequestSchema, async (_req, extra) => {
    // The id the gateway gave its request, as a thief who saw it would use it.
    const stolen = { jsonrpc: '2.0', id: extra.requestId, result: { action: 'accept', content: { name: 'Mallory' } } }
    const thief = await fetch(`${base}/mcp?mcp=user_globex_service_asker`, {
      method: 'POST',
      headers: { authorization: `Bearer ${GLOBEX}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(stolen)
    })
    // Refused for the URL's tenant already, or taken and dropped: never the call's answer.
    assert.ok(thief.status === 202 || thief.status === 403, String(thief.status))
    const ownerUrlThief = await fetch(`${base}/mcp?mcp=user_acme_service_asker`, {
      method: 'POST',
      headers: { authorization: `Bearer ${GLOBEX}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(stolen)
    })
    assert.ok(ownerUrlThief.status === 202 || ownerUrlThief.status === 403, String(ownerUrlThief.status))
    return { action: 'accept', content: { name: 'Ada' } }
  })
  const tools = await client.listTools()
  const ask = tools.tools.find((tool) => tool.name.endsWith('ask_name'))
  assert.ok(ask !== undefined)
  assert.equal(text(await client.callTool({ name: ask.name, arguments: {} })), 'hello Ada')
})

test('a legacy client that did not declare elicitation is never asked: the server gets Method not found, the call ends as its tool says', async (t) => {
  const base = await startGateway(t)
  await register(base, 'acme', 'asker', await startLegacyAsker(t))
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_asker`, ACME, { sampling: {} })
  let asked = 0
  client.setRequestHandler(CreateMessageRequestSchema, async () => {
    asked++
    return { role: 'assistant', content: { type: 'text', text: 'x' }, model: 'm' }
  })
  const tools = await client.listTools()
  const ask = tools.tools.find((tool) => tool.name.endsWith('ask_name'))
  assert.ok(ask !== undefined)
  const result = await client.callTool({ name: ask.name, arguments: {} }) as { isError?: boolean, content: Array<{ text?: string }> }
  assert.equal(result.isError, true)
  assert.match(result.content[0]?.text ?? '', /did not declare|Method not found/)
  assert.equal(asked, 0)
})

for (const era of ['legacy', '2026-07-28'] as const) {
  test(`a ${era} client that leaves cancels its call upstream (the legacy server sees notifications/cancelled)`, async (t) => {
    const upstream = await startAskingFixture()
    t.after(async () => await upstream.close())
    const base = await startGateway(t)
    await register(base, 'acme', 'asker', upstream.url)
    const headers: Record<string, string> = era === 'legacy'
      ? { 'mcp-protocol-version': '2025-11-25' }
      : { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'user_acme_tool_wait' }
    const meta = era === 'legacy'
      ? undefined
      : {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': {},
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' }
        }
    const params = { name: 'user_acme_tool_wait', arguments: {}, ...(meta !== undefined ? { _meta: meta } : {}) }
    const leave = new AbortController()
    const pending = fetch(`${base}/mcp?mcp=user_acme_service_asker`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACME}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
      signal: leave.signal
    }).catch((err: unknown) => err)
    for (let i = 0; i < 400 && upstream.waits.started === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    assert.equal(upstream.waits.started, 1, 'the call reached the server')
    leave.abort()
    await pending
    for (let i = 0; i < 400 && upstream.waits.cancelled === 0; i++) await new Promise((resolve) => setTimeout(resolve, 10))
    assert.equal(upstream.waits.cancelled, 1, 'the server saw the call cancelled')
  })
}

test('URL-mode elicitation: a legacy client is sent to the URL and told when the server says it completed', async (t) => {
  const base = await startGateway(t)
  await register(base, 'acme', 'asker', await startLegacyAsker(t))
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_asker`, ACME, { elicitation: { url: {} } })
  const urls: unknown[] = []
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    urls.push((req.params as { url?: unknown }).url)
    return { action: 'accept' }
  })
  const completed: unknown[] = []
  client.setNotificationHandler(ElicitationCompleteNotificationSchema, (n) => { completed.push(n.params.elicitationId) })
  const tools = await client.listTools()
  const ask = tools.tools.find((tool) => tool.name.endsWith('ask_url'))
  assert.ok(ask !== undefined)
  assert.equal(text(await client.callTool({ name: ask.name, arguments: {} })), 'url accept')
  assert.deepEqual(urls, ['https://example.invalid/consent'])
  assert.deepEqual(completed, ['el-1'])
})

test('over a transport that tags no call stream (the SDK\'s HTTP transport, stdio, SSE), a lone relayed call gets its server\'s questions', async (t) => {
  const base = await startGateway(t, { MCP_HTTP_TRANSPORT: 'sdk' })
  await register(base, 'acme', 'asker', await startLegacyAsker(t))
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_asker`, ACME, { elicitation: {} })
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada' } }))
  const tools = await client.listTools()
  const ask = tools.tools.find((tool) => tool.name.endsWith('ask_name'))
  assert.ok(ask !== undefined)
  assert.equal(text(await client.callTool({ name: ask.name, arguments: {} })), 'hello Ada')
})

test('a person may take longer to answer than MCP_CALL_TIMEOUT_MS: a call that can be asked waits up to INVOKE_TIMEOUT_MS', async (t) => {
  const base = await startGateway(t, { MCP_CALL_TIMEOUT_MS: '300' })
  await register(base, 'acme', 'asker', await startLegacyAsker(t))
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_asker`, ACME, { elicitation: {} })
  client.setRequestHandler(ElicitRequestSchema, async () => {
    await new Promise((resolve) => setTimeout(resolve, 800))
    return { action: 'accept', content: { name: 'Slow' } }
  })
  const tools = await client.listTools()
  const ask = tools.tools.find((tool) => tool.name.endsWith('ask_name'))
  assert.ok(ask !== undefined)
  assert.equal(text(await client.callTool({ name: ask.name, arguments: {} })), 'hello Slow')
})

test('a question its server left behind when the call ended is settled with the call: it does not wait for the client (and hold a slot) forever', async (t) => {
  // The instance's questions waiting for /mcp clients are bounded (10,000): questions of ended calls that stayed
  // there until an answer that never came filled it for every tenant, until a restart (an audit).
  const asker = await startAsker(t)
  const base = await startGateway(t)
  await register(base, 'acme', 'asker', asker.url)
  const client = await legacyClient(t, `${base}/mcp?mcp=user_acme_service_asker`, ACME, { elicitation: {} })
  let asked = 0
  // A client that never answers.
  client.setRequestHandler(ElicitRequestSchema, async () => { asked++; return await new Promise<never>(() => {}) })
  const tools = await client.listTools()
  const go = tools.tools.find((tool) => tool.name.endsWith('ask_and_go'))
  assert.ok(go !== undefined)
  assert.equal(text(await client.callTool({ name: go.name, arguments: {} })), 'gone')
  for (let i = 0; i < 100 && asker.leftBehind.length === 0; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(asker.leftBehind.length, 1, 'the question left behind was not settled when its call ended')
  assert.match(asker.leftBehind[0] ?? '', /^failed: .*did not answer/)
  assert.ok(asked <= 1)
})
