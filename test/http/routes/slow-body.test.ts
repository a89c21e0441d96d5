import { test } from 'node:test'
import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { buildTestApp } from '../../helpers/app.js'

test('a slowloris-style body (headers sent, body trickled then stalled) is cut off with 408, and others are served meanwhile', async (t) => {
  const app = await buildTestApp(t, { env: { REQUEST_TIMEOUT_MS: '1000' } })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  const socket = connect(port, '127.0.0.1')
  t.after(() => socket.destroy())
  let answer = ''
  socket.on('data', (chunk: Buffer) => { answer += chunk.toString() })
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.write('POST /invoke HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"name":')
  // The stalled request does not block anyone else.
  const res = await fetch(`http://127.0.0.1:${port}/healthz`)
  assert.equal(res.status, 200)
  await closed
  assert.match(answer, /^HTTP\/1\.1 408 /)
})
