// test-runner: alone
/**
 * Attack: `bash write` to a background process that never reads stdin.
 * Each write used to wait forever and keep its whole input in the gateway, so abandoned large
 * writes grew the gateway's memory without bound. These tests run the real gateway process
 * with bwrap and talk to it over HTTP, as a hostile tenant would.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { processesMatching, rssBytes } from '../../scripts/lib/proc.js'

interface InvokeBody { isError: boolean, output: string, error: { code: string, message: string } | null }

interface Harness {
  gw: GatewayProcess
  workspaces: string
  invoke: (args: Record<string, unknown>, opts?: { workspaceId?: string, signal?: AbortSignal }) => Promise<InvokeBody>
}

async function setup (t: TestContext, env: Record<string, string> = {}): Promise<Harness> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-sec-write-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { SANDBOX: 'bwrap', WORKSPACES_DIR: workspaces, LOG_LEVEL: 'info', ...env })
  t.after(async () => {
    await gw.stop(5000)
    for (const p of await processesMatching(workspaces)) {
      try { process.kill(p.pid, 'SIGKILL') } catch {}
    }
  })
  const invoke = async (args: Record<string, unknown>, opts: { workspaceId?: string, signal?: AbortSignal } = {}): Promise<InvokeBody> => {
    const res = await fetch(`${gw.url}/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'bash', userId: 'mallory', arguments: args, context: { workspaceId: opts.workspaceId ?? 'default' } }),
      ...(opts.signal ? { signal: opts.signal } : {})
    })
    assert.equal(res.status, 200, await res.clone().text())
    return await res.json() as InvokeBody
  }
  return { gw, workspaces, invoke }
}

async function startSilent (h: Harness, command = 'sleep 600', workspaceId = 'default'): Promise<string> {
  const r = await h.invoke({ action: 'start', command }, { workspaceId })
  assert.equal(r.isError, false, r.output)
  return (JSON.parse(r.output) as { processId: string }).processId
}

/** Bounds a promise so a write that never answers fails the test instead of hanging it. */
async function within<T> (ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms) })
  try {
    return await Promise.race([p, timeout])
  } finally {
    clearTimeout(timer)
  }
}

test('a write the process never reads times out as a tool error that says how many bytes went through', async (t) => {
  const h = await setup(t)
  const id = await startSilent(h)
  const input = 'x'.repeat(1_000_000)
  const began = Date.now()
  const r = await within(15_000, 'write to a process that does not read', h.invoke({ action: 'write', processId: id, input, timeoutMs: 1000 }))
  assert.equal(r.isError, true, r.output)
  assert.match(r.error?.message ?? '', /timed out after 1000 ms/)
  const m = /wrote (\d+) of 1000000 bytes/.exec(r.error?.message ?? '')
  assert.ok(m, r.error?.message)
  assert.ok(Number(m[1]) < 1_000_000)
  assert.ok(Date.now() - began < 10_000)
})

test('one pending write per process: a second concurrent write is a clear tool error, not a queue', async (t) => {
  const h = await setup(t)
  const id = await startSilent(h)
  const first = h.invoke({ action: 'write', processId: id, input: 'y'.repeat(500_000), timeoutMs: 15_000 })
  first.catch(() => {}) // awaited below; a failure before then must not be an unhandled rejection
  // Let the first write reach the process manager and block on the full pipe.
  await new Promise((resolve) => setTimeout(resolve, 500))
  const second = await within(8000, 'a second concurrent write', h.invoke({ action: 'write', processId: id, input: 'z' }))
  assert.equal(second.isError, true, second.output)
  assert.match(second.error?.message ?? '', /already pending/)
  const r1 = await within(30_000, 'the first write', first)
  assert.equal(r1.isError, true)
})

test('after a write gave up, the process gets the next write once it reads what was queued', async (t) => {
  const h = await setup(t)
  const id = await startSilent(h, 'sleep 3; cat > /dev/null')
  const r = await within(15_000, 'the first write', h.invoke({ action: 'write', processId: id, input: 'q'.repeat(1_000_000), timeoutMs: 500 }))
  assert.equal(r.isError, true)
  assert.match(r.error?.message ?? '', /timed out after 500 ms: wrote \d+ of 1000000 bytes/)
  const busy = await h.invoke({ action: 'write', processId: id, input: 'x' })
  assert.equal(busy.isError, true)
  assert.match(busy.error?.message ?? '', /already pending/)
  // Once cat reads, the queued chunk leaves the gateway and writes are accepted again.
  const until = Date.now() + 20_000
  for (;;) {
    const w = await h.invoke({ action: 'write', processId: id, input: 'x' })
    if (!w.isError) break
    assert.match(w.error?.message ?? '', /already pending/)
    assert.ok(Date.now() < until, 'the pending write never cleared')
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
})

test('a process that reads gets a large input whole, written in bounded chunks', async (t) => {
  const h = await setup(t)
  const id = await startSilent(h, 'cat > got.txt')
  const input = 'abcdefghij'.repeat(100_000)
  const r = await within(20_000, 'write to cat', h.invoke({ action: 'write', processId: id, input }))
  assert.equal(r.isError, false, r.output)
  assert.equal((JSON.parse(r.output) as { bytesWritten: number }).bytesWritten, 1_000_000)
  const stop = await h.invoke({ action: 'stop', processId: id })
  assert.equal(stop.isError, false, stop.output)
  assert.equal((await stat(join(h.workspaces, 'mallory', 'default', 'got.txt'))).size, 1_000_000)
})

test('memory: many abandoned 1.9 MB writes to processes that never read leave the gateway RSS bounded', async (t) => {
  const h = await setup(t)
  const ids = [await startSilent(h), await startSilent(h), await startSilent(h), await startSilent(h, 'sleep 600', 'other')]
  const pid = h.gw.child.pid as number
  const input = 'm'.repeat(1_900_000)
  // Warm up first: the same bodies through a call that keeps nothing (status ignores input) take
  // the heap to the size these 1.9 MB bodies need, so the baseline already includes it.
  const run = async (calls: number, args: (i: number) => Record<string, unknown>): Promise<void> => {
    let next = 0
    const worker = async (): Promise<void> => {
      while (next < calls) {
        const i = next++
        // The client gives up after 300 ms (a timeout or a disconnect).
        await h.invoke(args(i), { workspaceId: i % ids.length === 3 ? 'other' : 'default', signal: AbortSignal.timeout(300) }).catch(() => {})
      }
    }
    await within(120_000, `${calls} calls`, Promise.all(Array.from({ length: 8 }, worker)))
  }
  await run(80, (i) => ({ action: 'status', processId: ids[i % ids.length], input }))
  await new Promise((resolve) => setTimeout(resolve, 2000))
  const before = await rssBytes(pid)

  const total = 200
  await run(total, (i) => ({ action: 'write', processId: ids[i % ids.length], input }))
  await new Promise((resolve) => setTimeout(resolve, 2000))
  const after = await rssBytes(pid)
  const growthMiB = (after - before) / 1024 / 1024
  t.diagnostic(`gateway RSS ${Math.round(before / 1048576)} MiB -> ${Math.round(after / 1048576)} MiB after ${total} abandoned ${input.length} byte writes`)
  // 200 x 1.9 MB is ~380 MB of input: held, it is far above this bound (the rest is heap noise).
  assert.ok(growthMiB < 150, `gateway RSS grew by ${growthMiB.toFixed(0)} MiB`)
  // And the gateway still answers.
  const health = await within(5000, '/healthz', fetch(`${h.gw.url}/healthz`))
  assert.equal(health.status, 200)
})
