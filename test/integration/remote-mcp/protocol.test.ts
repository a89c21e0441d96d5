/**
 * A server config's `protocol` (auto, legacy, 2026-07-28): which era the gateway speaks to a
 * stdio server (legacy by default: the SDK's probe would spawn it twice; 2026-07-28 or auto when
 * the config says so), seen in what the server read on its stdin; and what the API accepts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { stdioFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { TEST_QUOTA } from '../../helpers/app.js'

const ENVELOPE = 'io.modelcontextprotocol/protocolVersion'

async function gateway (t: TestContext): Promise<{ app: FastifyInstance, dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-protocol-'))
  // A stdio server can take seconds to start on a loaded machine: generous deadlines.
  const config = loadConfig({
    SANDBOX: 'none',
    ...TEST_QUOTA,
    LOG_LEVEL: 'silent',
    WORKSPACES_DIR: join(dir, 'ws'),
    MCP_CONNECT_TIMEOUT_MS: '30000',
    MCP_LIST_TIMEOUT_MS: '30000'
  })
  const app = await buildApp(config, { logger: false })
  t.after(async () => {
    await app.close()
    await rm(dir, { recursive: true, force: true })
  })
  return { app, dir }
}

/** The JSON-RPC messages a fixture read on its stdin. */
async function readLog (path: string): Promise<Array<{ method?: string, params?: { _meta?: Record<string, unknown> } }>> {
  const text = await readFile(path, 'utf8').catch(() => '')
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l))
}

for (const [protocol, expected] of [[undefined, 'legacy'], ['legacy', 'legacy'], ['2026-07-28', 'modern']] as const) {
  test(`a stdio server with protocol ${protocol ?? '(default)'} is spoken to in the ${expected} era`, async (t) => {
    const { app, dir } = await gateway(t)
    const log = join(dir, 'stdin.log')
    const { command, args } = stdioFixture('stdio-modern.ts', ['s'])
    const put = await app.inject({
      method: 'PUT',
      url: '/mcp/servers/s',
      payload: { type: 'stdio', command, args, env: { FIXTURE_LOG: log }, ...(protocol !== undefined ? { protocol } : {}) }
    })
    assert.equal(put.statusCode, 201, put.body)
    assert.equal(put.json().server.config.protocol, protocol, put.body)
    const invoked = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'echo', arguments: { text: 'hi' }, allow: { mcp: ['s'] } } })
    assert.equal(invoked.statusCode, 200, invoked.body)
    assert.equal(invoked.json().output, 's:hi')

    const methods = (await readLog(log)).map((m) => m.method)
    const calls = (await readLog(log)).filter((m) => m.method === 'tools/call')
    if (expected === 'legacy') {
      assert.equal(methods[0], 'initialize', methods.join(','))
      assert.ok(calls.every((m) => m.params?._meta?.[ENVELOPE] === undefined))
    } else {
      // No probe to fall back from: server/discover for its capabilities, never initialize.
      assert.ok(!methods.includes('initialize'), methods.join(','))
      assert.ok(calls.length > 0 && calls.every((m) => m.params?._meta?.[ENVELOPE] === '2026-07-28'), JSON.stringify(calls))
    }
  })
}

test('protocol: unknown values are a 400; sse accepts only legacy; the field is kept and shown', async (t) => {
  const { app } = await gateway(t)
  const bad = await app.inject({ method: 'PUT', url: '/mcp/servers/x', payload: { type: 'streamable_http', url: 'http://127.0.0.1:9/mcp', protocol: '2025-11-25' } })
  assert.equal(bad.statusCode, 400)
  assert.equal(bad.json().code, 'GW_BAD_REQUEST')
  assert.match(bad.json().message, /protocol/)
  const sse = await app.inject({ method: 'PUT', url: '/mcp/servers/x', payload: { type: 'sse', url: 'http://127.0.0.1:9/sse', protocol: '2026-07-28' } })
  assert.equal(sse.statusCode, 400)
  assert.match(sse.json().message, /sse transport/)
  const ok = await app.inject({ method: 'PUT', url: '/mcp/servers/x', payload: { type: 'http', url: 'http://127.0.0.1:9/mcp', protocol: '2026-07-28' } })
  assert.equal(ok.statusCode, 201, ok.body)
  const read = await app.inject({ method: 'GET', url: '/mcp/servers' })
  assert.match(read.body, /"protocol":"2026-07-28"/)
})
