/**
 * The gateway's own /mcp endpoint in front of a real MCP server: @modelcontextprotocol/
 * server-everything over stdio, registered as a global server. An SDK client on /mcp gets what
 * it would get from the server directly (compared with a second SDK client on the server
 * itself): native content items, structuredContent, outputSchema, annotations and progress
 * notifications under its own token; a task-only tool is not offered; a refusal's message
 * carries the JSON-RPC prefix once. A 2026-07-28 client (SDK v2) on the same URL gets the same,
 * in its revision, while the server behind speaks only the legacy one.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client as ModernClient, StreamableHTTPClientTransport as ModernTransport } from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js'
import type { Progress, Tool } from '@modelcontextprotocol/sdk/types.js'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { TEST_QUOTA } from '../../helpers/app.js'

const EVERYTHING_BIN = fileURLToPath(import.meta.resolve('@modelcontextprotocol/server-everything/dist/index.js'))
const TASK_ONLY = 'simulate-research-query'

interface Setup {
  base: string
  /** An SDK client on the gateway's /mcp?mcp=everything. */
  gateway: Client
  /** An SDK client on server-everything itself, for what "unchanged" means. */
  direct: Client
}

async function setup (t: TestContext): Promise<Setup> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-mcp-everything-'))
  // A stdio server can take seconds to start on a loaded machine: generous deadlines.
  const config = loadConfig({
    SANDBOX: 'none',
    ...TEST_QUOTA,
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: workspaces,
    MCP_LIST_TIMEOUT_MS: '30000',
    MCP_CONNECT_TIMEOUT_MS: '30000'
  })
  const app = await buildApp(config, { logger: false })
  const clients: Client[] = []
  // Clients first, so none is left holding a stream to the closing gateway.
  t.after(async () => {
    for (const c of clients) await c.close()
    await app.close()
    await rm(workspaces, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const base = `http://127.0.0.1:${address.port}`
  const put = await app.inject({
    method: 'PUT',
    url: '/mcp/servers/everything',
    payload: { type: 'stdio', command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] }
  })
  assert.equal(put.statusCode, 201, put.body)

  const gateway = new Client({ name: 'test', version: '1.0.0' })
  const direct = new Client({ name: 'test-direct', version: '1.0.0' })
  clients.push(gateway, direct)
  await gateway.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp?mcp=everything`)))
  await direct.connect(new StdioClientTransport({ command: process.execPath, args: [EVERYTHING_BIN, 'stdio'], stderr: 'ignore' }))
  return { base, gateway, direct }
}

function byName (tools: Tool[], name: string): Tool {
  const tool = tools.find((x) => x.name === name)
  assert.ok(tool, `${name} in ${tools.map((x) => x.name).join(', ')}`)
  return tool
}

test('tools/list through /mcp: annotations, titles and outputSchema as the server lists them; the task-only tool is withheld with a diagnostic', async (t) => {
  const { base, gateway, direct } = await setup(t)
  const viaGateway = (await gateway.listTools()).tools
  const upstream = (await direct.listTools()).tools
  assert.ok(byName(upstream, TASK_ONLY).execution?.taskSupport === 'required', 'the fixture still has a task-only tool')
  assert.equal(viaGateway.find((x) => x.name === TASK_ONLY), undefined, 'a task-only tool is not offered')
  for (const name of ['get-tiny-image', 'get-structured-content', 'trigger-long-running-operation']) {
    const mine = byName(viaGateway, name)
    const theirs = byName(upstream, name)
    assert.equal(mine.title, theirs.title, name)
    assert.deepEqual(mine.annotations, theirs.annotations, name)
    assert.deepEqual(mine.outputSchema, theirs.outputSchema, name)
    // `execution` as the server listed it (the legacy era carries it whole; /mcp declares no 2025-11-25 `tasks` capability).
    assert.deepEqual(mine.execution, theirs.execution, name)
  }
  assert.ok(byName(viaGateway, 'get-structured-content').outputSchema !== undefined)

  const listing = await (await fetch(`${base}/tools?mcp=everything&format=mcp`)).json() as { tools: Tool[], diagnostics: Array<{ type: string, name: string, exposedAs: string | null, message: string }> }
  assert.equal(listing.tools.find((x) => x.name === TASK_ONLY), undefined)
  const why = listing.diagnostics.find((d) => d.name === TASK_ONLY)
  assert.equal(why?.type, 'unsupported')
  assert.equal(why?.exposedAs, null)
  assert.match(why?.message ?? '', /MCP task/)

  // Named anyway: a tool error that says why, through /invoke and /mcp alike.
  const invoked = await (await fetch(`${base}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: TASK_ONLY, arguments: { topic: 'x' }, allow: { mcp: ['everything'] } }) })).json() as { isError: boolean, error: { code: string, message: string } }
  assert.equal(invoked.isError, true)
  assert.equal(invoked.error.code, 'GW_TOOL_ERROR')
  assert.match(invoked.error.message, /MCP task/)
  const called = await gateway.callTool({ name: TASK_ONLY, arguments: { topic: 'x' } })
  assert.equal(called.isError, true)
  assert.match(JSON.stringify(called.content), /MCP task/)
})

test('tools/call through /mcp: image, resource links and structuredContent arrive as the server sent them', async (t) => {
  const { gateway, direct } = await setup(t)
  await gateway.listTools()
  await direct.listTools()

  const image = await gateway.callTool({ name: 'get-tiny-image', arguments: {} })
  const imageDirect = await direct.callTool({ name: 'get-tiny-image', arguments: {} })
  assert.deepEqual(image.content, imageDirect.content)
  const png = (image.content as Array<{ type: string, data?: string, mimeType?: string }>).find((c) => c.type === 'image')
  assert.equal(png?.mimeType, 'image/png')
  assert.ok(Buffer.from(png?.data ?? '', 'base64').subarray(1, 4).toString() === 'PNG', 'the bytes themselves')
  assert.equal(image.isError, false)

  const structured = await gateway.callTool({ name: 'get-structured-content', arguments: { location: 'New York' } })
  const structuredDirect = await direct.callTool({ name: 'get-structured-content', arguments: { location: 'New York' } })
  assert.ok(structuredDirect.structuredContent !== undefined)
  assert.deepEqual(structured.structuredContent, structuredDirect.structuredContent)
  assert.deepEqual(structured.content, structuredDirect.content)

  const links = await gateway.callTool({ name: 'get-resource-links', arguments: { count: 2 } })
  const linksDirect = await direct.callTool({ name: 'get-resource-links', arguments: { count: 2 } })
  assert.deepEqual(links.content, linksDirect.content)
  assert.ok((links.content as Array<{ type: string }>).some((c) => c.type === 'resource_link'))
})

test('progress: an SDK client gets the server\'s progress notifications; concurrent raw calls each get only their own token', async (t) => {
  const { base, gateway } = await setup(t)
  const seen: Progress[] = []
  const done = await gateway.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
    undefined,
    { onprogress: (p) => { seen.push(p) } }
  )
  assert.match(JSON.stringify(done.content), /completed/)
  // The SDK client drops a progress notification read together with the response (it removes
  // the handler first), so the last step may be missing here; the raw calls below see them all.
  assert.ok(seen.length >= 1, 'progress reached the SDK client')
  assert.ok(seen.every((p, i) => p.total === 3 && p.progress === i + 1), JSON.stringify(seen))

  // Two calls at once, each on its own POST with its own token (a string and a number).
  const call = async (
    id: number,
    token: string | number
  ): Promise<Array<{ id?: number, method?: string, params?: { progressToken?: unknown, progress?: number }, result?: unknown }>> => {
    const res = await fetch(`${base}/mcp?mcp=everything`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'trigger-long-running-operation', arguments: { duration: 0.4, steps: 4 }, _meta: { progressToken: token } }
      })
    })
    assert.equal(res.status, 200)
    assert.match(res.headers.get('content-type') ?? '', /text\/event-stream/)
    const body = await res.text()
    return body.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)))
  }
  const [a, b] = await Promise.all([call(1, 'token-a'), call(2, 77)])
  for (const [messages, token, id] of [[a, 'token-a', 1], [b, 77, 2]] as const) {
    const progress = messages.filter((m) => m.method === 'notifications/progress')
    assert.deepEqual(progress.map((m) => m.params?.progressToken), [token, token, token, token])
    assert.deepEqual(progress.map((m) => m.params?.progress), [1, 2, 3, 4])
    const answer = messages.find((m) => m.id === id)
    assert.ok(answer?.result !== undefined, JSON.stringify(messages))
  }

  // Without a token: a JSON answer, no progress.
  const plain = await fetch(`${base}/mcp?mcp=everything`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 3,
      method: 'tools/call',
      params: { name: 'trigger-long-running-operation', arguments: { duration: 0.1, steps: 2 } }
    })
  })
  assert.match(plain.headers.get('content-type') ?? '', /application\/json/)
  assert.match(JSON.stringify(await plain.json()), /completed/)
})

test('a refused call: the JSON-RPC error message carries its "MCP error <code>:" prefix once', async (t) => {
  const { gateway } = await setup(t)
  await assert.rejects(gateway.callTool({ name: 'no-such-tool', arguments: {} }), (err: unknown) => {
    assert.ok(err instanceof McpError)
    assert.equal(err.code, ErrorCode.InvalidParams)
    assert.equal(err.message, "MCP error -32602: No tool named 'no-such-tool'")
    return true
  })
  await assert.rejects(gateway.callTool({ name: 'calculate', arguments: {} }), (err: unknown) => {
    assert.ok(err instanceof McpError)
    assert.equal(err.message, "MCP error -32602: Tool 'calculate' is not in the request's allow-list")
    assert.equal((err.data as { code?: string }).code, 'GW_NOT_ALLOWED')
    return true
  })
})

test('a 2026-07-28 client (SDK v2) in front of the legacy server: the same listing, content items and progress under its own token', async (t) => {
  const { base, gateway } = await setup(t)
  const modern = new ModernClient({ name: 'test-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  await modern.connect(new ModernTransport(new URL(`${base}/mcp?mcp=everything`)))
  t.after(async () => await modern.close())
  assert.equal(modern.getProtocolEra(), 'modern')

  const listed = (await modern.listTools()).tools
  const legacyListed = (await gateway.listTools()).tools
  assert.deepEqual(listed.map((x) => x.name), legacyListed.map((x) => x.name))
  for (const name of ['get-tiny-image', 'get-structured-content', 'trigger-long-running-operation']) {
    // The same but `execution.taskSupport`, which the 2026-07-28 wire does not have (SEP-2663 tasks are
    // server-directed; the SDK's codec drops it, and an `execution` left empty with it).
    const { execution, ...legacyTool } = byName(legacyListed, name)
    assert.ok(execution?.taskSupport !== undefined, `${name}: the legacy listing carries execution as the server listed it`)
    assert.deepEqual(byName(listed as Tool[], name), legacyTool, name)
  }

  const image = await modern.callTool({ name: 'get-tiny-image', arguments: {} })
  assert.deepEqual(image.content, (await gateway.callTool({ name: 'get-tiny-image', arguments: {} })).content)
  const structured = await modern.callTool({ name: 'get-structured-content', arguments: { location: 'New York' } })
  assert.ok(structured.structuredContent !== undefined)

  const seen: Array<{ progress: number, total?: number }> = []
  const done = await modern.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 } },
    { onprogress: (p) => { seen.push(p) } }
  )
  assert.match(JSON.stringify(done.content), /completed/)
  assert.ok(seen.length >= 1, 'progress reached the 2026-07-28 client')
  assert.ok(seen.every((p, i) => p.total === 3 && p.progress === i + 1), JSON.stringify(seen))
})
