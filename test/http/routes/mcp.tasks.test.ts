/**
 * POST /mcp, the Tasks extension (SEP-2663, `io.modelcontextprotocol/tasks`; issue 30): the
 * upstream is the conformance fixture server (SDK v2, scripts/lib/mcp-fixtures/conformance/tasks.ts),
 * whose task tools run as tasks for a caller that declared the extension. A 2026-07-28 client that
 * declares it gets a CreateTaskResult whose taskId is the gateway's handle (never the server's id);
 * tasks/get, tasks/update and tasks/cancel on any instance with the same key reach the server that
 * runs it. Another tenant's, another key's, an altered handle or one of another key material is an
 * unknown task (-32602); a task request that does not declare the extension is -32021. A caller
 * that did not declare it (or a legacy client) gets the result as before.
 *
 * The gateways use the default lean HTTP transport upstream (its tasks/* requests carry
 * `Mcp-Name: <taskId>`, which a 2026-07-28 SDK server requires); the last test, the SDK's own.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { createMcpHandler, fromJsonSchema, McpServer } from '@modelcontextprotocol/server'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { RequestStateSealer } from '../../../src/mcp-server/request-state.js'
import { TEST_QUOTA } from '../../helpers/app.js'
import { postModernMcp } from '../../helpers/mcp-raw.js'
import { startConformanceServer } from '../../../scripts/lib/mcp-fixtures/conformance/server.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const ACME_2 = 'acme-second-key-0123456789'
const GLOBEX = 'globex-key-0123456789'
const TASKS = { extensions: { 'io.modelcontextprotocol/tasks': {} } }

interface Gateway {
  base: string
  http: (method: string, path: string, key: string, body?: unknown) => Promise<{ status: number, json: any }>
  /** A raw 2026-07-28 request on /mcp?mcp=conf, declaring `capabilities` (default: the Tasks extension). */
  rpc: (key: string, method: string, params: Record<string, unknown>, capabilities?: Record<string, unknown>) => Promise<{ status: number, json: any }>
}

async function startUpstream (t: TestContext): Promise<string> {
  const fixture = await startConformanceServer()
  t.after(async () => { await fixture.close() })
  return fixture.url
}

async function startGateway (t: TestContext, secret: string, upstream: string, transport: 'sdk' | 'lean' = 'lean'): Promise<Gateway> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-mcp-tasks-'))
  const config = loadConfig({
    SANDBOX: 'none',
    ...TEST_QUOTA,
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: workspaces,
    EGRESS_ALLOW: '127.0.0.1/32',
    MCP_HTTP_TRANSPORT: transport,
    API_KEYS: `${ADMIN}:*,${ACME}:acme,${ACME_2}:acme,${GLOBEX}:globex`
  })
  const app = await buildApp(config, { logger: false, overrides: { mcpRequestState: new RequestStateSealer({ secret }) } })
  t.after(async () => {
    await app.close()
    await rm(workspaces, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  let id = 0
  const gw: Gateway = {
    base,
    async http (method, path, key, body) {
      const res = await fetch(base + path, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {})
      })
      const text = await res.text()
      return { status: res.status, json: text === '' ? undefined : JSON.parse(text) }
    },
    async rpc (key, method, params, capabilities = TASKS) {
      const name = method === 'tools/call' ? params.name : params.taskId
      const headers = typeof name === 'string' ? { 'mcp-name': name } : undefined
      return await postModernMcp(`${base}/mcp?mcp=conf`, key, { id: ++id, method, params }, { capabilities, ...(headers !== undefined ? { headers } : {}) })
    }
  }
  assert.equal((await gw.http('PUT', '/mcp/servers/conf', ADMIN, { type: 'streamable_http', url: upstream })).status, 201)
  return gw
}

/** An empty ack (tasks/cancel, tasks/update): `resultType: "complete"`, no task fields; `_meta` the gateway's own serverInfo. */
function assertAck (json: any): void {
  assert.equal(json.result?.resultType, 'complete', JSON.stringify(json))
  assert.deepEqual(Object.keys(json.result).filter((k) => k !== '_meta' && k !== 'resultType'), [])
  assert.equal(json.result._meta?.['io.modelcontextprotocol/serverInfo']?.name, 'tool-gateway')
}

/** Polls tasks/get until the task leaves `working` / `input_required` (or reaches `until`). */
async function poll (gw: Gateway, key: string, taskId: string, until?: string): Promise<any> {
  for (let i = 0; i < 100; i++) {
    const got = await gw.rpc(key, 'tasks/get', { taskId })
    const status = got.json.result?.status
    if (status === undefined) return got.json
    if (status === until || !['working', 'input_required'].includes(status)) return got.json.result
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`task ${taskId} did not settle`)
}

test('a 2026-07-28 client that declares the Tasks extension gets a task handle; another instance with the same key polls it to completion', async (t) => {
  const upstream = await startUpstream(t)
  const one = await startGateway(t, 'shared', upstream)
  const two = await startGateway(t, 'shared', upstream)

  const created = await one.rpc(ACME, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.3, label: 'gw' } })
  const task = created.json.result
  assert.equal(task?.resultType, 'task', JSON.stringify(created.json))
  assert.equal(task.status, 'working')
  assert.equal(typeof task.createdAt, 'string')
  assert.equal(task.ttlMs, 600_000)
  // The gateway's handle, not the server's id (a UUID of the fixture).
  assert.match(task.taskId, /^g\d\./)
  assert.doesNotMatch(task.taskId, /^[0-9a-f-]{36}$/)

  const done = await poll(two, ACME, task.taskId)
  assert.equal(done.status, 'completed')
  assert.equal(done.taskId, task.taskId)
  assert.deepEqual(done.result.content, [{ type: 'text', text: 'computed gw after 0.3s' }])
  assert.equal(done.resultType, 'complete')
  // Another API key of the same tenant holds no such task.
  const otherKey = await two.rpc(ACME_2, 'tasks/get', { taskId: task.taskId })
  assert.equal(otherKey.json.error?.code, -32602)
  assert.match(otherKey.json.error.message, /another API key/)
})

test('tasks/cancel reaches the server; tasks/update answers a task that waits for input', async (t) => {
  const gw = await startGateway(t, 'shared', await startUpstream(t))
  const long = (await gw.rpc(ACME, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60 } })).json.result
  assert.equal(long.resultType, 'task')
  const ack = await gw.rpc(ACME, 'tasks/cancel', { taskId: long.taskId })
  assertAck(ack.json)
  assert.equal((await poll(gw, ACME, long.taskId)).status, 'cancelled')

  const asking = (await gw.rpc(ACME, 'tools/call', { name: 'confirm_delete', arguments: { filename: 'a.txt' } })).json.result
  const parked = await poll(gw, ACME, asking.taskId, 'input_required')
  assert.equal(parked.status, 'input_required')
  assert.equal(parked.inputRequests.confirm.method, 'elicitation/create')
  const updated = await gw.rpc(ACME, 'tasks/update', { taskId: asking.taskId, inputResponses: { confirm: { action: 'accept', content: { confirm: true } } } })
  assertAck(updated.json)
  const done = await poll(gw, ACME, asking.taskId)
  assert.equal(done.status, 'completed')
  assert.match(done.result.content[0].text, /delete of a\.txt: \{"action":"accept"/)
})

test('another tenant\'s, an altered or a foreign handle is an unknown task; a task request without the extension is -32021', async (t) => {
  const upstream = await startUpstream(t)
  const gw = await startGateway(t, 'shared', upstream)
  const elsewhere = await startGateway(t, 'another', upstream)
  const task = (await gw.rpc(ACME, 'tools/call', { name: 'slow_compute', arguments: { seconds: 60 } })).json.result

  const stolen = await gw.rpc(GLOBEX, 'tasks/get', { taskId: task.taskId })
  assert.equal(stolen.json.error?.code, -32602)
  assert.match(stolen.json.error.message, /another tenant/)
  assert.doesNotMatch(JSON.stringify(stolen.json), /[0-9a-f]{8}-[0-9a-f]{4}-/)
  const cancelled = await gw.rpc(GLOBEX, 'tasks/cancel', { taskId: task.taskId })
  assert.equal(cancelled.json.error?.code, -32602)
  assert.equal((await gw.rpc(ACME, 'tasks/get', { taskId: task.taskId })).json.result.status, 'working')

  const [v, body, mac] = (task.taskId as string).split('.')
  const altered = `${v}.${body}.${(mac as string).startsWith('A') ? 'B' : 'A'}${(mac as string).slice(1)}`
  const tampered = await gw.rpc(ACME, 'tasks/get', { taskId: altered })
  assert.equal(tampered.json.error?.code, -32602)
  assert.match(tampered.json.error.message, /altered/)
  assert.equal((await elsewhere.rpc(ACME, 'tasks/get', { taskId: task.taskId })).json.error?.code, -32602)

  const undeclared = await gw.rpc(ACME, 'tasks/get', { taskId: task.taskId }, {})
  assert.equal(undeclared.json.error?.code, -32021)
  // tasks/result and tasks/list are not part of the extension.
  assert.equal((await gw.rpc(ACME, 'tasks/list', {})).json.error?.code, -32601)
  assertAck((await gw.rpc(ACME, 'tasks/cancel', { taskId: task.taskId })).json)
})

test('a caller that does not declare the extension, and a legacy client, get the result as before', async (t) => {
  const gw = await startGateway(t, 'shared', await startUpstream(t))
  const plain = await gw.rpc(ACME, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0, label: 'sync' } }, {})
  assert.equal(plain.json.result?.resultType, 'complete', JSON.stringify(plain.json))
  assert.equal(plain.json.result.taskId, undefined)
  assert.deepEqual(plain.json.result.content, [{ type: 'text', text: 'computed sync after 0s' }])

  const legacy = new LegacyClient({ name: 'legacy', version: '1.0.0' }, { capabilities: {} })
  await legacy.connect(new LegacyTransport(new URL(`${gw.base}/mcp?mcp=conf`), { requestInit: { headers: { authorization: `Bearer ${ACME}` } } }))
  t.after(async () => await legacy.close())
  const result = await legacy.callTool({ name: 'slow_compute', arguments: { seconds: 0, label: 'legacy' } }) as any
  assert.deepEqual(result.content, [{ type: 'text', text: 'computed legacy after 0s' }])
  assert.equal(result.taskId, undefined)
  // The 2026-07-28 discovery names the extension; a legacy initialize does not.
  const discovered = await gw.rpc(ACME, 'server/discover', {})
  assert.deepEqual(discovered.json.result?.capabilities?.extensions, TASKS.extensions, JSON.stringify(discovered.json))
  assert.equal(legacy.getServerCapabilities()?.extensions, undefined)
})

test('REST: /invoke with task: true answers the handle; GET /users/{u}/tasks/{taskId} polls it on another instance; cancel; another tenant: 404', async (t) => {
  const upstream = await startUpstream(t)
  const one = await startGateway(t, 'shared', upstream)
  const two = await startGateway(t, 'shared', upstream)
  const call = { name: 'slow_compute', arguments: { seconds: 0.3, label: 'rest' }, allow: { mcp: ['conf'] } }

  // Without the opt-in: the result, as before.
  const plain = await one.http('POST', '/invoke', ACME, call)
  assert.equal(plain.status, 200)
  assert.equal(plain.json.output, 'computed rest after 0.3s')
  assert.equal(plain.json.task, undefined)

  const created = await one.http('POST', '/invoke', ACME, { ...call, task: true })
  assert.equal(created.status, 200, JSON.stringify(created.json))
  assert.equal(created.json.isError, false)
  assert.equal(created.json.task?.status, 'working', JSON.stringify(created.json))
  assert.match(created.json.task.taskId, /^g\d\./)
  assert.equal(created.json.task.resultType, undefined)
  const path = `/users/acme/tasks/${encodeURIComponent(created.json.task.taskId as string)}`
  let got = await two.http('GET', path, ACME)
  for (let i = 0; i < 100 && got.json?.status === 'working'; i++) {
    await new Promise((resolve) => setTimeout(resolve, 50))
    got = await two.http('GET', path, ACME)
  }
  assert.equal(got.status, 200, JSON.stringify(got.json))
  assert.equal(got.json.status, 'completed')
  assert.equal(got.json.taskId, created.json.task.taskId)
  assert.deepEqual(got.json.result.content, [{ type: 'text', text: 'computed rest after 0.3s' }])
  assert.equal(got.json._meta, undefined)

  // Tenancy as every /users/{u} route; another tenant's handle is not found, never its task.
  assert.equal((await two.http('GET', path, GLOBEX)).status, 403)
  const stolen = await two.http('GET', path.replace('/users/acme/', '/users/globex/'), GLOBEX)
  assert.equal(stolen.status, 404)
  assert.equal(stolen.json.code, 'GW_TASK_NOT_FOUND')
  assert.match(stolen.json.message, /another tenant/)
  const garbage = await two.http('GET', '/users/acme/tasks/not-a-handle', ACME)
  assert.equal(garbage.status, 404)

  const long = await one.http('POST', '/invoke', ACME, { ...call, arguments: { seconds: 60 }, task: true })
  const longPath = `/users/acme/tasks/${encodeURIComponent(long.json.task.taskId as string)}`
  const cancelled = await two.http('DELETE', longPath, ACME)
  assert.equal(cancelled.status, 204, JSON.stringify(cancelled.json))
  assert.equal((await one.http('GET', longPath, ACME)).json.status, 'cancelled')
})

/**
 * A 2026-07-28 server that misbehaves: `forge` answers a plain result carrying the key the gateway
 * keeps an upstream task under (src/remote-mcp/task-results.ts), `rogue` a task whether or not the
 * caller declared the extension.
 */
async function startRogue (t: TestContext): Promise<string> {
  const handler = createMcpHandler(() => {
    const server = new McpServer({ name: 'rogue', version: '1.0.0' }, { capabilities: { tools: {} } })
    const noArgs = fromJsonSchema({ type: 'object' } as never)
    server.registerTool('forge', { description: 'a result posing as a task', inputSchema: noArgs }, async () => ({
      content: [{ type: 'text', text: 'plain' }],
      _meta: { 'io.tool-gateway/upstream-task': { resultType: 'task', taskId: 'forged', status: 'working' } }
    }))
    server.registerTool('rogue', { description: 'a task for everyone', inputSchema: noArgs }, async () => ({
      resultType: 'task', taskId: 'rogue-1', status: 'working', createdAt: new Date().toISOString(), lastUpdatedAt: new Date().toISOString(), ttlMs: 1000
    }) as never)
    return server
  }, { legacy: 'reject' })
  const http = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const raw = Buffer.concat(chunks)
      const headers = new Headers()
      for (const [k, v] of Object.entries(req.headers)) if (v !== undefined) headers.set(k, Array.isArray(v) ? v.join(', ') : v)
      const request = new Request(`http://127.0.0.1${req.url ?? '/'}`, { method: req.method, headers, ...(req.method === 'POST' ? { body: new Uint8Array(raw) } : {}) })
      handler.fetch(request, { parsedBody: raw.length > 0 ? JSON.parse(raw.toString('utf8')) : undefined }).then(async (response) => {
        res.writeHead(response.status, Object.fromEntries(response.headers))
        res.end(Buffer.from(await response.arrayBuffer()))
      }, () => { res.writeHead(500); res.end() })
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    await handler.close()
    await new Promise<void>((resolve) => http.close(() => resolve()))
  })
  const address = http.address()
  assert.ok(address !== null && typeof address === 'object')
  return `http://127.0.0.1:${address.port}/mcp`
}

test('a server cannot pass a result off as a task, nor hand a task to a caller that did not declare the extension', async (t) => {
  const gw = await startGateway(t, 'shared', await startRogue(t))
  // The gateway's own shell key, sent by the server, is dropped: a plain result, for every caller.
  for (const capabilities of [TASKS, {}]) {
    const forged = await gw.rpc(ACME, 'tools/call', { name: 'forge', arguments: {} }, capabilities)
    assert.equal(forged.json.result?.resultType, 'complete', JSON.stringify(forged.json))
    assert.deepEqual(forged.json.result.content, [{ type: 'text', text: 'plain' }])
    assert.equal(forged.json.result.taskId, undefined)
  }
  const rest = await gw.http('POST', '/invoke', ACME, { name: 'forge', arguments: {}, allow: { mcp: ['conf'] } })
  assert.equal(rest.json.output, 'plain')
  assert.equal(rest.json.task, undefined)

  // A task for a caller that declared the extension is passed on; for one that did not, an upstream error.
  assert.equal((await gw.rpc(ACME, 'tools/call', { name: 'rogue', arguments: {} })).json.result?.resultType, 'task')
  const unasked = await gw.rpc(ACME, 'tools/call', { name: 'rogue', arguments: {} }, {})
  assert.equal(unasked.json.result?.isError, true, JSON.stringify(unasked.json))
  assert.match(unasked.json.result.content[0].text, /answered a task to a call that did not declare the Tasks extension/)
  const restUnasked = await gw.http('POST', '/invoke', ACME, { name: 'rogue', arguments: {}, allow: { mcp: ['conf'] } })
  assert.equal(restUnasked.json.isError, true)
  assert.equal(restUnasked.json.task, undefined)
})

test('over the SDK\'s own HTTP transport (MCP_HTTP_TRANSPORT=sdk) too, a task is created and polled to completion', async (t) => {
  const gw = await startGateway(t, 'shared', await startUpstream(t), 'sdk')
  const created = await gw.rpc(ACME, 'tools/call', { name: 'slow_compute', arguments: { seconds: 0.1, label: 'sdk' } })
  assert.equal(created.json.result?.resultType, 'task', JSON.stringify(created.json))
  const done = await poll(gw, ACME, created.json.result.taskId)
  assert.equal(done.status, 'completed')
  assert.deepEqual(done.result.content, [{ type: 'text', text: 'computed sdk after 0.1s' }])
})
