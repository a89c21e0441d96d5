import { test } from 'node:test'
import assert from 'node:assert/strict'
import { copyFile, mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildTestApp } from '../../helpers/app.js'
import { minimalStdioFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { processesMatching, waitUntil } from '../../../scripts/lib/proc.js'

test('stdio servers are always reaped: 150 register/invoke/remove cycles through the gateway leave no process', async (t) => {
  const app = await buildTestApp(t)
  // A private copy of the script: other test files run the same fixture concurrently, and
  // only this test's processes must be counted.
  const dir = await mkdtemp(join(tmpdir(), 'tg-reap-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const needle = join(dir, 'stdio-minimal.sh')
  await copyFile(minimalStdioFixture().args[0] ?? '', needle)
  const fixture = { command: '/bin/sh', args: [needle] }
  assert.deepEqual(await processesMatching(needle), [])
  for (let i = 0; i < 150; i++) {
    const id = `cli-${i % 7}`
    const put = await app.inject({ method: 'PUT', url: `/mcp/servers/${id}`, payload: { type: 'stdio', ...fixture } })
    assert.ok(put.statusCode === 201 || put.statusCode === 200, put.body)
    const listing = (await app.inject({ method: 'GET', url: `/tools?mcp=${id}` })).json()
    assert.deepEqual(listing.unavailable, [], JSON.stringify(listing.unavailable))
    const del = await app.inject({ method: 'DELETE', url: `/mcp/servers/${id}` })
    assert.equal(del.statusCode, 200)
  }
  // closing is asynchronous (stdin EOF, then SIGTERM/SIGKILL by the SDK): wait, bounded
  await waitUntil('every stdio server to exit', async () => (await processesMatching(needle)).length === 0, 10_000)
  assert.equal((await app.inject({ method: 'GET', url: '/status' })).json().totalClients, 0)
})
