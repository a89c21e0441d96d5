/**
 * The fetch wrappers of the SDK's HTTP transports on their own: abort listeners that do not pile up
 * on the transport-wide signal, and answers bounded by size and budget. Redirect
 * refusal through a real transport: transports.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { getEventListeners } from 'node:events'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import { isolateAbortSignals, limitResponses, SseEventSizer } from '../../../src/remote-mcp/http-fetch.js'
import { MessageTooLargeError, ResponseBudget } from '../../../src/remote-mcp/response-limits.js'

test('isolateAbortSignals: a fetch that never removes its abort listener leaves none on the shared signal', async () => {
  // Mimics undici: one abort listener per request on the signal it is given, released only at GC.
  const leaky: FetchLike = async (_url, init) => {
    init?.signal?.addEventListener('abort', () => {})
    return new Response('ok')
  }
  const shared = new AbortController()
  const isolated = isolateAbortSignals(leaky)
  for (let i = 0; i < 2000; i++) await (await isolated.fetch('http://x/', { signal: shared.signal })).text()
  assert.equal(getEventListeners(shared.signal, 'abort').length, 0)
  assert.equal(isolated.sharedListenerCount(), 0)

  // The control: without isolation the same fetch piles listeners onto the shared signal.
  const control = new AbortController()
  for (let i = 0; i < 50; i++) await leaky('http://x/', { signal: control.signal })
  assert.equal(getEventListeners(control.signal, 'abort').length, 50)
})

test('isolateAbortSignals: aborting the shared signal still aborts an in-flight request and its body', async () => {
  let seenSignal: AbortSignal | undefined
  const slowBody: FetchLike = async (_url, init) => {
    seenSignal = init?.signal ?? undefined
    const body = new ReadableStream<Uint8Array>({
      start (controller) {
        init?.signal?.addEventListener('abort', () => controller.error(init.signal?.reason))
        controller.enqueue(new TextEncoder().encode('partial'))
      }
    })
    return new Response(body)
  }
  const shared = new AbortController()
  const isolated = isolateAbortSignals(slowBody)
  const response = await isolated.fetch('http://x/', { signal: shared.signal })
  assert.equal(isolated.sharedListenerCount(), 1, 'the link lives while the body is unread')
  assert.notEqual(seenSignal, shared.signal)
  const reading = response.text()
  shared.abort(new Error('closing'))
  await assert.rejects(reading)
  assert.equal(seenSignal?.aborted, true)
  assert.equal(getEventListeners(shared.signal, 'abort').length, 0)
})

test('SseEventSizer: the bytes of the unfinished event, whatever the chunk boundaries (LF, CRLF, CR)', () => {
  const text = 'event: message\r\ndata: 12345\r\n\r\ndata: abc\ndata: de\n\ndata: x\r\rdata: tail'
  const bytes = Buffer.from(text)
  // After the whole text only `data: tail` (10 bytes) is unfinished.
  for (let i = 0; i <= bytes.length; i++) {
    const s = new SseEventSizer()
    s.push(bytes.subarray(0, i))
    assert.equal(s.push(bytes.subarray(i)), 10, `split at ${i}`)
  }
  const s = new SseEventSizer()
  assert.equal(s.push(Buffer.from('data: 1234\n')), 11, 'a finished line of an unfinished event counts')
  assert.equal(s.push(Buffer.from('\n')), 0, 'a blank line ends the event')
})

test('limitResponses: a JSON body past the bound errors the stream; an SSE stream is cut at the first oversized event only', async (t) => {
  const server = createServer((req, res) => {
    if (req.url === '/json') { res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ x: 'j'.repeat(200_000) })); return }
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    // Many small events (more than the bound in total), then one too large.
    for (let i = 0; i < 100; i++) res.write(`data: ${'s'.repeat(10_000)}\n\n`)
    res.end(`data: ${'b'.repeat(200_000)}\n\n`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.after(() => new Promise<void>((resolve) => { server.close(() => resolve()); server.closeAllConnections() }))
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const budget = new ResponseBudget({ totalBytes: 10 * 1024 * 1024, ownerBytes: 1024 * 1024 })
  const limited = limitResponses(async (u, i) => await fetch(u, i), { maxMessageBytes: 100_000, budget, owner: 'o' })
  await assert.rejects((await limited(`${base}/json`)).json(), (err: unknown) => err instanceof MessageTooLargeError || (err as { cause?: unknown }).cause instanceof MessageTooLargeError)
  const reader = (await limited(`${base}/sse`)).body?.getReader()
  let read = 0
  const err = await (async () => {
    try {
      for (;;) {
        const { value, done } = await (reader as ReadableStreamDefaultReader<Uint8Array>).read()
        if (done) return undefined
        read += value.length
      }
    } catch (e) { return e }
  })()
  assert.ok(err instanceof MessageTooLargeError, String(err))
  assert.ok(read >= 100 * 10_000, `the small events (${read} bytes) all passed`)
  assert.equal(budget.usedBytes(), 0, 'the charges were given back')
})
