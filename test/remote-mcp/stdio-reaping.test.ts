import { test } from 'node:test'
import assert from 'node:assert/strict'
import { copyFile, mkdtemp, readdir, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { buildTestApp } from '../helpers/app.js'
import { minimalStdioFixture } from '../fixtures/mcp/index.js'

/** Live processes (not zombies) whose command line mentions `needle`. */
async function processesMatching (needle: string): Promise<number[]> {
  const pids: number[] = []
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const cmdline = (await readFile(`/proc/${entry}/cmdline`, 'utf8')).replace(/\0/g, ' ')
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8')
      if (cmdline.includes(needle) && !/\) Z /.test(stat)) pids.push(Number(entry))
    } catch {
      // the process ended while we looked
    }
  }
  return pids
}

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
  let left = await processesMatching(needle)
  for (let i = 0; i < 100 && left.length > 0; i++) {
    await sleep(100)
    left = await processesMatching(needle)
  }
  assert.deepEqual(left, [], 'no stdio server left running')
  assert.equal((await app.inject({ method: 'GET', url: '/status' })).json().totalClients, 0)
})
