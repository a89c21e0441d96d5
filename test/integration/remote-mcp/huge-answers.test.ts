// test-runner: alone
/**
 * A tenant's MCP server answering many concurrent calls with enormous SSE
 * events must not inflate the gateway's memory. Before the fix each call could buffer up to
 * 64 MiB (24 calls answered with 300 MB events took the gateway from 128 MB to 994 MB RSS).
 * Now reading stops at MCP_MAX_MESSAGE_BYTES and the in-flight answer bytes are budgeted per
 * tenant and per instance. Runs the real gateway process against a loopback fixture; memory is
 * read from /proc, so the file runs alone.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { join } from 'node:path'
import { startGateway } from '../../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../../scripts/lib/gateway-process.js'
import { rssBytes } from '../../../scripts/lib/proc.js'
import { spawnHugeAnswerServer } from '../../../scripts/lib/mcp-fixtures/faulty/huge-answer.js'

interface InvokeBody { isError: boolean, output: string, error: { code: string, message: string } | null }

const MiB = 1024 * 1024
const CALLS = 24
/** The bound the issue asks for: RSS growth over the baseline under the attack. */
const RSS_BOUND = 200 * MiB
const LIMIT_CODES = ['GW_UPSTREAM_TOO_LARGE', 'GW_UPSTREAM_BUDGET_EXHAUSTED']

async function invoke (gw: GatewayProcess, userId: string, name: string, args: Record<string, unknown>): Promise<InvokeBody> {
  const res = await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, userId, arguments: args })
  })
  assert.equal(res.status, 200, await res.clone().text())
  return await res.json() as InvokeBody
}

async function register (gw: GatewayProcess, userId: string, url: string): Promise<void> {
  const res = await fetch(`${gw.url}/users/${userId}/mcp/servers/huge`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'http', url })
  })
  assert.equal(res.status, 201, await res.text())
}

test('24 concurrent calls answered with 300 MB SSE events: RSS growth bounded, each call a documented tool error, other tenants served', async (t) => {
  // In its own process: its writes must not stall this process, which measures /healthz.
  const fixture = await spawnHugeAnswerServer({ hugeBytes: 300_000_000 })
  t.after(async () => await fixture.close())
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-huge-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { EGRESS_ALLOW: '127.0.0.1/32', LOAD_EXAMPLES: 'false', WORKSPACES_DIR: workspaces, MCP_CALL_TIMEOUT_MS: '60000' })
  t.after(async () => { await gw.stop(5000) })
  const pid = gw.child.pid as number
  await register(gw, 'mallory', fixture.url)
  await register(gw, 'bob', fixture.url)

  // Connected and warm before the baseline: the sessions, the SDK's code paths, the first listings.
  for (let i = 0; i < 5; i++) {
    for (const user of ['mallory', 'bob']) {
      const r = await invoke(gw, user, `user_${user}_tool_small`, { text: String(i) })
      assert.equal(r.isError, false, r.output)
      assert.equal(r.output, `small:${i}`)
    }
  }
  await new Promise((resolve) => setTimeout(resolve, 300))
  const before = await rssBytes(pid)

  let peak = before
  const run = { sampling: true }
  const sampler = (async () => {
    while (run.sampling) {
      peak = Math.max(peak, await rssBytes(pid).catch(() => 0))
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  })()
  const healthz: number[] = []
  const prober = (async () => {
    while (run.sampling) {
      const t0 = performance.now()
      const res = await fetch(`${gw.url}/healthz`)
      await res.arrayBuffer()
      healthz.push(performance.now() - t0)
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  })()

  const loop = monitorEventLoopDelay({ resolution: 5 })
  loop.enable()
  const started = performance.now()
  const attack = Promise.all(Array.from({ length: CALLS }, async () => await invoke(gw, 'mallory', 'user_mallory_tool_huge', {})))
  // Another tenant of the same server keeps being served while mallory's answers pour in.
  const bobs: InvokeBody[] = []
  const bob = (async () => {
    for (let i = 0; i < 10; i++) bobs.push(await invoke(gw, 'bob', 'user_bob_tool_small', { text: `b${i}` }))
  })()
  const results = await attack
  const attackMs = performance.now() - started
  await bob
  run.sampling = false
  await Promise.all([sampler, prober])
  const after = await rssBytes(pid)
  loop.disable()
  t.diagnostic(`this test process's own event-loop delay max ${(loop.max / 1e6).toFixed(1)} ms`)

  const served = await fixture.stats()
  const codes = results.map((r) => r.error?.code ?? 'none')
  const sorted = [...healthz].sort((a, b) => a - b)
  const p99 = sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? 0
  t.diagnostic(`RSS before ${(before / MiB).toFixed(1)} MiB, peak ${(peak / MiB).toFixed(1)} MiB (+${((peak - before) / MiB).toFixed(1)}), after ${(after / MiB).toFixed(1)} MiB`)
  t.diagnostic(`attack ${attackMs.toFixed(0)} ms; fixture wrote ${(served.bytesWritten / MiB).toFixed(1)} MiB over ${served.hugeCalls} calls (${served.abandoned} abandoned, ${served.completed} completed)`)
  t.diagnostic(`/healthz during the attack: ${healthz.length} probes, max ${(sorted.at(-1) ?? 0).toFixed(1)} ms, p99 ${p99.toFixed(1)} ms`)
  t.diagnostic(`codes: ${JSON.stringify(Object.fromEntries(LIMIT_CODES.map((c) => [c, codes.filter((x) => x === c).length])))}`)

  assert.equal(served.hugeCalls, CALLS)
  for (const r of results) {
    assert.equal(r.isError, true, r.output.slice(0, 300))
    assert.ok(LIMIT_CODES.includes(r.error?.code ?? ''), `${r.error?.code}: ${r.error?.message}`)
    if (r.error?.code === 'GW_UPSTREAM_TOO_LARGE') assert.match(r.error.message, /answer exceeds \d+ bytes \(MCP_MAX_MESSAGE_BYTES\)/)
    else assert.match(r.error?.message ?? '', /answers in flight.*MCP_RESPONSE_BUDGET_(TENANT_)?BYTES/)
  }
  assert.ok(codes.includes('GW_UPSTREAM_TOO_LARGE'), 'at least one answer was read up to the cap and refused')
  // Reading stopped at the cap: nowhere near the 24 x 300 MB the server tried to send.
  assert.ok(served.bytesWritten < CALLS * 16 * MiB, `${served.bytesWritten} bytes were read`)
  assert.ok(peak - before < RSS_BOUND, `RSS grew by ${((peak - before) / MiB).toFixed(1)} MiB under the attack (bound ${RSS_BOUND / MiB} MiB)`)
  for (const r of bobs) assert.equal(r.isError, false, `bob's call failed during the attack: ${r.output}`)

  // The same server and tenant still work afterwards.
  const again = await invoke(gw, 'mallory', 'user_mallory_tool_small', { text: 'after' })
  assert.equal(again.isError, false, again.output)
  assert.equal(again.output, 'small:after')
})
