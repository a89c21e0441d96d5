import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { McpEndpoint } from '../../../src/mcp-server/endpoint.js'
import type { McpExchange } from '../../../src/mcp-server/endpoint.js'
import type { Gateway } from '../../../src/gateway.js'

const exchange: McpExchange = { scope: {}, caller: { userId: 'acme', isAdmin: false }, tenant: 'acme', serverIds: [] }

/** GET /mcp on a real HTTP server; the answer's status, Retry-After and JSON body. */
async function getStream (endpoint: McpEndpoint): Promise<{ status: number, retryAfter: string | null, body: unknown }> {
  const server = createServer((req, res) => { endpoint.get(req, res, exchange).catch(() => {}) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, { headers: { accept: 'text/event-stream' } })
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() }
  } finally {
    server.close()
  }
}

// A stream over the limits is refused before the gateway is asked anything, so no Gateway is
// built here (it needs the whole service wiring; test/http/routes/mcp.test.ts has the real one).
const noGateway = {} as Gateway

test('GET /mcp over the instance\'s or the tenant\'s stream limit: 429 GW_RATE_LIMITED as a JSON-RPC refusal, with Retry-After', async () => {
  const full = await getStream(new McpEndpoint({ gateway: noGateway, maxStreams: 0 }))
  assert.equal(full.status, 429)
  assert.equal(full.retryAfter, '60')
  assert.deepEqual(full.body, {
    jsonrpc: '2.0',
    id: null,
    error: {
      code: -32000,
      message: 'Too many open MCP notification streams on this instance (at most 0); retry later',
      data: { statusCode: 429, code: 'GW_RATE_LIMITED' }
    }
  })
  const share = await getStream(new McpEndpoint({ gateway: noGateway, maxStreams: 10, maxStreamsPerTenant: 0 }))
  assert.equal(share.status, 429)
  assert.match((share.body as { error: { message: string } }).error.message, /for this tenant on this instance \(at most 0\)/)
})

test('a 2026-07-28 subscriptions/listen counts against the same stream limits: 429 with the request id', async () => {
  const endpoint = new McpEndpoint({ gateway: noGateway, maxStreams: 10, maxStreamsPerTenant: 0 })
  const listen = {
    jsonrpc: '2.0',
    id: 'listen-1',
    method: 'subscriptions/listen',
    params: {
      notifications: { toolsListChanged: true },
      _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28', 'io.modelcontextprotocol/clientCapabilities': {} }
    }
  }
  const server = createServer((req, res) => { endpoint.post(req, res, listen, exchange).catch(() => {}) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  try {
    const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-method': 'subscriptions/listen',
        'mcp-protocol-version': '2026-07-28'
      },
      body: JSON.stringify(listen)
    })
    assert.equal(res.status, 429)
    assert.equal(res.headers.get('retry-after'), '60')
    const body = await res.json() as { id: unknown, error: { message: string } }
    assert.equal(body.id, 'listen-1')
    assert.match(body.error.message, /for this tenant on this instance \(at most 0\)/)
  } finally {
    server.close()
    await endpoint.close()
  }
})
