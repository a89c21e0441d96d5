// test-runner: alone
/**
 * Attack: one tenant's regular expressions must not starve another tenant's
 * grep. The JavaScript regex workers were one process-wide FIFO (one worker on two cores): twelve
 * `(?=(a+)+\s)` greps of one tenant over a 40-character line, each running to its 5 s budget, made
 * another tenant's `(?<=hello )world` grep of an 11-byte file wait about a minute. The pool is now
 * shared per tenant (docs/ARCHITECTURE.md#fd-layer): the victim's greps must all finish before
 * the first of the attacker's calls ends (a FIFO pool serves them after all twelve, a round-robin
 * one without a spare worker after the attacker's running call), each within a small multiple of
 * the victim's read_file at the same moment, and the attacker's calls still end with the
 * per-call budget's clear error. Real gateway process; SANDBOX=none (both patterns have
 * look-arounds, which only the Node engine runs, so the sandbox plays no part).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'

interface InvokeBody { isError: boolean, output: string, error: { code: string, message: string } | null }

/** Bound on one call: long enough for a FIFO pool to serve the victim after twelve 5 s calls. */
const CALL_BOUND_MS = 120_000
const ATTACKER_CALLS = 12
const VICTIM_SAMPLES = 9

async function invoke (gw: GatewayProcess, userId: string, name: string, args: Record<string, unknown>): Promise<InvokeBody> {
  const res = await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, userId, arguments: args, context: { workspaceId: 'default' } }),
    signal: AbortSignal.timeout(CALL_BOUND_MS)
  })
  assert.equal(res.status, 200, await res.clone().text())
  return await res.json() as InvokeBody
}

/** The victim's grep, timed; asserts its one right answer. */
async function victimGrep (gw: GatewayProcess): Promise<number> {
  const began = performance.now()
  const r = await invoke(gw, 'victim', 'grep', { pattern: '(?<=hello )world', path: 'hello.txt' })
  const ms = performance.now() - began
  assert.equal(r.isError, false, r.output)
  assert.deepEqual((JSON.parse(r.output) as { matches: unknown[] }).matches, [{ file: 'hello.txt', line: 1, content: 'hello world' }])
  return ms
}

/** The victim's read_file of the same file: the same route and event loop, no regex worker (the control). */
async function victimRead (gw: GatewayProcess): Promise<number> {
  const began = performance.now()
  const r = await invoke(gw, 'victim', 'read_file', { path: 'hello.txt' })
  const ms = performance.now() - began
  assert.equal(r.isError, false, r.output)
  return ms
}

function p50 (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

test('one tenant saturating the regex workers with catastrophic greps does not starve another tenant\'s grep', { timeout: 240_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-sec-grepfair-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  const gw = await startGateway(t, { SANDBOX: 'none', WORKSPACES_DIR: dir, RATE_LIMIT_PER_MINUTE: '100000', MAX_CONCURRENT_PER_TENANT: '64' })
  // SIGKILL soon: the attacker's queued calls are not waited for.
  t.after(async () => { await gw.stop(1000) })

  const w1 = await invoke(gw, 'mallory', 'write_file', { path: 'bomb.txt', content: `${'a'.repeat(40)}\n` })
  assert.equal(w1.isError, false, w1.output)
  const w2 = await invoke(gw, 'victim', 'write_file', { path: 'hello.txt', content: 'hello world' })
  assert.equal(w2.isError, false, w2.output)

  // The victim alone: warm-up (route, worker start), then its idle latency.
  for (let i = 0; i < 3; i++) await victimGrep(gw)
  await victimRead(gw)
  const solo: number[] = []
  const soloRead: number[] = []
  for (let i = 0; i < VICTIM_SAMPLES; i++) {
    solo.push(await victimGrep(gw))
    soloRead.push(await victimRead(gw))
  }

  // The attacker's calls, all at once; each runs its regex until its own budget ends it.
  let attackerDone = 0
  const attackerEnds: number[] = []
  const attack = Array.from({ length: ATTACKER_CALLS }, async () => {
    const r = await invoke(gw, 'mallory', 'grep', { pattern: '(?=(a+)+\\s)' })
    attackerDone++
    attackerEnds.push(performance.now())
    return r
  })
  for (const p of attack) p.catch(() => {})
  const attackStart = performance.now()
  // Let the attacker's calls reach the workers (its first batch runs for seconds).
  await new Promise((resolve) => setTimeout(resolve, 500))

  const loaded: number[] = []
  const loadedRead: number[] = []
  for (let i = 0; i < VICTIM_SAMPLES; i++) {
    loaded.push(await victimGrep(gw))
    if (attackerDone > 0) break
    loadedRead.push(await victimRead(gw))
  }
  const victimEnd = performance.now()
  const attackerDoneAtVictimEnd = attackerDone
  t.diagnostic(`victim grep: solo p50 ${p50(solo).toFixed(1)} ms (max ${Math.max(...solo).toFixed(1)}), under attack p50 ${p50(loaded).toFixed(1)} ms ` +
    `(max ${Math.max(...loaded).toFixed(1)}, first ${loaded[0]?.toFixed(1) ?? '?'}) over ${loaded.length} calls; ` +
    `read_file control: solo p50 ${p50(soloRead).toFixed(1)} ms, under attack p50 ${p50(loadedRead).toFixed(1)} ms; ` +
    `victim done ${Math.round(victimEnd - attackStart)} ms after the attack began, ${attackerDoneAtVictimEnd} of ${ATTACKER_CALLS} attacker calls done by then`)

  // The attacker's first call still ends with the per-call budget's error (the worker is not shared with it).
  const first = await Promise.race(attack)
  t.diagnostic(`first attacker call ended ${Math.round((attackerEnds[0] ?? performance.now()) - attackStart)} ms after the attack began`)
  assert.equal(first.isError, true, first.output)
  assert.match(first.error?.message ?? '', /took too long to evaluate/)

  assert.equal(attackerDoneAtVictimEnd, 0, `the victim's ${loaded.length} greps ended after ${attackerDoneAtVictimEnd} of the attacker's calls`)
  assert.equal(loaded.length, VICTIM_SAMPLES)
  // A ratio, not an absolute bound: the victim's grep against its read_file of the same file at the
  // same moment (same route and event loop, no regex worker), so the host's speed and load cancel
  // out and what is left is the wait for a worker. Idle, the two are within 1.1-1.4x of each other.
  assert.ok(p50(loaded) < 3 * p50(loadedRead), `victim grep p50 under attack ${p50(loaded).toFixed(1)} ms >= 3x its read_file p50 ${p50(loadedRead).toFixed(1)} ms`)
})
