import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SseError } from '@modelcontextprotocol/client'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import { createTransport, transportKind } from '../../../src/remote-mcp/transports.js'
import { CONNECT_TYPES, ConnectSpecError } from '../../../src/remote-mcp/transport.js'
import { SERVER_TYPES } from '../../../src/registry/server-config.js'
import { refuseRedirects } from '../../../src/remote-mcp/http-fetch.js'
import type { Logger } from '../../../src/logger.js'
import { startSseFixture, startStreamableHttpFixture, stdioFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

function recordingLogger (): Logger & { lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const push = (obj: Record<string, unknown>, msg?: string): void => { lines.push({ ...obj, msg }) }
  return { lines, debug: push, info: push, warn: push, error: push }
}

function textOf (result: unknown): string {
  const content = (result as { content: Array<{ type: string, text?: string }> }).content
  return content.map((c) => c.text ?? '').join('\n')
}

test('createTransport rejects specs that cannot work', () => {
  assert.throws(() => createTransport({ type: 'streamable_http' }), ConnectSpecError)
  assert.throws(() => createTransport({ type: 'sse', url: 'ftp://example.com/sse' }), /http or https/)
  assert.throws(() => createTransport({ type: 'sse', url: 'not a url' }), ConnectSpecError)
  assert.throws(() => createTransport({ type: 'stdio' }), /needs a command/)
  assert.throws(() => createTransport({ type: 'websocket' as 'sse', url: 'http://127.0.0.1:1/' }), /Unknown MCP transport type/)
})

test('one row per transport type the registry accepts, with the traits the pool reads', () => {
  assert.deepEqual([...CONNECT_TYPES].sort(), [...SERVER_TYPES].sort(), 'every type a config may name has a transport')
  for (const type of CONNECT_TYPES) assert.equal(typeof transportKind(type).create, 'function', type)
  assert.throws(() => transportKind('constructor' as 'sse'), /Unknown MCP transport type/, 'no prototype key is a transport')
  // stdio: a process the gateway starts (warm-up, first-connect deadline), no partial responses.
  assert.equal(transportKind('stdio').slowFirstStart, true)
  assert.equal(transportKind('stdio').closedMeansUnanswered, true)
  for (const type of ['streamable_http', 'sse'] as const) {
    assert.equal(transportKind(type).slowFirstStart, false, type)
    assert.equal(transportKind(type).closedMeansUnanswered, false, type)
  }
  assert.equal(transportKind('streamable_http').onTransportError(new Error('stream broke')), 'probe')
  assert.equal(transportKind('sse').onTransportError(new SseError(undefined, 'stream broke', undefined as never)), 'drop', 'a legacy SSE session cannot resume')
  assert.equal(transportKind('sse').onTransportError(new Error('other')), 'log')
  assert.equal(transportKind('stdio').onTransportError(new Error('other')), 'log')
})

test('the streamable-HTTP handles (lean and SDK) end their session on close; SSE and stdio have none', () => {
  const url = 'http://127.0.0.1:1/mcp'
  assert.equal(typeof createTransport({ type: 'streamable_http', url }).endSession, 'function')
  assert.equal(typeof createTransport({ type: 'streamable_http', url }, { httpTransport: 'lean' }).endSession, 'function')
  assert.equal(createTransport({ type: 'sse', url }).endSession, undefined)
})

test('streamable HTTP: headers and the injected fetch are used for every request, with redirect manual', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const seen: Array<{ auth: string | null, redirect: RequestInit['redirect'] }> = []
  const injected: FetchLike = async (url, init) => {
    seen.push({ auth: new Headers(init?.headers).get('authorization'), redirect: init?.redirect })
    return fetch(url, init)
  }
  const handle = createTransport({ type: 'streamable_http', url: fx.url, headers: { Authorization: 'Bearer s3cret' } }, { fetch: injected })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(handle.transport)
  t.after(() => client.close())
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'hi' } })), 'fixture:hi')
  assert.ok(seen.length >= 3, `expected several requests, saw ${seen.length}`)
  for (const s of seen) {
    assert.equal(s.auth, 'Bearer s3cret')
    assert.equal(s.redirect, 'manual')
  }
})

test('SSE: connects, lists and calls through the injected fetch', async (t) => {
  const fx = await startSseFixture({ marker: 'sse' })
  t.after(() => fx.close())
  let calls = 0
  const handle = createTransport({ type: 'sse', url: fx.url }, { fetch: async (url, init) => { calls++; return fetch(url, init) } })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(handle.transport)
  t.after(() => client.close())
  const { tools } = await client.listTools()
  assert.ok(tools.some((x) => x.name === 'echo'))
  assert.equal(textOf(await client.callTool({ name: 'echo', arguments: { text: 'x' } })), 'sse:x')
  assert.ok(calls >= 3)
  assert.equal(fx.stats.sessions, 1)
})

test('redirects are refused, never followed', async (t) => {
  let followed = 0
  const server = createServer((req, res) => {
    if (req.url === '/elsewhere') followed++
    res.writeHead(307, { location: '/elsewhere' }).end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
  await assert.rejects(refuseRedirects(fetch)(url, { method: 'POST', body: '{}' }), /redirect \(HTTP 307\)/)
  const client = new Client({ name: 't', version: '1' })
  await assert.rejects(client.connect(createTransport({ type: 'streamable_http', url }).transport, { timeout: 5000 }), /redirect/)
  assert.equal(followed, 0)
})

test('streamable HTTP: 2,000 calls on one transport emit no MaxListenersExceededWarning', async (t) => {
  const fx = await startStreamableHttpFixture()
  t.after(() => fx.close())
  const warnings: Error[] = []
  const onWarning = (w: Error): void => { if (w.name === 'MaxListenersExceededWarning') warnings.push(w) }
  process.on('warning', onWarning)
  t.after(() => { process.off('warning', onWarning) })
  const handle = createTransport({ type: 'streamable_http', url: fx.url })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(handle.transport)
  t.after(() => client.close())
  let maxListeners = 0
  for (let i = 0; i < 2000; i++) {
    await client.callTool({ name: 'echo', arguments: { text: String(i) } })
    maxListeners = Math.max(maxListeners, handle.abortListenerCount())
  }
  // Warnings are emitted on process.nextTick; let them land before asserting.
  await new Promise((resolve) => setImmediate(resolve))
  assert.deepEqual(warnings.map((w) => w.message), [])
  // The standalone GET stream holds one link; each finished POST released its own.
  assert.ok(maxListeners <= 2, `shared signal had ${maxListeners} abort listeners`)
  assert.equal(fx.stats.toolCalls, 2000)
})

test('stdio: the child gets the minimal env plus the config env, never the gateway env', async (t) => {
  process.env.GW_TEST_GATEWAY_SECRET = 'do-not-leak'
  t.after(() => { delete process.env.GW_TEST_GATEWAY_SECRET })
  const logger = recordingLogger()
  const handle = createTransport({ type: 'stdio', ...stdioFixture(), env: { FROM_CONFIG: 'yes' } }, { logger, label: 'stdio-env' })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(handle.transport, { timeout: 30_000 })
  const pid = handle.pid()
  assert.equal(typeof pid, 'number')
  try {
    assert.equal(textOf(await client.callTool({ name: 'env', arguments: { name: 'GW_TEST_GATEWAY_SECRET' } })), '<unset>')
    assert.equal(textOf(await client.callTool({ name: 'env', arguments: { name: 'FROM_CONFIG' } })), 'yes')
    assert.notEqual(textOf(await client.callTool({ name: 'env', arguments: { name: 'PATH' } })), '<unset>')
  } finally {
    await client.close()
  }
  assert.ok(logger.lines.some((l) => l.mcpClient === 'stdio-env' && String(l.stderr).includes('fixture stdio server stdio ready')),
    'the start-up line on stderr reached the logger')
  assert.throws(() => process.kill(pid as number, 0), /ESRCH/, 'the child is gone after close')
})

test('stdio: stderr is capped in the logs and still drained', async () => {
  const logger = recordingLogger()
  const script = "for (let i = 0; i < 2000; i++) process.stderr.write('line ' + i + ' ' + 'y'.repeat(100) + '\\n'); process.stderr.write('z'.repeat(300000))"
  const handle = createTransport({ type: 'stdio', command: process.execPath, args: ['-e', script] }, { logger, label: 'noisy', stderrCapBytes: 4096 })
  const closed = new Promise<void>((resolve) => { handle.transport.onclose = resolve })
  await handle.transport.start()
  await closed
  const stderrLines = logger.lines.filter((l) => typeof l.stderr === 'string')
  const logged = stderrLines.reduce((n, l) => n + String(l.stderr).length, 0)
  assert.ok(logged <= 4096, `logged ${logged} bytes`)
  assert.ok(logged > 0)
  assert.equal(logger.lines.filter((l) => String(l.msg).includes('exceeds the cap')).length, 1)
})

test('stdio: a line past maxMessageBytes closes the connection instead of growing the buffer', async (t) => {
  const handle = createTransport({ type: 'stdio', ...stdioFixture() }, { limits: { maxMessageBytes: 256 * 1024 } })
  const client = new Client({ name: 't', version: '1' })
  await client.connect(handle.transport, { timeout: 30_000 })
  t.after(() => client.close())
  assert.equal(textOf(await client.callTool({ name: 'big', arguments: { chars: 100_000 } })).length, 100_000)
  await assert.rejects(client.callTool({ name: 'big', arguments: { chars: 5_000_000 } }, undefined, { timeout: 20_000 }), /Connection closed/)
})
