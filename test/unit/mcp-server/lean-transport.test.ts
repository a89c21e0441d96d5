/**
 * The shared transport of /mcp's lean path (src/mcp-server/lean-transport.ts) with a real SDK
 * Server and real HTTP exchanges: requests of different clients carry the same JSON-RPC ids,
 * so each must reach its own exchange's state and its answer its own client, with its own id;
 * a request the protocol layer refuses as it is handed over is left unanswered for the SDK path.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { Server } from '@modelcontextprotocol/server'
import type { JSONRPCRequest } from '@modelcontextprotocol/server'
import { LeanAnswer, MAX_BUFFERED_EVENT_BYTES, SharedTransport } from '../../../src/mcp-server/lean-transport.js'
import { jsonOnce } from '../../../src/mcp-server/known-json.js'
import type { ExchangeState } from '../../../src/mcp-server/server.js'

/** What a test exchange carries instead of the gateway's options: a name and how long its handler takes. */
interface Tag { name: string, delayMs: number }

test('exchanges whose requests share an id each get their own state and their own answer, under their own id', async (t) => {
  const transport = new SharedTransport({ era: 'legacy' })
  const server = new Server({ name: 'shared', version: '1' }, { capabilities: { tools: {} } })
  server.setRequestHandler('tools/list', async (_request, ctx) => {
    const tag = transport.exchangeOf(ctx.mcpReq.id).opts as unknown as Tag
    await sleep(tag.delayMs)
    return { tools: [{ name: tag.name, inputSchema: { type: 'object' as const } }] }
  })
  await server.connect(transport)
  const refused: string[] = []
  const http = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as JSONRPCRequest
      const url = new URL(req.url ?? '/', 'http://x')
      const tag: Tag = { name: url.searchParams.get('name') ?? '?', delayMs: Number(url.searchParams.get('delay')) }
      const state = { opts: tag } as unknown as ExchangeState
      if (!transport.dispatch(body, new LeanAnswer(res, 'json'), state, res)) {
        refused.push(body.method)
        assert.equal(res.headersSent, false, 'nothing was written for a refused request')
        res.writeHead(418).end()
      }
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => {
    http.close()
    await server.close()
  })
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  const call = async (query: string, body: unknown): Promise<{ status: number, text: string }> => {
    const res = await fetch(`${base}/?${query}`, { method: 'POST', body: JSON.stringify(body) })
    return { status: res.status, text: await res.text() }
  }

  // The slow one is handed over first: its answer must not go to the fast one, nor the other way round.
  const [slow, fast, other] = await Promise.all([
    call('name=slow&delay=60', { jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    call('name=fast&delay=0', { jsonrpc: '2.0', id: 1, method: 'tools/list' }),
    call('name=other&delay=20', { jsonrpc: '2.0', id: 'one', method: 'tools/list' })
  ])
  assert.equal(slow.text, '{"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}}]},"jsonrpc":"2.0","id":1}')
  assert.equal(fast.text, '{"result":{"tools":[{"name":"fast","inputSchema":{"type":"object"}}]},"jsonrpc":"2.0","id":1}')
  assert.equal(other.text, '{"result":{"tools":[{"name":"other","inputSchema":{"type":"object"}}]},"jsonrpc":"2.0","id":"one"}')

  // No handler for the method: refused as it is handed over, left to the caller (the SDK path answers it in its words).
  const unknown = await call('name=x&delay=0', { jsonrpc: '2.0', id: 2, method: 'prompts/list' })
  assert.equal(unknown.status, 418)
  assert.deepEqual(refused, ['prompts/list'])
  assert.throws(() => transport.exchangeOf(1), /over/, 'no exchange is kept once answered')
})

test('a client that does not read its stream: past MAX_BUFFERED_EVENT_BYTES waiting in memory, events are not written; the response still is', async (t) => {
  // A tenant's server sending 1 MB progress notifications to its own client that stopped reading grew the gateway by
  // gigabytes, up to a crash (an audit): every event was written whatever the socket's buffer held.
  const note = { jsonrpc: '2.0' as const, method: 'notifications/progress', params: { progressToken: 1, progress: 1, message: 'x'.repeat(100_000) } }
  const seen: { written: number, buffered: number, request: boolean | undefined } = { written: 0, buffered: 0, request: undefined }
  const http = createServer((_req, res) => {
    const answer = new LeanAnswer(res, 'legacy')
    for (let i = 0; i < 300; i++) if (answer.event(note)) seen.written++
    seen.buffered = res.writableLength
    seen.request = answer.event({ jsonrpc: '2.0', id: 'gwq:x', method: 'elicitation/create', params: {} })
    answer.answer({ jsonrpc: '2.0', id: 1, result: { content: [] } }, 200)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => { http.closeAllConnections(); await new Promise<void>((resolve) => http.close(() => resolve())) })
  const { connect } = await import('node:net')
  const socket = connect((http.address() as AddressInfo).port, '127.0.0.1')
  socket.pause()
  t.after(() => { socket.destroy() })
  socket.write('POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}')
  for (let i = 0; i < 200 && seen.request === undefined; i++) await sleep(10)
  assert.ok(seen.written > 0 && seen.written < 300, `${seen.written} of 300 events written to a client that does not read`)
  assert.ok(seen.buffered <= MAX_BUFFERED_EVENT_BYTES + 2 * 110_000, `${seen.buffered} bytes wait in memory`)
  assert.equal(seen.request, false, 'a request of the client is not written either (its asker is told)')
  // Once the client reads, it gets what was written, then the response.
  socket.resume()
  let text = ''
  socket.on('data', (c: Buffer) => { text += c.toString('latin1') })
  for (let i = 0; i < 500 && !text.includes('"result"'); i++) await sleep(10)
  assert.match(text, /"id":1,"result":\{"content":\[\]\}|"result":\{"content":\[\]\}/)
})

test('a cached listing is written as the bytes it already has: the same Buffer to every client, as JSON or on a stream', async (t) => {
  // A tools/list answer was JSON.stringify of the whole listing per request: 100 concurrent answers of a 4 MB
  // listing were a new 4 MB string each (RSS +300 MB, 3.8 s of CPU for 300; an audit).
  const tools = Array.from({ length: 50 }, (_, i) => ({ name: `t${i}`, description: 'd'.repeat(100) }))
  const bytes = jsonOnce(tools)
  const handed: unknown[] = []
  const http = createServer((req, res) => {
    const write = res.write.bind(res) as (chunk: unknown) => boolean
    res.write = ((chunk: unknown) => { handed.push(chunk); return write(chunk) }) as typeof res.write
    const answer = new LeanAnswer(res, req.url === '/stream' ? 'modern' : 'json')
    if (req.url === '/stream') answer.event({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: 1 } })
    answer.answer({ jsonrpc: '2.0', id: 7, result: { tools, ttlMs: 0 } }, 200)
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  t.after(async () => { http.closeAllConnections(); await new Promise<void>((resolve) => http.close(() => resolve())) })
  const base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  const expected = JSON.stringify({ jsonrpc: '2.0', id: 7, result: { tools, ttlMs: 0 } })
  for (const path of ['/json', '/json']) {
    const res = await fetch(base + path, { method: 'POST', body: '{}' })
    assert.equal(res.headers.get('content-type'), 'application/json')
    assert.equal(res.headers.get('content-length'), String(Buffer.byteLength(expected)))
    assert.equal(await res.text(), expected)
  }
  const streamed = await (await fetch(`${base}/stream`, { method: 'POST', body: '{}' })).text()
  assert.ok(streamed.endsWith(`event: message\ndata: ${expected}\n\n`), streamed.slice(-200))
  assert.equal(handed.filter((chunk) => chunk === bytes).length, 3, 'the listing\'s Buffer itself, once per answer')
})
