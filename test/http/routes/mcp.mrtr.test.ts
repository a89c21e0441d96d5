/**
 * POST /mcp, multi round-trip (MCP 2026-07-28 `input_required`, issue 30's first slice): a
 * 2026-07-28-only upstream on the SDK v2 whose tool asks for an elicitation before it answers.
 * A 2026-07-28 client gets the server's inputRequests as they came and a gateway handle as
 * requestState; its retry reaches the upstream with the upstream's own requestState byte for byte
 * and the answers as sent. Handles that were altered, expired, minted for another tenant or
 * another tool are refused with -32602; a legacy client and REST get a clear tool error.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { fromJsonSchema, inputRequired } from '@modelcontextprotocol/server'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { RequestStateSealer } from '../../../src/mcp-server/request-state.js'
import { TEST_QUOTA } from '../../helpers/app.js'
import { MODERN, postModernMcp } from '../../helpers/mcp-raw.js'
import { startModernUpstream } from '../../helpers/mrtr-upstream.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const GLOBEX = 'globex-key-0123456789'
/** The upstream's own state: characters a careless re-encoding would change. */
const UPSTREAM_STATE = 'st@te/1+=;{"round":1} é\u2028 ~'
const NAME_SCHEMA = { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }

interface Upstream {
  url: string
  /** What each tools/call of `greet` carried: the requestState and inputResponses the server received. */
  calls: Array<{ requestState: unknown, inputResponses: unknown }>
}

/** A 2026-07-28-only v2 server (test/helpers/mrtr-upstream.ts): `greet` asks for a name (elicitation) with a requestState, then greets. */
async function startUpstream (t: TestContext): Promise<Upstream> {
  const upstream = await startModernUpstream(t, (server, record) => {
    const noArgs = fromJsonSchema({ type: 'object' } as never)
    server.registerTool('greet', { description: 'asks for a name, then greets', inputSchema: noArgs }, async (_args, ctx) => {
      record('greet', ctx)
      const state = ctx.mcpReq.requestState()
      const answer = ctx.mcpReq.inputResponses?.who as { action?: string, content?: { name?: string } } | undefined
      if (state === UPSTREAM_STATE && answer?.action === 'accept') {
        return { content: [{ type: 'text', text: `hello ${answer.content?.name ?? '?'}` }] }
      }
      return inputRequired({
        inputRequests: { who: { method: 'elicitation/create', params: { mode: 'form', message: 'Your name?', requestedSchema: NAME_SCHEMA } } as never },
        requestState: UPSTREAM_STATE
      })
    })
    server.registerTool('plain', { description: 'answers at once', inputSchema: noArgs }, async () => ({ content: [{ type: 'text', text: 'plain' }] }))
  })
  return {
    url: upstream.url,
    // What this file asserts of each call: the state and answers the server received.
    get calls () { return upstream.calls.map(({ requestState, inputResponses }) => ({ requestState, inputResponses })) }
  }
}

interface Gateway {
  base: string
  http: (method: string, path: string, key: string, body?: unknown) => Promise<{ status: number, json: any }>
  /** A raw 2026-07-28 tools/call on /mcp?{query}, declaring `capabilities`. */
  call: (query: string, key: string, params: Record<string, unknown>, capabilities?: Record<string, unknown>) => Promise<{ status: number, json: any }>
}

async function startGateway (t: TestContext, sealer: RequestStateSealer): Promise<Gateway> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-mcp-mrtr-'))
  const config = loadConfig({
    SANDBOX: 'none',
    ...TEST_QUOTA,
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: workspaces,
    EGRESS_ALLOW: '127.0.0.1/32',
    API_KEYS: `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`
  })
  const app = await buildApp(config, { logger: false, overrides: { mcpRequestState: sealer } })
  t.after(async () => {
    await app.close()
    await rm(workspaces, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
  let id = 0
  return {
    base,
    async http (method, path, key, body) {
      const res = await fetch(base + path, {
        method,
        headers: { ...auth(key), ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {})
      })
      const text = await res.text()
      return { status: res.status, json: text === '' ? undefined : JSON.parse(text) }
    },
    async call (query, key, params, capabilities = { elicitation: { form: {} } }) {
      const message = { id: ++id, method: 'tools/call', params }
      return await postModernMcp(`${base}/mcp?${query}`, key, message, { capabilities, headers: { 'mcp-name': String(params.name) } })
    }
  }
}

const ACCEPT = { who: { action: 'accept', content: { name: 'Ada' } } }

test('a 2026-07-28 client gets the upstream input_required; its retry completes the call on the same upstream, whose requestState is unaltered', async (t) => {
  const upstream = await startUpstream(t)
  const gw = await startGateway(t, new RequestStateSealer({ secret: 'test-secret' }))
  assert.equal((await gw.http('PUT', '/mcp/servers/conf', ADMIN, { type: 'streamable_http', url: upstream.url })).status, 201)

  // The SDK v2 client, fulfilling by hand: the raw input_required comes back.
  const client = new Client({ name: 'mrtr', version: '1.0.0' }, {
    capabilities: { elicitation: { form: {} } },
    versionNegotiation: { mode: { pin: MODERN } },
    inputRequired: { autoFulfill: false }
  })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${gw.base}/mcp?mcp=conf`), { requestInit: { headers: { authorization: `Bearer ${ACME}` } } }))
  t.after(async () => await client.close())
  const first = await client.callTool({ name: 'greet', arguments: {} }, { allowInputRequired: true }) as any
  assert.equal(first.resultType, 'input_required')
  const asked = { method: 'elicitation/create', params: { mode: 'form', message: 'Your name?', requestedSchema: NAME_SCHEMA } }
  assert.deepEqual(first.inputRequests, { who: asked })
  assert.equal(typeof first.requestState, 'string')
  assert.notEqual(first.requestState, UPSTREAM_STATE, 'the client gets the gateway handle, not the upstream state')
  assert.deepEqual(upstream.calls[0], { requestState: undefined, inputResponses: undefined })

  const retry = { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: first.requestState }
  const done = await client.callTool(retry as never, { allowInputRequired: true }) as any
  assert.deepEqual(done.content, [{ type: 'text', text: 'hello Ada' }])
  assert.notEqual(done.resultType, 'input_required')
  assert.equal(upstream.calls.length, 2)
  assert.equal(upstream.calls[1]?.requestState, UPSTREAM_STATE, 'the upstream got its own requestState byte for byte')
  assert.deepEqual(upstream.calls[1]?.inputResponses, ACCEPT)

  // A client that fulfils automatically (its elicitation handler) sees one complete call.
  const auto = new Client({ name: 'mrtr-auto', version: '1.0.0' }, {
    capabilities: { elicitation: { form: {} } },
    versionNegotiation: { mode: { pin: MODERN } }
  })
  auto.setRequestHandler('elicitation/create', async () => ({ action: 'accept', content: { name: 'Grace' } }))
  await auto.connect(new StreamableHTTPClientTransport(new URL(`${gw.base}/mcp?mcp=conf`), { requestInit: { headers: { authorization: `Bearer ${ACME}` } } }))
  t.after(async () => await auto.close())
  const greeted = await auto.callTool({ name: 'greet', arguments: {} })
  assert.deepEqual(greeted.content, [{ type: 'text', text: 'hello Grace' }])
  assert.equal(upstream.calls.at(-1)?.requestState, UPSTREAM_STATE)

  // Neither the handle nor the upstream state reaches the journal.
  const journal = await gw.http('GET', '/users/acme/invocations', ACME)
  assert.equal(journal.status, 200)
  const text = JSON.stringify(journal.json)
  assert.ok(text.includes('greet'), text.slice(0, 500))
  assert.ok(!text.includes(first.requestState as string))
  assert.ok(!text.includes(JSON.stringify(UPSTREAM_STATE).slice(1, -1)) && !text.includes('st@te'))
})

test('a requestState that was altered, expired, or minted for another tenant or tool is refused with -32602 and never reaches the upstream', async (t) => {
  const upstream = await startUpstream(t)
  let now = Date.parse('2026-12-05T00:00:00Z')
  const gw = await startGateway(t, new RequestStateSealer({ secret: 'test-secret', ttlMs: 60_000, now: () => now }))
  assert.equal((await gw.http('PUT', '/mcp/servers/conf', ADMIN, { type: 'streamable_http', url: upstream.url })).status, 201)
  const first = await gw.call('mcp=conf', ACME, { name: 'greet', arguments: {} })
  assert.equal(first.status, 200)
  assert.equal(first.json.result.resultType, 'input_required')
  const handle = first.json.result.requestState as string
  const upstreamCalls = upstream.calls.length

  const refusedWith = async (key: string, params: Record<string, unknown>, why: RegExp): Promise<void> => {
    const res = await gw.call('mcp=conf', key, params)
    assert.equal(res.json.error?.code, -32602, JSON.stringify(res.json))
    assert.match(res.json.error.message, /Invalid or expired requestState/)
    assert.match(res.json.error.message, why)
    assert.equal(res.json.error.data.reason, 'invalid_request_state')
    assert.ok(!JSON.stringify(res.json).includes('st@te'), 'the refusal does not show what the handle held')
  }
  // One character of the payload changed, and a signature cut short.
  const [v, payload, mac] = handle.split('.') as [string, string, string]
  const flipped = payload.slice(0, 5) + (payload[5] === 'A' ? 'B' : 'A') + payload.slice(6)
  await refusedWith(ACME, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: `${v}.${flipped}.${mac}` }, /altered/)
  await refusedWith(ACME, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: `${handle}-TAMPERED` }, /altered/)
  await refusedWith(ACME, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: 'not-a-handle' }, /not a handle/)
  // The same global server and tool, called by another tenant with acme's handle.
  await refusedWith(GLOBEX, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: handle }, /another tenant/)
  await refusedWith(ACME, { name: 'plain', arguments: {}, inputResponses: ACCEPT, requestState: handle }, /another tool/)
  assert.equal(upstream.calls.length, upstreamCalls, 'no refused retry reached the upstream')

  // Still good just before it expires, refused after.
  now += 59_000
  const ok = await gw.call('mcp=conf', ACME, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: handle })
  assert.deepEqual(ok.json.result?.content, [{ type: 'text', text: 'hello Ada' }], JSON.stringify(ok.json))
  now += 2_000
  await refusedWith(ACME, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: handle }, /expired/)
})

test('a handle minted on one instance continues the call on another with the same SECRETS_KEY-derived key', async (t) => {
  const upstream = await startUpstream(t)
  const one = await startGateway(t, new RequestStateSealer({ secret: 'shared' }))
  const two = await startGateway(t, new RequestStateSealer({ secret: 'shared' }))
  const other = await startGateway(t, new RequestStateSealer({ secret: 'another' }))
  for (const gw of [one, two, other]) {
    assert.equal((await gw.http('PUT', '/mcp/servers/conf', ADMIN, { type: 'streamable_http', url: upstream.url })).status, 201)
  }
  const first = await one.call('mcp=conf', ACME, { name: 'greet', arguments: {} })
  const handle = first.json.result.requestState as string
  const done = await two.call('mcp=conf', ACME, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: handle })
  assert.deepEqual(done.json.result?.content, [{ type: 'text', text: 'hello Ada' }], JSON.stringify(done.json))
  const refused = await other.call('mcp=conf', ACME, { name: 'greet', arguments: {}, inputResponses: ACCEPT, requestState: handle })
  assert.equal(refused.json.error?.code, -32602)
})

test('a legacy /mcp client that declared nothing and REST /invoke get a clear tool error, never a fake result, when the server asks for input', async (t) => {
  const upstream = await startUpstream(t)
  const gw = await startGateway(t, new RequestStateSealer({ secret: 'test-secret' }))
  assert.equal((await gw.http('PUT', '/mcp/servers/conf', ADMIN, { type: 'streamable_http', url: upstream.url })).status, 201)

  // (A legacy client that declared elicitation is asked on the call's stream: mcp.relay.test.ts.)
  const legacy = new LegacyClient({ name: 'legacy', version: '1.0.0' }, { capabilities: {} })
  await legacy.connect(new LegacyTransport(new URL(`${gw.base}/mcp?mcp=conf`), { requestInit: { headers: { authorization: `Bearer ${ACME}` } } }))
  t.after(async () => await legacy.close())
  const result = await legacy.callTool({ name: 'greet', arguments: {} }) as any
  assert.equal(result.isError, true)
  assert.match(result.content[0].text, /GW_TOOL_ERROR|ToolError/)
  assert.match(result.content[0].text, /elicitation\/create.*do not declare/)
  assert.deepEqual((await legacy.callTool({ name: 'plain', arguments: {} }) as any).content, [{ type: 'text', text: 'plain' }])

  const rest = await gw.http('POST', '/invoke', ACME, { name: 'greet', arguments: {}, allow: { mcp: ['conf'] } })
  assert.equal(rest.status, 200)
  assert.equal(rest.json.isError, true)
  assert.equal(rest.json.error.code, 'GW_TOOL_ERROR')
  assert.match(rest.json.error.message, /asks for input \(elicitation\/sampling\/roots\)/)

  // A 2026-07-28 client that declared no elicitation: the server's -32021 (MissingRequiredClientCapability), HTTP 400.
  const bare = await gw.call('mcp=conf', ACME, { name: 'greet', arguments: {} }, {})
  assert.equal(bare.status, 400, JSON.stringify(bare.json))
  assert.equal(bare.json.error?.code, -32021)
  assert.deepEqual(bare.json.error?.data?.requiredCapabilities, { elicitation: { form: {} } })
})
