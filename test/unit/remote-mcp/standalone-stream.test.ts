// A legacy (2025-11-25) streamable-HTTP connect through the pool on the lean transport: which HTTP
// exchanges it makes and in what order. The standalone GET stream is opened only for a server
// that declares tools.listChanged (or for a relay connection, whose server may ask outside the
// call's stream), beside notifications/initialized rather than after its 202; a request still
// waits for that 202 (real servers refuse one that arrives before notifications/initialized).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { McpClientPool } from '../../../src/remote-mcp/pool.js'
import type { ConnectSpec } from '../../../src/remote-mcp/transport.js'

interface Recorder {
  url: string
  /** `GET`, `DELETE` or `POST {method}`, in arrival order. */
  seen: string[]
  /** Requests that arrived while the 202 of notifications/initialized was held back. */
  whileInitializedPending: string[]
  /** Sends a message on the open GET stream; false when none is open. */
  push: (message: unknown) => boolean
  tools: string[]
}

/**
 * A hand-written legacy server: JSON answers, a session id, the capabilities it is given. With
 * `hold`, it holds the 202 of notifications/initialized until a GET arrives (at most 2 s), so the
 * test sees whether the GET went without waiting for it, and which requests came before it was
 * answered.
 */
async function legacyServer (
  t: { after: (fn: () => Promise<void>) => void },
  capabilities: Record<string, unknown>,
  hold: boolean
): Promise<Recorder> {
  const rec: Recorder = { url: '', seen: [], whileInitializedPending: [], push: () => false, tools: ['one'] }
  let pending: { release: () => void } | undefined
  let stream: ServerResponse | undefined
  rec.push = (message) => {
    if (stream === undefined) return false
    stream.write(`event: message\ndata: ${JSON.stringify(message)}\n\n`)
    return true
  }
  const server = createServer((req, res) => {
    let raw = ''
    req.on('data', (c: Buffer) => { raw += c.toString() })
    req.on('end', () => {
      const body = raw === '' ? {} : JSON.parse(raw) as { id?: unknown, method?: string }
      const what = req.method === 'POST' ? `POST ${body.method ?? 'answer'}` : String(req.method)
      rec.seen.push(what)
      if (pending !== undefined) rec.whileInitializedPending.push(what)
      if (req.method === 'GET') {
        res.writeHead(200, { 'content-type': 'text/event-stream' })
        res.flushHeaders()
        stream = res
        pending?.release()
        return
      }
      if (req.method === 'DELETE') { res.writeHead(200).end(); return }
      if (body.method === 'initialize') {
        res.writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'sess-1' })
        const result = { protocolVersion: '2025-11-25', capabilities, serverInfo: { name: 'legacy', version: '1' } }
        res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result }))
        return
      }
      if (body.method === 'notifications/initialized' && hold) {
        const timer = setTimeout(() => { pending?.release() }, 2000)
        pending = {
          release: () => {
            clearTimeout(timer)
            pending = undefined
            res.writeHead(202).end()
          }
        }
        return
      }
      if (body.id === undefined) { res.writeHead(202).end(); return }
      if (body.method === 'tools/list') {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: { tools: rec.tools.map((name) => ({ name, inputSchema: { type: 'object' } })) } }))
        return
      }
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ jsonrpc: '2.0', id: body.id, result: {} }))
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(async () => { await new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }) })
  rec.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
  return rec
}

function leanPool (t: { after: (fn: () => Promise<void>) => void }, onToolsChanged?: (key: string) => void): McpClientPool {
  const pool = new McpClientPool({
    connectTimeoutMs: 10_000,
    listTimeoutMs: 10_000,
    callTimeoutMs: 10_000,
    idleMs: 60_000,
    maxClients: 10,
    toolsTtlMs: 60_000,
    clientInfo: { name: 'tool-gateway-test', version: '0.0.0' },
    httpTransport: 'lean',
    ...(onToolsChanged !== undefined ? { onToolsChanged } : {})
  })
  t.after(async () => { await pool.close() })
  return pool
}

// A legacy server only: no server/discover probe in the exchanges counted.
const legacy = (url: string): ConnectSpec => ({ type: 'streamable_http', url, protocol: 'legacy' })

test('a legacy server without tools.listChanged: initialize, initialized, tools/list and no GET stream', async (t) => {
  const server = await legacyServer(t, { tools: {} }, false)
  const pool = leanPool(t)
  const tools = await pool.listTools('k', legacy(server.url))
  assert.deepEqual(tools.map((x) => x.name), ['one'])
  // Closing ends the session (DELETE), after anything the connect sent.
  await pool.close()
  for (let i = 0; i < 200 && !server.seen.includes('DELETE'); i++) await sleep(10)
  assert.deepEqual(server.seen, ['POST initialize', 'POST notifications/initialized', 'POST tools/list', 'DELETE'])
})

test('a legacy server with tools.listChanged: the GET stream goes beside initialized, tools/list after its 202; ' +
  'list_changed still refreshes the list', async (t) => {
  const server = await legacyServer(t, { tools: { listChanged: true } }, true)
  const changed: string[] = []
  const pool = leanPool(t, (key) => { changed.push(key) })
  const tools = await pool.listTools('k', legacy(server.url))
  assert.deepEqual(tools.map((x) => x.name), ['one'])
  assert.deepEqual(server.seen, ['POST initialize', 'POST notifications/initialized', 'GET', 'POST tools/list'])
  assert.deepEqual(server.whileInitializedPending, ['GET'], 'the GET did not wait for the 202 of initialized; tools/list did')
  server.tools = ['one', 'two']
  assert.ok(server.push({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' }))
  for (let i = 0; i < 200 && pool.cachedTools('k', legacy(server.url))?.length !== 2; i++) await sleep(10)
  assert.deepEqual(changed, ['k'])
  const refreshed = pool.cachedTools('k', legacy(server.url))?.map((x) => x.name)
  assert.deepEqual(refreshed, ['one', 'two'], 'the change was heard on the GET stream and the list refreshed')
})

test('a relay connection (its Client declares capabilities) opens the GET stream even without tools.listChanged', async (t) => {
  const server = await legacyServer(t, { tools: {} }, true)
  const pool = leanPool(t)
  await pool.listTools('k~relay', { ...legacy(server.url), clientCapabilities: { roots: {} } })
  assert.deepEqual(server.seen, ['POST initialize', 'POST notifications/initialized', 'GET', 'POST tools/list'])
})
