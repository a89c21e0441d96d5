import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'

// One request fans out: a batch runs its calls concurrently and a listing asks every server at
// once, each call adding (and later removing) abort listeners to the request's signal and to the
// pooled client's transport signal. That is bounded work, not a leak, and must not print Node's
// leak warning (warnings must not flood the logs).
test('a batch of 30 overlapping MCP calls and a listing of 15 servers print no MaxListenersExceededWarning', async (t) => {
  const fx = await startStreamableHttpFixture({ marker: 'fan' })
  t.after(() => fx.close())
  const warnings: string[] = []
  const onWarning = (w: Error): void => { if (w.name === 'MaxListenersExceededWarning') warnings.push(w.message) }
  process.on('warning', onWarning)
  t.after(() => { process.off('warning', onWarning) })
  const app = await buildTestApp(t, { env: { BATCH_CONCURRENCY: '32' } })

  const ids = Array.from({ length: 15 }, (_, i) => `fan${i}`)
  for (const id of ids) {
    const put = await app.inject({ method: 'PUT', url: `/mcp/servers/${id}`, payload: { type: 'streamable_http', url: fx.url } })
    assert.equal(put.statusCode, 201, put.body)
  }
  const listing = await app.inject({ method: 'GET', url: `/tools?mcp=${ids.join(',')}` })
  assert.equal(listing.statusCode, 200)
  assert.deepEqual(listing.json().unavailable, [])

  const calls = Array.from({ length: 30 }, (_, i) => ({ name: 'fan0__slow', arguments: { ms: 200 }, callId: `c${i}` }))
  const batch = await app.inject({ method: 'POST', url: '/invoke/batch', payload: { calls } })
  assert.equal(batch.statusCode, 200, batch.body)
  const results = batch.json().results as Array<{ isError: boolean, output: string }>
  assert.equal(results.length, 30)
  for (const r of results) assert.equal(r.output, 'slept 200')

  await new Promise((resolve) => setImmediate(resolve))
  assert.deepEqual(warnings, [])
})
