import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { buildTestApp } from '../../helpers/app.js'

/** Sends headers and the start of a body on a raw socket, then nothing more; collects the answer. */
function stall (t: TestContext, port: number, head: string): { answer: () => string, closed: Promise<void> } {
  const socket = connect(port, '127.0.0.1')
  t.after(() => socket.destroy())
  let answer = ''
  socket.on('data', (chunk: Buffer) => { answer += chunk.toString() })
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.write(head)
  return { answer: () => answer, closed }
}

async function listening (t: TestContext, timeoutMs: number): Promise<number> {
  const app = await buildTestApp(t, { env: { REQUEST_TIMEOUT_MS: String(timeoutMs) } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return (app.server.address() as { port: number }).port
}

test('a slowloris-style body (headers sent, body trickled then stalled) is cut off with 408, and others are served meanwhile', async (t) => {
  const port = await listening(t, 1000)
  const stalled = stall(t, port, 'POST /invoke HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":')
  // The stalled request does not block anyone else.
  const res = await fetch(`http://127.0.0.1:${port}/healthz`)
  assert.equal(res.status, 200)
  await stalled.closed
  assert.match(stalled.answer(), /^HTTP\/1\.1 408 /)
  // The gateway's one error body (src/errors.ts), though written on the raw socket.
  const body = JSON.parse(/\{.*\}/.exec(stalled.answer())?.[0] ?? 'null') as unknown
  assert.deepEqual(body, { statusCode: 408, code: 'GW_REQUEST_TIMEOUT', error: 'Request Timeout', message: 'The request body did not arrive within 1000 ms' })
})

test('one sweeping timer for all bodies: stalled bodies before, between and after finished requests each get their 408', async (t) => {
  const port = await listening(t, 500)
  const healthz = async (): Promise<Response> => await fetch(`http://127.0.0.1:${port}/healthz`, { headers: { connection: 'close' } })
  const head = 'POST /invoke HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{'
  // Requests that finish at once leave the sweep's list before the stalled ones join it.
  for (let i = 0; i < 20; i++) assert.equal((await healthz()).status, 200)
  const first = stall(t, port, head)
  // Finished requests arriving after the stalled one (later deadlines) and between two stalled ones.
  for (let i = 0; i < 10; i++) assert.equal((await healthz()).status, 200)
  const second = stall(t, port, head)
  await Promise.all([first.closed, second.closed])
  assert.match(first.answer(), /^HTTP\/1\.1 408 /)
  assert.match(second.answer(), /^HTTP\/1\.1 408 /)
})
