// test-runner: alone
/**
 * Deep read_file calls on a large file that keeps changing (so the line index never helps) used
 * to push every other request's latency up: 16 concurrent scans of one tenant queued so much work
 * on the event loop that /healthz took ~330 ms. The tenant's file work is now gated (two at a time
 * per tenant) and the line count yields between chunks. SANDBOX=none: only file tools run here.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { appendFile, mkdir, mkdtemp, realpath, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'

function p99 (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.min(s.length - 1, Math.floor(s.length * 0.99))] as number
}

test('one tenant\'s deep reads of a changing big file do not stall other requests', async (t) => {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-readfair-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const gw = await startGateway(t, { SANDBOX: 'none', WORKSPACES_DIR: dir, RATE_LIMIT_PER_MINUTE: '100000' })
  t.after(async () => { await gw.stop() })

  // Create the workspace through the gateway, then fill it: 48 MiB of 2-byte lines.
  const first = await fetch(`${gw.url}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'write_file', arguments: { path: 'big.log', content: '' }, userId: 'hog' }) })
  assert.equal(first.status, 200)
  const file = path.join(dir, 'hog', 'default', 'big.log')
  await mkdir(path.dirname(file), { recursive: true })
  const LINES = 24 * 1024 * 1024
  await writeFile(file, Buffer.alloc(LINES * 2, 'x\n'))

  const state = { stop: false }
  // The file keeps changing: the line index is never trusted for it.
  const changer = (async () => { while (!state.stop) { await appendFile(file, 'y\n'); await new Promise((resolve) => setTimeout(resolve, 50)) } })()
  const reader = async (): Promise<void> => {
    while (!state.stop) {
      await fetch(`${gw.url}/invoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'read_file', arguments: { path: 'big.log', startLine: LINES - 5, maxChars: 50 }, userId: 'hog' })
      }).then(async (r) => await r.text()).catch(() => {})
    }
  }
  const readers = Array.from({ length: 16 }, reader)
  // Let the readers get going, then sample /healthz for a while.
  await new Promise((resolve) => setTimeout(resolve, 1000))
  const lat: number[] = []
  const until = Date.now() + 6000
  while (Date.now() < until) {
    const t0 = performance.now()
    const r = await fetch(`${gw.url}/healthz`)
    await r.text()
    lat.push(performance.now() - t0)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  state.stop = true
  await Promise.all([changer, ...readers])
  const worst = p99(lat)
  assert.ok(lat.length > 50, `too few samples: ${lat.length}`)
  assert.ok(worst < 100, `/healthz p99 ${worst.toFixed(1)} ms over ${lat.length} samples while another tenant scans (want < 100 ms)`)
})
