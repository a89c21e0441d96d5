/**
 * /mcp serves the resources, resource templates, prompts and completion of the allow-listed MCP
 * servers (src/mcp-server/surface-handlers.ts), in both eras: a legacy SDK v1 server as a tenant's
 * and a 2026-07-28-only SDK v2 server as a global one, read by an SDK v1 client (legacy) and a v2
 * client pinned to 2026-07-28. Prompt names are namespaced like tools, URIs are the servers' own;
 * tenancy, the allow-list and a dead server are checked on real servers.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { z } from 'zod'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { McpServer as V2McpServer, ResourceTemplate as V2Template, createMcpHandler } from '@modelcontextprotocol/server'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpServer as V1McpServer, ResourceTemplate as V1Template } from '@modelcontextprotocol/sdk/server/mcp.js'
import { StreamableHTTPServerTransport as V1ServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CompleteRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { TEST_QUOTA } from '../../helpers/app.js'
import { MODERN, postModernMcp } from '../../helpers/mcp-raw.js'
import type { RawMcpAnswer, RawMcpMessage } from '../../helpers/mcp-raw.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const GLOBEX = 'globex-key-0123456789'
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='

interface Fixture { url: string, methods: string[] }

/** Reads a node request's JSON body. */
async function bodyOf (req: IncomingMessage): Promise<{ raw: Buffer, json: any }> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  const raw = Buffer.concat(chunks)
  return { raw, json: raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined }
}

async function listen (t: TestContext, handle: (req: IncomingMessage, res: ServerResponse) => Promise<void>, path: string): Promise<string> {
  const http = createServer((req, res) => { handle(req, res).catch(() => { if (!res.headersSent) res.writeHead(500); res.end() }) })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => { http.closeAllConnections(); await new Promise<void>((resolve) => http.close(() => resolve())) })
  const address = http.address()
  assert.ok(address !== null && typeof address === 'object')
  return `http://127.0.0.1:${address.port}${path}`
}

/**
 * A legacy-only server on the SDK v1 (stateless streamable HTTP): `mem://{marker}/readme`, a prompt `greet`, completion echoing its ref;
 * `extraResources` more resources `mem://{marker}/r{i}`.
 */
async function startLegacy (t: TestContext, marker: string, opts: { extraResources?: number } = {}): Promise<Fixture> {
  const methods: string[] = []
  const build = (): V1McpServer => {
    const server = new V1McpServer({ name: `legacy-${marker}`, version: '1.0.0' }, { capabilities: { completions: {} } })
    for (let i = 0; i < (opts.extraResources ?? 0); i++) {
      server.registerResource(`r${i}`, `mem://${marker}/r${i}`, {}, async (uri) => ({ contents: [{ uri: uri.href, text: String(i) }] }))
    }
    server.registerResource('readme', `mem://${marker}/readme`, { mimeType: 'text/plain' },
      async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'text/plain', text: `readme of ${marker}` }] }))
    server.registerResource('note', new V1Template(`mem://${marker}/notes/{id}`, { list: undefined }), { mimeType: 'text/plain' },
      async (uri, { id }) => ({ contents: [{ uri: uri.href, text: `note ${String(id)} of ${marker}` }] }))
    server.registerPrompt('greet', { description: 'greets', argsSchema: { who: z.string() } },
      async ({ who }) => ({ messages: [{ role: 'user', content: { type: 'text', text: `hello ${who} from ${marker}` } }] }))
    server.server.setRequestHandler(CompleteRequestSchema, async (request) => ({
      completion: { values: [`${marker}:${JSON.stringify(request.params.ref)}:${request.params.argument.value}`] }
    }))
    return server
  }
  const url = await listen(t, async (req, res) => {
    const { json } = await bodyOf(req)
    if (req.method !== 'POST') { res.writeHead(405).end(); return }
    methods.push(json?.method)
    const server = build()
    const transport = new V1ServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    res.once('close', () => { server.close().catch(() => {}) })
    await server.connect(transport)
    await transport.handleRequest(req, res, json)
  }, '/mcp')
  return { url, methods }
}

/** A 2026-07-28-only server on the SDK v2: `kb://logo` (blob), template `kb://articles/{id}`, prompts `greet` and `summarize`. */
async function startModern (t: TestContext, marker: string): Promise<Fixture> {
  const methods: string[] = []
  const handler = createMcpHandler(() => {
    const server = new V2McpServer({ name: `modern-${marker}`, version: '1.0.0' }, { capabilities: { completions: {} } })
    server.registerResource('logo', `kb://${marker}/logo`, { mimeType: 'image/png' },
      async (uri) => ({ contents: [{ uri: uri.href, mimeType: 'image/png', blob: PNG }] }))
    server.registerResource('article', new V2Template(`kb://${marker}/articles/{id}`, { list: undefined }), { mimeType: 'text/plain' },
      async (uri, { id }) => ({ contents: [{ uri: uri.href, text: `article ${String(id)}` }], _meta: { from: marker } }))
    server.registerPrompt('greet', { description: 'greets too' },
      async () => ({ messages: [{ role: 'user', content: { type: 'text', text: `global greet of ${marker}` } }] }))
    server.registerPrompt('summarize', { description: 'summarizes', argsSchema: z.object({ topic: z.string() }) },
      async ({ topic }) => ({
        messages: [
          { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
          { role: 'user', content: { type: 'resource', resource: { uri: `kb://${marker}/logo`, text: `summary of ${topic}` } } }
        ]
      }))
    server.server.setRequestHandler('completion/complete', async (request) => ({
      completion: { values: [`${marker}:${JSON.stringify(request.params.ref)}:${request.params.argument.value}`] }
    }))
    return server
  }, { legacy: 'reject' })
  const url = await listen(t, async (req, res) => {
    const { raw, json } = await bodyOf(req)
    methods.push(json?.method ?? req.method)
    const headers = new Headers()
    for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v)
    const request = new Request(`http://127.0.0.1${req.url ?? '/'}`, { method: req.method, headers, ...(req.method === 'POST' ? { body: new Uint8Array(raw) } : {}) })
    const response = await handler.fetch(request, { parsedBody: json })
    res.writeHead(response.status, Object.fromEntries(response.headers))
    res.end(Buffer.from(await response.arrayBuffer()))
  }, '/mcp')
  return { url, methods }
}

type SurfaceClient = Pick<Client, 'listResources' | 'listResourceTemplates' | 'readResource' | 'listPrompts' | 'getPrompt' | 'complete'>

interface Gateway {
  put: (path: string, key: string, body: unknown) => Promise<number>
  /** A client on /mcp?{query}: the SDK v1 one (legacy), or the v2 one pinned to 2026-07-28. */
  client: (era: 'legacy' | 'modern', query: string, key: string) => Promise<SurfaceClient>
  rpc: (query: string, key: string, message: RawMcpMessage, headers: Record<string, string>) => Promise<RawMcpAnswer>
}

async function startGateway (t: TestContext, env: Record<string, string> = {}): Promise<Gateway> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-mcp-resources-'))
  const config = loadConfig({
    SANDBOX: 'none',
    ...TEST_QUOTA,
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: workspaces,
    EGRESS_ALLOW: '127.0.0.1/32',
    MCP_LIST_TIMEOUT_MS: '3000',
    API_KEYS: `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`,
    ...env
  })
  const app = await buildApp(config, { logger: false })
  const closers: Array<() => Promise<void>> = []
  t.after(async () => {
    for (const close of closers) await close()
    await app.close()
    await rm(workspaces, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
  return {
    async put (path, key, body) {
      const res = await fetch(base + path, { method: 'PUT', headers: { ...auth(key), 'content-type': 'application/json' }, body: JSON.stringify(body) })
      await res.arrayBuffer()
      return res.status
    },
    async client (era, query, key) {
      const url = new URL(`${base}/mcp?${query}`)
      if (era === 'legacy') {
        const legacy = new LegacyClient({ name: 'test-v1', version: '1.0.0' })
        await legacy.connect(new LegacyTransport(url, { requestInit: { headers: auth(key) } }))
        closers.push(async () => await legacy.close())
        return legacy as unknown as Client
      }
      const client = new Client({ name: 'test-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } })
      await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: auth(key) } }))
      assert.equal(client.getProtocolEra(), 'modern')
      closers.push(async () => await client.close())
      return client
    },
    async rpc (query, key, message, headers) {
      return await postModernMcp(`${base}/mcp?${query}`, key, message, { headers })
    }
  }
}

/** The JSON-RPC error a client call fails with (either SDK). */
async function rpcError (work: Promise<unknown>): Promise<{ code: number, message: string, data: any }> {
  try {
    await work
  } catch (err) {
    const e = err as { code?: unknown, message: string, data?: unknown }
    assert.equal(typeof e.code, 'number', e.message)
    return { code: e.code as number, message: e.message, data: e.data }
  }
  assert.fail('the request did not fail')
}

async function deadUrl (t: TestContext): Promise<string> {
  const http = createServer()
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  const address = http.address()
  assert.ok(address !== null && typeof address === 'object')
  await new Promise<void>((resolve) => http.close(() => resolve()))
  t.diagnostic(`dead server on port ${address.port}`)
  return `http://127.0.0.1:${address.port}/mcp`
}

test('resources, templates, prompts and completion of a tenant\'s legacy server and a global 2026-07-28 one, through /mcp in both eras', async (t) => {
  const acme = await startLegacy(t, 'acme')
  const kb = await startModern(t, 'kb')
  const other = await startModern(t, 'other')
  const gw = await startGateway(t)
  assert.equal(await gw.put('/users/acme/mcp/servers/docs', ACME, { type: 'streamable_http', url: acme.url }), 201)
  assert.equal(await gw.put('/mcp/servers/kb', ADMIN, { type: 'streamable_http', url: kb.url }), 201)
  assert.equal(await gw.put('/mcp/servers/other', ADMIN, { type: 'streamable_http', url: other.url }), 201)
  const query = 'mcp=docs,kb'

  for (const era of ['legacy', 'modern'] as const) {
    const client = await gw.client(era, query, ACME)
    const resources = (await client.listResources()).resources
    assert.deepEqual(resources.map((r) => r.uri).sort(), ['kb://kb/logo', 'mem://acme/readme'], era)
    const templates = (await client.listResourceTemplates()).resourceTemplates
    assert.deepEqual(templates.map((r) => r.uriTemplate).sort(), ['kb://kb/articles/{id}', 'mem://acme/notes/{id}'], era)

    const text = await client.readResource({ uri: 'mem://acme/readme' })
    assert.deepEqual(text.contents, [{ uri: 'mem://acme/readme', mimeType: 'text/plain', text: 'readme of acme' }], era)
    const blob = await client.readResource({ uri: 'kb://kb/logo' })
    assert.deepEqual(blob.contents, [{ uri: 'kb://kb/logo', mimeType: 'image/png', blob: PNG }], era)
    const templated = await client.readResource({ uri: 'kb://kb/articles/42' })
    assert.deepEqual(templated.contents, [{ uri: 'kb://kb/articles/42', text: 'article 42' }], era)
    assert.equal((templated._meta as { from?: unknown } | undefined)?.from, 'kb', `${era}: the server's _meta is carried`)
    const note = await client.readResource({ uri: 'mem://acme/notes/7' })
    assert.deepEqual(note.contents, [{ uri: 'mem://acme/notes/7', text: 'note 7 of acme' }], era)

    // Prompt names like tools: the tenant's encoded, the global server's its own.
    const prompts = (await client.listPrompts()).prompts
    assert.deepEqual(prompts.map((p) => p.name).sort(), ['greet', 'summarize', 'user_acme_prompt_greet'], era)
    assert.deepEqual(prompts.find((p) => p.name === 'user_acme_prompt_greet')?.arguments?.map((a) => a.name), ['who'])
    const greet = await client.getPrompt({ name: 'user_acme_prompt_greet', arguments: { who: 'ada' } })
    assert.deepEqual(greet.messages, [{ role: 'user', content: { type: 'text', text: 'hello ada from acme' } }], era)
    assert.deepEqual((await client.getPrompt({ name: 'greet' })).messages, [{ role: 'user', content: { type: 'text', text: 'global greet of kb' } }])
    const summary = await client.getPrompt({ name: 'summarize', arguments: { topic: 'cats' } })
    assert.deepEqual(summary.messages, [
      { role: 'user', content: { type: 'image', data: PNG, mimeType: 'image/png' } },
      { role: 'user', content: { type: 'resource', resource: { uri: 'kb://kb/logo', text: 'summary of cats' } } }
    ], era)

    // Completion goes to the owner, with the upstream's own prompt name.
    const byPrompt = await client.complete({ ref: { type: 'ref/prompt', name: 'user_acme_prompt_greet' }, argument: { name: 'who', value: 'a' } })
    assert.deepEqual(byPrompt.completion.values, ['acme:{"type":"ref/prompt","name":"greet"}:a'], era)
    const byTemplate = await client.complete({ ref: { type: 'ref/resource', uri: 'kb://kb/articles/{id}' }, argument: { name: 'id', value: '4' } })
    assert.deepEqual(byTemplate.completion.values, ['kb:{"type":"ref/resource","uri":"kb://kb/articles/{id}"}:4'], era)

    // Nothing lists it: -32602 with data.uri (SEP-2164); an unknown prompt is -32602 too.
    const missing = await rpcError(client.readResource({ uri: 'mem://acme/nope' }))
    assert.equal(missing.code, -32602, era)
    assert.deepEqual(missing.data, { uri: 'mem://acme/nope' })
    assert.equal((await rpcError(client.getPrompt({ name: 'user_acme_prompt_nope' }))).code, -32602)
    // The global server that is not in the allow-list is never listed nor read.
    assert.equal((await rpcError(client.readResource({ uri: 'kb://other/logo' }))).code, -32602)
  }
  const consulted = other.methods.filter((m) => m !== 'server/discover' && m !== 'initialize' && m !== 'notifications/initialized')
  assert.deepEqual(consulted, [], 'the server outside the allow-list was not consulted')
  assert.ok(acme.methods.includes('resources/read') && kb.methods.includes('prompts/get'))
})

test('tenancy: acme\'s URL never lists or reads globex\'s resources and prompts; a globex URI read through it is not found', async (t) => {
  const acme = await startLegacy(t, 'acme')
  const globex = await startLegacy(t, 'globex')
  const gw = await startGateway(t)
  assert.equal(await gw.put('/users/acme/mcp/servers/docs', ACME, { type: 'streamable_http', url: acme.url }), 201)
  assert.equal(await gw.put('/users/globex/mcp/servers/docs', GLOBEX, { type: 'streamable_http', url: globex.url }), 201)
  for (const era of ['legacy', 'modern'] as const) {
    const asAcme = await gw.client(era, 'mcp=docs', ACME)
    assert.deepEqual((await asAcme.listResources()).resources.map((r) => r.uri), ['mem://acme/readme'], era)
    assert.deepEqual((await asAcme.listPrompts()).prompts.map((p) => p.name), ['user_acme_prompt_greet'], era)
    const read = await rpcError(asAcme.readResource({ uri: 'mem://globex/readme' }))
    assert.equal(read.code, -32602, era)
    assert.deepEqual(read.data, { uri: 'mem://globex/readme' })
    assert.equal((await rpcError(asAcme.getPrompt({ name: 'user_globex_prompt_greet', arguments: { who: 'x' } }))).code, -32602)
    const asGlobex = await gw.client(era, 'mcp=docs', GLOBEX)
    assert.deepEqual((await asGlobex.readResource({ uri: 'mem://globex/readme' })).contents.map((c) => c.uri), ['mem://globex/readme'])
  }
  assert.equal(globex.methods.filter((m) => m === 'resources/read').length, 2, 'globex\'s server read only for globex')
  // An admin acting for acme sees acme's, never globex's.
  const admin = await gw.client('legacy', 'userId=acme&mcp=docs', ADMIN)
  assert.deepEqual((await admin.listResources()).resources.map((r) => r.uri), ['mem://acme/readme'])
})

test('a dead server is left out of listings; a read that finds nothing while it is down says it could not be listed', async (t) => {
  const kb = await startModern(t, 'kb')
  const gw = await startGateway(t)
  assert.equal(await gw.put('/mcp/servers/kb', ADMIN, { type: 'streamable_http', url: kb.url }), 201)
  assert.equal(await gw.put('/mcp/servers/dead', ADMIN, { type: 'streamable_http', url: await deadUrl(t) }), 201)
  for (const era of ['legacy', 'modern'] as const) {
    const client = await gw.client(era, 'mcp=kb,dead', ACME)
    assert.deepEqual((await client.listResources()).resources.map((r) => r.uri), ['kb://kb/logo'], era)
    assert.deepEqual((await client.listPrompts()).prompts.map((p) => p.name).sort(), ['greet', 'summarize'], era)
    assert.equal((await client.readResource({ uri: 'kb://kb/logo' })).contents.length, 1)
    const unknown = await rpcError(client.readResource({ uri: 'dead://thing' }))
    assert.equal(unknown.code, -32603, era)
    assert.match(unknown.message, /could not be listed: dead/)
  }
})

test('2026-07-28 on the wire: Mcp-Name is checked against the uri and the prompt name; listings and reads are private, ttlMs 0', async (t) => {
  const kb = await startModern(t, 'kb')
  const gw = await startGateway(t)
  assert.equal(await gw.put('/mcp/servers/kb', ADMIN, { type: 'streamable_http', url: kb.url }), 201)
  const read = { id: 7, method: 'resources/read', params: { uri: 'kb://kb/logo' } }
  const ok = await gw.rpc('mcp=kb', ACME, read, { 'mcp-name': 'kb://kb/logo' })
  assert.equal(ok.status, 200)
  assert.equal(ok.json.result.cacheScope, 'private')
  assert.equal(ok.json.result.ttlMs, 0)
  const wrong = await gw.rpc('mcp=kb', ACME, read, { 'mcp-name': 'kb://kb/other' })
  assert.equal(wrong.status, 400)
  assert.equal(wrong.json.id, 7)
  assert.equal(wrong.json.error.code, -32020)
  const get = { id: 8, method: 'prompts/get', params: { name: 'greet' } }
  assert.equal((await gw.rpc('mcp=kb', ACME, get, { 'mcp-name': 'greet' })).status, 200)
  assert.equal((await gw.rpc('mcp=kb', ACME, get, { 'mcp-name': 'summarize' })).json.error.code, -32020)
  for (const method of ['resources/list', 'resources/templates/list', 'prompts/list']) {
    const listed = await gw.rpc('mcp=kb', ACME, { id: 9, method, params: {} }, {})
    assert.equal(listed.json.result.cacheScope, 'private', method)
    assert.equal(listed.json.result.ttlMs, 0, method)
  }
})

/** A policy PUT: 201 the first time, 200 after. */
const OK = new Set([200, 201])
const LOCAL = { MCP_SERVICES_DIR: 'test/fixtures/mcp-services/surface', LOAD_EXAMPLES: 'false' }

test('tier 3: a local service\'s resources, template, prompts and completion, listed only when functions= names the service or one of its tools', async (t) => {
  const gw = await startGateway(t, LOCAL)
  for (const era of ['legacy', 'modern'] as const) {
    for (const query of ['functions=notes_lookup', 'functions=notes']) {
      const client = await gw.client(era, query, ACME)
      const at = `${era} ${query}`
      assert.deepEqual((await client.listResources()).resources.map((r) => r.uri), ['notes://index'], at)
      assert.deepEqual((await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate), ['notes://pages/{slug}'], at)
      const prompts = (await client.listPrompts()).prompts
      assert.deepEqual(prompts.map((p) => p.name).sort(), ['notes_brief', 'notes_secret'], at)
      assert.deepEqual(prompts.find((p) => p.name === 'notes_brief')?.arguments?.map((a) => [a.name, a.required]), [['topic', true], ['tone', false]], at)

      const brief = await client.getPrompt({ name: 'notes_brief', arguments: { topic: 'cats', tone: 'dry' } })
      assert.deepEqual(brief.messages, [{ role: 'user', content: { type: 'text', text: 'brief on cats (dry)' } }], at)
      assert.deepEqual((await client.readResource({ uri: 'notes://index' })).contents,
        [{ uri: 'notes://index', mimeType: 'text/plain', text: 'index of notes' }], at)
      assert.deepEqual((await client.readResource({ uri: 'notes://pages/dogs' })).contents,
        [{ uri: 'notes://pages/dogs', mimeType: 'text/markdown', text: '# dogs' }], at)

      const byPrompt = await client.complete({ ref: { type: 'ref/prompt', name: 'notes_brief' }, argument: { name: 'topic', value: 'c' } })
      assert.deepEqual(byPrompt.completion.values, ['cats', 'cars', 'clouds'], at)
      const byTemplate = await client.complete({ ref: { type: 'ref/resource', uri: 'notes://pages/{slug}' }, argument: { name: 'slug', value: 'd' } })
      assert.deepEqual(byTemplate.completion.values, ['dogs'], at)

      const missing = await rpcError(client.readResource({ uri: 'notes://nope' }))
      assert.equal(missing.code, -32602, at)
      assert.deepEqual(missing.data, { uri: 'notes://nope' }, at)
      // The service functions= does not name is neither listed nor read nor asked.
      const unselected = await rpcError(client.readResource({ uri: 'other://readme' }))
      assert.equal(unselected.code, -32602, at)
      assert.deepEqual(unselected.data, { uri: 'other://readme' }, at)
      assert.equal((await rpcError(client.getPrompt({ name: 'other_hello' }))).code, -32602, at)
      // A prompt is only ever reached by its exposed name, not the service's own.
      assert.equal((await rpcError(client.getPrompt({ name: 'brief', arguments: { topic: 'cats' } }))).code, -32602, at)
    }

    const other = await gw.client(era, 'functions=other_ping,read_file', ACME)
    assert.deepEqual((await other.listResources()).resources.map((r) => r.uri), ['other://readme'], era)
    assert.deepEqual((await other.listResourceTemplates()).resourceTemplates, [], era)
    assert.deepEqual((await other.listPrompts()).prompts.map((p) => p.name), ['other_hello'], era)
    assert.equal((await rpcError(other.readResource({ uri: 'notes://index' }))).code, -32602, era)

    for (const query of ['functions=read_file', 'functions=lookup', '']) {
      const none = await gw.client(era, query, ACME)
      assert.deepEqual((await none.listResources()).resources, [], `${era} ${query}`)
      assert.deepEqual((await none.listResourceTemplates()).resourceTemplates, [], `${era} ${query}`)
      assert.deepEqual((await none.listPrompts()).prompts, [], `${era} ${query}`)
      assert.equal((await rpcError(none.getPrompt({ name: 'notes_brief', arguments: { topic: 'cats' } }))).code, -32602, `${era} ${query}`)
    }
  }
})

/** The names a client lists: its prompts, its resources' URIs and its templates. */
async function surfaceOf (client: SurfaceClient): Promise<{ prompts: string[], resources: string[], templates: string[] }> {
  return {
    prompts: (await client.listPrompts()).prompts.map((p) => p.name).sort(),
    resources: (await client.listResources()).resources.map((r) => r.uri).sort(),
    templates: (await client.listResourceTemplates()).resourceTemplates.map((r) => r.uriTemplate).sort()
  }
}

/** A refusal by the tool policy: -32602 with the gateway's GW_POLICY_DENIED (403) in data, as tools/call answers. */
async function assertDenied (work: Promise<unknown>, at: string): Promise<void> {
  const error = await rpcError(work)
  assert.equal(error.code, -32602, `${at}: ${error.message}`)
  assert.equal(error.data?.code, 'GW_POLICY_DENIED', `${at}: ${error.message}`)
  assert.equal(error.data?.statusCode, 403, at)
}

test('tool policy: a denied prompt is neither listed, gettable nor completed; allowOnly hides resources unless it names {serverId}__resources', async (t) => {
  const kb = await startModern(t, 'kb')
  const gw = await startGateway(t, LOCAL)
  assert.equal(await gw.put('/mcp/servers/kb', ADMIN, { type: 'streamable_http', url: kb.url }), 201)
  const query = 'functions=notes&mcp=kb'
  for (const era of ['legacy', 'modern'] as const) {
    const open = await surfaceOf(await gw.client(era, query, ACME))
    assert.deepEqual(open, {
      prompts: ['greet', 'notes_brief', 'notes_secret', 'summarize'],
      resources: ['kb://kb/logo', 'notes://index'],
      templates: ['kb://kb/articles/{id}', 'notes://pages/{slug}']
    }, era)
  }

  // deny by the exposed name (local), by the qualified name (remote), by the server's own name (remote).
  for (const [deny, gone] of [['notes_secret', 'notes_secret'], ['notes__brief', 'notes_brief'], ['kb__greet', 'greet'], ['summarize', 'summarize']] as const) {
    assert.ok(OK.has(await gw.put('/users/acme/policy', ADMIN, { deny: [deny] })))
    for (const era of ['legacy', 'modern'] as const) {
      const at = `${era} deny ${deny}`
      const client = await gw.client(era, query, ACME)
      const listed = await surfaceOf(client)
      assert.ok(!listed.prompts.includes(gone), at)
      assert.equal(listed.prompts.length, 3, at)
      assert.deepEqual(listed.resources, ['kb://kb/logo', 'notes://index'], `${at}: resources are not a prompt`)
      await assertDenied(client.getPrompt({ name: gone, arguments: { topic: 'cats' } }), `${at}: prompts/get`)
      await assertDenied(client.complete({ ref: { type: 'ref/prompt', name: gone }, argument: { name: 'topic', value: 'c' } }), `${at}: completion`)
    }
  }
  const asked = kb.methods.filter((m) => m === 'prompts/get').length

  // allowOnly without {serverId}__resources: the prompts it names, no resources nor templates of anyone.
  assert.ok(OK.has(await gw.put('/users/acme/policy', ADMIN, { allowOnly: ['greet', 'notes_brief'] })))
  for (const era of ['legacy', 'modern'] as const) {
    const client = await gw.client(era, query, ACME)
    assert.deepEqual(await surfaceOf(client), { prompts: ['greet', 'notes_brief'], resources: [], templates: [] }, era)
    await assertDenied(client.readResource({ uri: 'kb://kb/logo' }), `${era}: read of a listed URI`)
    await assertDenied(client.readResource({ uri: 'notes://pages/cats' }), `${era}: read of a templated URI`)
    await assertDenied(client.complete({ ref: { type: 'ref/resource', uri: 'kb://kb/articles/{id}' }, argument: { name: 'id', value: '1' } }), `${era}: template completion`)
    await assertDenied(client.getPrompt({ name: 'summarize', arguments: { topic: 'cats' } }), `${era}: a prompt allowOnly leaves out`)
    // Not a server's at all: still "not found", not a refusal.
    const missing = await rpcError(client.readResource({ uri: 'nowhere://x' }))
    assert.equal(missing.code, -32602, era)
    assert.deepEqual(missing.data, { uri: 'nowhere://x' }, era)
  }
  assert.equal(kb.methods.filter((m) => m === 'prompts/get' || m === 'resources/read' || m === 'completion/complete').length, asked,
    'nothing the policy refuses reached the server')

  // Naming kb__resources shows kb's resources and templates, and they read; the local service's stay hidden.
  assert.ok(OK.has(await gw.put('/users/acme/policy', ADMIN, { allowOnly: ['greet', 'notes_brief', 'kb__resources'] })))
  for (const era of ['legacy', 'modern'] as const) {
    const client = await gw.client(era, query, ACME)
    assert.deepEqual(await surfaceOf(client), { prompts: ['greet', 'notes_brief'], resources: ['kb://kb/logo'], templates: ['kb://kb/articles/{id}'] }, era)
    assert.deepEqual((await client.readResource({ uri: 'kb://kb/articles/9' })).contents, [{ uri: 'kb://kb/articles/9', text: 'article 9' }], era)
    await assertDenied(client.readResource({ uri: 'notes://index' }), `${era}: the local service's resources`)
  }
  assert.ok(OK.has(await gw.put('/users/acme/policy', ADMIN, { allowOnly: ['notes__resources'] })))
  assert.deepEqual(await surfaceOf(await gw.client('modern', query, ACME)), { prompts: [], resources: ['notes://index'], templates: ['notes://pages/{slug}'] })
})

test('tool policy: the default policy and a tenant\'s combine for prompts and resources as they do for tools', async (t) => {
  const kb = await startModern(t, 'kb')
  const gw = await startGateway(t, LOCAL)
  assert.equal(await gw.put('/mcp/servers/kb', ADMIN, { type: 'streamable_http', url: kb.url }), 201)
  assert.ok(OK.has(await gw.put('/policy', ADMIN, { deny: ['greet'], allowOnly: ['greet', 'summarize', 'notes_*', 'kb__resources'] })))
  const tenant = { deny: ['notes_secret'], allowOnly: ['summarize', 'notes_brief', 'notes_lookup', 'notes__resources'] }
  assert.ok(OK.has(await gw.put('/users/acme/policy', ADMIN, tenant)))
  const query = 'functions=notes_lookup&mcp=kb'
  for (const era of ['legacy', 'modern'] as const) {
    // globex has no policy of its own: the default alone.
    const globex = await gw.client(era, query, GLOBEX)
    assert.deepEqual(await surfaceOf(globex), {
      prompts: ['notes_brief', 'notes_secret', 'summarize'],
      resources: ['kb://kb/logo', 'notes://index'],
      templates: ['kb://kb/articles/{id}', 'notes://pages/{slug}']
    }, era)
    await assertDenied(globex.getPrompt({ name: 'greet' }), `${era}: globex, the default's deny`)
    // acme: both deny lists, and a name must pass both allowOnly lists.
    const acme = await gw.client(era, query, ACME)
    assert.deepEqual(await surfaceOf(acme), {
      prompts: ['notes_brief', 'summarize'],
      resources: ['notes://index'],
      templates: ['notes://pages/{slug}']
    }, era)
    await assertDenied(acme.getPrompt({ name: 'greet' }), `${era}: acme, the default's deny`)
    await assertDenied(acme.getPrompt({ name: 'notes_secret' }), `${era}: acme, its own deny`)
    await assertDenied(acme.readResource({ uri: 'kb://kb/logo' }), `${era}: acme, kb__resources only in the default's allowOnly`)
    assert.equal((await acme.getPrompt({ name: 'summarize', arguments: { topic: 'owls' } })).messages.length, 2, era)
    // The same combination decides the tools: notes_lookup passes both.
    const tools = await (acme as unknown as Client).listTools()
    assert.deepEqual(tools.tools.map((tool) => tool.name), ['notes_lookup'], era)
  }
})

test('tenancy: one serverId for two tenants and globally: each tenant gets its own server first, a caller without a tenant the global one', async (t) => {
  const acme = await startLegacy(t, 'acme')
  const globex = await startLegacy(t, 'globex')
  const global = await startModern(t, 'global')
  const gw = await startGateway(t)
  assert.equal(await gw.put('/users/acme/mcp/servers/docs', ACME, { type: 'streamable_http', url: acme.url }), 201)
  assert.equal(await gw.put('/users/globex/mcp/servers/docs', GLOBEX, { type: 'streamable_http', url: globex.url }), 201)
  assert.equal(await gw.put('/mcp/servers/docs', ADMIN, { type: 'streamable_http', url: global.url }), 201)
  for (const era of ['legacy', 'modern'] as const) {
    for (const [key, query, tenant] of [[ACME, 'mcp=docs', 'acme'], [GLOBEX, 'mcp=docs', 'globex'], [ADMIN, 'userId=acme&mcp=docs', 'acme']] as const) {
      const at = `${era} ${tenant} ${query}`
      const client = await gw.client(era, query, key)
      assert.deepEqual(await surfaceOf(client), {
        prompts: [`user_${tenant}_prompt_greet`],
        resources: [`mem://${tenant}/readme`],
        templates: [`mem://${tenant}/notes/{id}`]
      }, at)
      assert.equal((await rpcError(client.readResource({ uri: 'kb://global/logo' }))).code, -32602, at)
      assert.equal((await rpcError(client.getPrompt({ name: 'greet' }))).code, -32602, at)
      const other = tenant === 'acme' ? 'globex' : 'acme'
      assert.equal((await rpcError(client.readResource({ uri: `mem://${other}/readme` }))).code, -32602, at)
    }
    const admin = await gw.client(era, 'mcp=docs', ADMIN)
    assert.deepEqual(await surfaceOf(admin), {
      prompts: ['greet', 'summarize'],
      resources: ['kb://global/logo'],
      templates: ['kb://global/articles/{id}']
    }, `${era} admin without a tenant`)
    assert.equal((await rpcError(admin.readResource({ uri: 'mem://acme/readme' }))).code, -32602, era)
  }
  const consulted = global.methods.filter((m) => m === 'resources/read' || m === 'prompts/get')
  assert.deepEqual(consulted, [], 'the global docs was never read for a tenant')
  assert.equal(acme.methods.filter((m) => m === 'resources/read').length, 0)
})

test('a client reading unknown URIs and prompts in a loop makes each server list its resources and prompts at most once more per refresh floor', async (t) => {
  // Each read that misses the cached lists used to list every allow-listed server again (resources, templates, prompts):
  // one small request of a tenant made every server of its allow-list (global ones too) send, and the gateway parse, whole lists.
  const acme = await startLegacy(t, 'acme')
  const gw = await startGateway(t)
  assert.equal(await gw.put('/users/acme/mcp/servers/docs', ACME, { type: 'streamable_http', url: acme.url }), 201)
  const client = await gw.client('legacy', 'mcp=docs', ACME)
  // Concurrent first lookups share one listing of each list.
  const misses = await Promise.all(Array.from({ length: 8 }, async (_, i) => await rpcError(client.readResource({ uri: `mem://acme/nope-${i}` }))))
  assert.deepEqual(misses.map((m) => m.code), Array(8).fill(-32602))
  for (let i = 0; i < 12; i++) {
    assert.equal((await rpcError(client.readResource({ uri: `mem://acme/missing-${i}` }))).code, -32602)
    assert.equal((await rpcError(client.getPrompt({ name: `user_acme_prompt_nope${i}` }))).code, -32602)
  }
  const count = (method: string): number => acme.methods.filter((m) => m === method).length
  // The cached lookup's listing, and at most one fresh listing within the floor (the loop takes well under it).
  assert.ok(count('resources/list') <= 2, `resources/list asked ${count('resources/list')} times`)
  assert.ok(count('resources/templates/list') <= 2, `resources/templates/list asked ${count('resources/templates/list')} times`)
  assert.ok(count('prompts/list') <= 2, `prompts/list asked ${count('prompts/list')} times`)
  // What the server has is still found.
  assert.equal((await client.readResource({ uri: 'mem://acme/readme' })).contents.length, 1)
})

test('a resources list refused for its size is not fetched again to be refused again while the refusal holds', async (t) => {
  const big = await startLegacy(t, 'big', { extraResources: 5001 })
  const gw = await startGateway(t)
  assert.equal(await gw.put('/users/acme/mcp/servers/big', ACME, { type: 'streamable_http', url: big.url }), 201)
  const client = await gw.client('legacy', 'mcp=big', ACME)
  for (let i = 0; i < 5; i++) {
    const resources = (await client.listResources()).resources
    assert.deepEqual(resources, [], 'a refused list lists nothing of that server')
    const unknown = await rpcError(client.readResource({ uri: `mem://big/nope-${i}` }))
    assert.equal(unknown.code, -32603)
    assert.match(unknown.message, /could not be listed: big/)
  }
  const lists = big.methods.filter((m) => m === 'resources/list').length
  assert.equal(lists, 1, `the refused list was fetched ${lists} times`)
})
