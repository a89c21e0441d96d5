// test-runner: alone
/**
 * Fairness between tenants in the bash sandbox (docs/ARCHITECTURE.md#isolation): while tenant A runs
 * a fork bomb, a memory bomb, CPU burners on every core, an output flood and a disk filler at once,
 * tenant B's `bash exec true` keeps succeeding with p50 under 3x its quiet p50 and B's file tools
 * keep working; when A's calls end, nothing of A's is left running. Real gateway, SANDBOX=bwrap.
 * The fork bomb is what this bound catches: with equal CPU shares and no cap, its churn on both cores
 * made B's spawns wait 200-900 ms on the kernel's process-table lock (CI failed on it); the
 * default SANDBOX_TENANT_CPUS (half the host) is what holds it.
 */
import assert from 'node:assert/strict'
import { readdirSync, statSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startGateway, type GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { allProcesses, waitUntil } from '../../scripts/lib/proc.js'

const isRoot = process.getuid?.() === 0

interface InvokeResult { isError: boolean, output: string, error: { code: string, message: string } | null }

async function invoke (gw: GatewayProcess, userId: string, name: string, args: Record<string, unknown>, workspaceId = 'default'): Promise<InvokeResult> {
  const res = await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, userId, arguments: args, context: { workspaceId } }),
    signal: AbortSignal.timeout(90_000)
  })
  assert.equal(res.status, 200, await res.clone().text())
  return await res.json() as InvokeResult
}

/** Duration of B's `bash exec true`, asserting it succeeded. */
async function timedTrue (gw: GatewayProcess): Promise<number> {
  const t0 = performance.now()
  const r = await invoke(gw, 'tenant-b', 'bash', { action: 'exec', command: 'true' })
  const ms = performance.now() - t0
  assert.equal(r.isError, false, `B's bash failed: ${r.output}`)
  const out = JSON.parse(r.output) as { exitCode: number, stderr: string }
  assert.equal(out.exitCode, 0, `B's bash failed: ${out.stderr}`)
  return ms
}

function p50 (xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] as number
}

const SAMPLES = 17

/** A's attacks, each bounded by its own timeout and small sizes. */
const ATTACKS: Array<{ name: string, command: string }> = [
  // The shell execs sleep (no fork needed) so the bomb's survivors are held until the timeout.
  { name: 'fork bomb', command: 'b() { b | b & }; b; exec sleep 60' },
  { name: 'process hog', command: 'i=0; while [ $i -lt 300 ]; do sleep 60 & i=$((i+1)); done; exec sleep 60' },
  // tail keeps a line without newlines in memory: grows until the tenant's memory limit kills it.
  { name: 'memory bomb', command: 'while :; do head -c 1500M /dev/zero | tail > /dev/null; done' },
  { name: 'cpu burners', command: 'for i in 1 2 3 4 5 6; do (while :; do :; done) & done; wait' },
  { name: 'output flood', command: 'yes flood' },
  { name: 'disk filler', command: 'while :; do head -c 64M /dev/zero > fill; rm -f fill; done' }
]

test('tenant B keeps working while tenant A attacks the executor, ' +
  'and nothing of A survives its calls', { timeout: 170_000, skip: !isRoot && 'needs root (uid per tenant, cgroups)' }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-fair-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  const gw = await startGateway(t, {
    SANDBOX: 'bwrap',
    WORKSPACES_DIR: dir,
    RATE_LIMIT_PER_MINUTE: '1000000',
    MAX_CONCURRENT_PER_TENANT: '64',
    SANDBOX_TENANT_MEMORY_BYTES: String(256 * 1024 * 1024)
  })
  t.after(async () => { await gw.stop(5000) })

  // Warm up (first calls create workspaces and cgroups), then B's idle latency.
  for (let i = 0; i < 3; i++) await timedTrue(gw)
  const idle: number[] = []
  for (let i = 0; i < SAMPLES; i++) idle.push(await timedTrue(gw))
  const idleP50 = p50(idle)

  // A's attacks, all at once, each in its own workspace, bounded by a 25 s timeout.
  const attackMs = 25_000
  const attacks = Promise.all(ATTACKS.map(async (a, i) =>
    await invoke(gw, 'tenant-a', 'bash', { action: 'exec', command: a.command, timeoutMs: attackMs }, `attack${i}`)))
  const startedAt = Date.now()
  await new Promise((resolve) => setTimeout(resolve, 3000))

  const loaded: number[] = []
  for (let i = 0; i < SAMPLES && Date.now() - startedAt < attackMs - 2000; i++) {
    loaded.push(await timedTrue(gw))
    // B's file tools work too.
    const w = await invoke(gw, 'tenant-b', 'write_file', { path: `notes-${i}.txt`, content: `note ${i}\n` })
    assert.equal(w.isError, false, `B's write_file failed: ${w.output}`)
    const r = await invoke(gw, 'tenant-b', 'read_file', { path: `notes-${i}.txt` })
    assert.equal(r.isError, false, `B's read_file failed: ${r.output}`)
    assert.match(r.output, new RegExp(`note ${i}`))
  }
  const loadedP50 = p50(loaded)
  const results = await attacks
  for (const [i, r] of results.entries()) t.diagnostic(`A ${ATTACKS[i]?.name}: ${r.isError ? `error ${r.error?.code ?? ''}` : (/"exitCode":(-?\d+)/.exec(r.output)?.[0] ?? '?')}`)

  // Nothing of A is left: no process of A's host uid, no command group of A's.
  const aUid = statSync(join(dir, 'tenant-a', 'attack0')).uid
  assert.ok(aUid !== 0 && aUid !== statSync(join(dir, 'tenant-b', 'default')).uid, 'A and B run as different uids')
  await waitUntil('A\'s processes are gone', async () => (await allProcesses()).every((p) => p.uid !== aUid), 10_000)

  // B's quiet latency is measured on both sides of the attack: this machine is shared, and a
  // slowdown that outlasts A's processes is the machine's, not A's doing. One that ends with them
  // still fails: the bound is 3x the slower of the two quiet medians.
  const after: number[] = []
  for (let i = 0; i < SAMPLES; i++) after.push(await timedTrue(gw))
  const quietP50 = Math.max(idleP50, p50(after))
  const ms = (xs: number[]): string => xs.map((x) => x.toFixed(0)).join(' ')
  t.diagnostic(`B exec true p50: before ${idleP50.toFixed(1)} ms, under attack ${loadedP50.toFixed(1)} ms over ${loaded.length} samples, ` +
    `after ${p50(after).toFixed(1)} ms; under attack: ${ms(loaded)}`)
  assert.ok(loaded.length >= 10, `only ${loaded.length} samples of B under attack`)
  assert.ok(loadedP50 < 3 * quietP50, `B's p50 under attack ${loadedP50.toFixed(1)} ms >= 3x quiet ${quietP50.toFixed(1)} ms ` +
    `(before ${idleP50.toFixed(1)}, after ${p50(after).toFixed(1)}); samples under attack: ${ms(loaded)}`)
  const status = await (await fetch(`${gw.url}/status`)).json() as { sandbox: { isolation: { cgroup: string, cgroupDetail: string, uidPerTenant: boolean } } }
  assert.equal(status.sandbox.isolation.uidPerTenant, true)
  if (status.sandbox.isolation.cgroup === 'v1') {
    const pidsBase = /(\/[^ ,()]*\/pids\/[^ ,()]*)/.exec(status.sandbox.isolation.cgroupDetail)?.[1]
    assert.ok(pidsBase !== undefined, status.sandbox.isolation.cgroupDetail)
    const groupsOfA = (): string[] => {
      try {
        // This gateway's groups only (named c<pid>-<n>): a gateway killed by another test leaves its own.
        return readdirSync(join(pidsBase, 't-tenant-a'), { withFileTypes: true })
          .filter((d) => d.isDirectory() && d.name.startsWith(`c${String(gw.child.pid)}-`)).map((d) => d.name)
      } catch {
        return []
      }
    }
    await waitUntil('A\'s command groups are removed', () => groupsOfA().length === 0, 10_000)
  }
})
