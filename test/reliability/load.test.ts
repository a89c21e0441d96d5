import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { Agent, request, WebSocket } from 'undici'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'
import type { HttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'
import { tenantMarker } from '../fixtures/reliability/functions/tenant-marker.js'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { descendantsOf, openFds, processesMatching, rssBytes, waitUntil } from '../../scripts/lib/proc.js'

// Load: 2,000 mixed invocations at concurrency 64 across 20 tenants against the real
// gateway process (real sandbox, real loopback MCP servers, real workspaces), then proof that
// nothing was left behind.

const REQUESTS = 2000
const CONCURRENCY = 64
const FUNCTIONS_DIR = fileURLToPath(new URL('../fixtures/reliability/functions', import.meta.url))
/** Every tenant registers its server under the same id: only the exact (userId, serverId) key tells them apart. */
const SERVER_ID = 'tools'

// Confusable ids side by side: prefixes (1 / 1-2 / 1-2-3), case (t1 / T1), digits that read
// alike once a separator is dropped (1-2 / 12). None may ever see another's tools, files or results.
const TENANTS = [
  '1', '1-2', '1-2-3', '12', 't1', 't1-2', 'T1', 't12', 'acme', 'acme-eu',
  'ACME', 'a', 'a-a', 'aa', 'u-01', 'u-1', 'u-10', 'x', 'x-x-x', 'zz-last'
] as const

/**
 * Bounds of "back to baseline" on the gateway process. The baseline is taken after a warm-up
 * that touched every kind for every tenant (pools connected, modules loaded, JIT warm), and
 * every after-value is polled with a bound, so nothing here is a timing threshold.
 * - fds: the baseline is the lowest count over 6 s (warm-up keep-alive sockets closing). Our
 *   own client sockets are closed before measuring; the extra keep-alive connections the load
 *   opened to the MCP servers close within the servers' 5 s keep-alive timeout. Measured: back
 *   to the baseline exactly, or one above while a socket is still closing. 2 fds of slack,
 *   while a leak of one fd per bash call (333 here) or per MCP call (667) is far beyond it.
 * - heap: measured after a forced full GC (heapInspector), so it counts what is still
 *   reachable, not when V8 last chose to collect. Measured growth 1 to 3 MiB (compiled code,
 *   caches of listings and schemas); 8 MiB of slack catches anything retained per request
 *   from about 4 KiB up (a result, a request body, a listener closure, a child handle).
 * - RSS: V8 and glibc give freed pages back to the OS late and partly (measured: RSS after
 *   the load is often below the warm-up's), so RSS is the coarse guard: 64 MiB over the
 *   baseline, about 32 KiB per request.
 */
const FD_SLACK = 2
const HEAP_SLACK_BYTES = 8 * 1024 * 1024
const RSS_SLACK_BYTES = 64 * 1024 * 1024

type Kind = 'function' | 'mcp_encoded' | 'mcp_raw' | 'write_read' | 'bash'
const KINDS: readonly Kind[] = ['function', 'mcp_encoded', 'mcp_raw', 'write_read', 'bash']

interface Task {
  id: number
  tenant: string
  kind: Kind
}

interface InvokeBody {
  name: string
  userId: string
  arguments: Record<string, unknown>
  allow?: { mcp: string[] }
}

/** The HTTP requests of a task, in order (write_read is two: the read checks what the write put). */
function requestsOf (task: Task): InvokeBody[] {
  const { id, tenant: userId } = task
  const nonce = `req-${id}`
  switch (task.kind) {
    case 'function':
      return [{ name: 'tenant_marker', userId, arguments: { nonce } }]
    case 'mcp_encoded':
      return [{ name: `user_${userId}_tool_echo`, userId, arguments: { text: nonce }, allow: { mcp: [SERVER_ID] } }]
    case 'mcp_raw':
      // A raw name with userId goes through the full priority; tier 2 is this tenant's servers.
      return [{ name: 'echo', userId, arguments: { text: nonce } }]
    case 'write_read':
      return [
        { name: 'write_file', userId, arguments: { path: 'marker.txt', content: `${tenantMarker(userId)}\n`, mode: 'overwrite' } },
        { name: 'read_file', userId, arguments: { path: 'marker.txt' } }
      ]
    case 'bash':
      return [{ name: 'bash', userId, arguments: { action: 'exec', command: `cat marker.txt && echo ${nonce}` } }]
  }
}

/** Every tenant marker found in a text. */
function markersIn (text: string): string[] {
  return [...text.matchAll(/\[tenant:([A-Za-z0-9-]+)\]/g)].map((m) => m[1] as string)
}

type Verdict = 'ok' | 'cross-tenant' | 'wrong'

/** Judges one 200 result of a task's request. */
function judge (task: Task, body: InvokeBody, result: { isError?: unknown, output?: unknown, route?: unknown }): { verdict: Verdict, why?: string } {
  const output = typeof result.output === 'string' ? result.output : ''
  const found = markersIn(output)
  if (found.some((m) => m !== task.tenant)) return { verdict: 'cross-tenant', why: output }
  if (result.isError !== false) return { verdict: 'wrong', why: output }
  const marker = tenantMarker(task.tenant)
  const nonce = `req-${task.id}`
  let expected: { route: string, test: (o: string) => boolean }
  switch (body.name) {
    case 'tenant_marker':
      expected = { route: 'function', test: (o) => o === `${marker} ${nonce}` }
      break
    case 'echo':
    case `user_${task.tenant}_tool_echo`:
      expected = { route: 'user_mcp', test: (o) => o === `${marker}:${nonce}` }
      break
    case 'write_file':
      // Carries no marker: checked by the read_file that follows it.
      expected = { route: 'builtin', test: (o) => (JSON.parse(o) as { bytesWritten?: unknown }).bytesWritten === marker.length + 1 }
      break
    case 'read_file':
      // read_file returns lines: the file's final newline is not part of the content.
      expected = { route: 'builtin', test: (o) => (JSON.parse(o) as { content?: unknown }).content === marker }
      break
    case 'bash':
      // The sandbox sees this tenant's workspace only: its marker file, nobody else's.
      expected = { route: 'builtin', test: (o) => { const r = JSON.parse(o) as { stdout?: unknown, exitCode?: unknown }; return r.exitCode === 0 && r.stdout === `${marker}\n${nonce}\n` } }
      break
    default:
      throw new Error(`no expectation for ${body.name}`)
  }
  if (result.route !== expected.route) return { verdict: 'wrong', why: `route ${String(result.route)}: ${output}` }
  if (found.length === 0 && body.name !== 'write_file') return { verdict: 'wrong', why: `no marker: ${output}` }
  return expected.test(output) ? { verdict: 'ok' } : { verdict: 'wrong', why: output }
}

interface RunStats {
  requests: number
  statuses: Record<string, number>
  byKind: Record<string, number>
  crossTenant: string[]
  wrong: string[]
  ms: number
  /** Milliseconds per request, by tool name (reported, never asserted: the machine is shared). */
  latencies: Record<string, number[]>
}

/** Runs `tasks` over real HTTP with `concurrency` workers; closes its connection pool before returning. */
async function run (url: string, tasks: readonly Task[], concurrency: number): Promise<RunStats> {
  // One connection per worker, so the pool never queues requests behind each other client-side.
  const dispatcher = new Agent({ connections: concurrency, headersTimeout: 60_000, bodyTimeout: 60_000 })
  const stats: RunStats = { requests: 0, statuses: {}, byKind: {}, crossTenant: [], wrong: [], ms: 0, latencies: {} }
  const started = performance.now()
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < tasks.length) {
      const task = tasks[next++] as Task
      for (const body of requestsOf(task)) {
        stats.requests++
        stats.byKind[task.kind] = (stats.byKind[task.kind] ?? 0) + 1
        const where = `#${task.id} ${task.tenant} ${body.name}`
        const sent = performance.now()
        let statusCode: number
        let text: string
        try {
          const res = await request(`${url}/invoke`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify(body),
            dispatcher
          })
          statusCode = res.statusCode
          text = await res.body.text()
        } catch (err) {
          stats.statuses.network = (stats.statuses.network ?? 0) + 1
          stats.wrong.push(`${where}: ${String(err)}`)
          break
        }
        const tool = body.name.startsWith('user_') ? 'user_{u}_tool_echo' : body.name
        ;(stats.latencies[tool] ??= []).push(performance.now() - sent)
        stats.statuses[statusCode] = (stats.statuses[statusCode] ?? 0) + 1
        if (statusCode !== 200) {
          stats.wrong.push(`${where}: HTTP ${statusCode} ${text.slice(0, 300)}`)
          break
        }
        const { verdict, why } = judge(task, body, JSON.parse(text) as Record<string, unknown>)
        if (verdict === 'cross-tenant') stats.crossTenant.push(`${where}: ${(why ?? '').slice(0, 300)}`)
        if (verdict === 'wrong') stats.wrong.push(`${where}: ${(why ?? '').slice(0, 300)}`)
        if (verdict !== 'ok') break
      }
    }
  }
  try {
    await Promise.all(Array.from({ length: concurrency }, worker))
  } finally {
    stats.ms = performance.now() - started
    await dispatcher.close()
  }
  return stats
}

/**
 * The task list: kinds in turn, tenants interleaved so neighbours in flight are confusable
 * pairs, stopped at exactly `requests` HTTP requests.
 */
function plan (requests: number, firstId: number): Task[] {
  const tasks: Task[] = []
  let count = 0
  for (let i = 0; count < requests; i++) {
    let kind = KINDS[i % KINDS.length] as Kind
    if (kind === 'write_read' && requests - count < 2) kind = 'function'
    tasks.push({ id: firstId + i, tenant: TENANTS[(i * 7) % TENANTS.length] as string, kind })
    count += kind === 'write_read' ? 2 : 1
  }
  return tasks
}

/**
 * One task of every kind for every tenant, in two phases: the files first, as `bash` and the
 * load's reads expect every tenant's marker file to exist.
 */
function warmUpPlan (): [Task[], Task[]] {
  const files: Task[] = []
  const rest: Task[] = []
  let id = 0
  for (const kind of KINDS) for (const tenant of TENANTS) (kind === 'write_read' ? files : rest).push({ id: id++, tenant, kind })
  return [files, rest]
}

/**
 * The gateway's V8 heap in use after a full garbage collection, through the inspector protocol
 * (SIGUSR1 opens the gateway's inspector on the loopback port NODE_OPTIONS names). Without
 * forcing the GC, "heap used" mostly says when V8 last chose to collect, not what is reachable.
 */
interface HeapInspector {
  /** Bytes of V8 heap in use right after a full GC. */
  liveHeap: () => Promise<number>
  close: () => void
}

async function heapInspector (gw: GatewayProcess): Promise<HeapInspector> {
  const listening = /Debugger listening on (ws:\/\/127\.0\.0\.1:\d+\/\S+)/
  gw.child.kill('SIGUSR1')
  await waitUntil('the gateway\'s inspector to listen', () => listening.test(gw.logs()))
  const address = listening.exec(gw.logs())?.[1] as string
  const ws = new WebSocket(address)
  await new Promise((resolve, reject) => {
    ws.addEventListener('open', resolve, { once: true })
    ws.addEventListener('error', reject, { once: true })
  })
  const pending = new Map<number, (message: { result?: Record<string, unknown>, error?: unknown }) => void>()
  ws.addEventListener('message', (event) => {
    const message = JSON.parse(String(event.data)) as { id?: number, result?: Record<string, unknown>, error?: unknown }
    if (message.id !== undefined) pending.get(message.id)?.(message)
  })
  let nextId = 0
  const call = async (method: string): Promise<Record<string, unknown>> => await new Promise((resolve, reject) => {
    const id = ++nextId
    pending.set(id, (message) => {
      pending.delete(id)
      if (message.error !== undefined) reject(new Error(`${method}: ${JSON.stringify(message.error)}`))
      else resolve(message.result ?? {})
    })
    ws.send(JSON.stringify({ id, method }))
  })
  return {
    liveHeap: async () => {
      await call('HeapProfiler.collectGarbage')
      return Number((await call('Runtime.getHeapUsage')).usedSize)
    },
    close: () => ws.close()
  }
}

/** The lowest fd count seen over `ms`: keep-alive sockets of the warm-up still closing do not inflate the baseline. */
async function settledFds (pid: number, ms: number): Promise<number> {
  let lowest = Infinity
  for (const until = Date.now() + ms; Date.now() < until; await sleep(250)) lowest = Math.min(lowest, (await openFds(pid)).total)
  return lowest
}

/** `tool p50/p95/max ms` for each tool, for the report. */
function latencySummary (latencies: Record<string, number[]>): string {
  return Object.entries(latencies).map(([tool, ms]) => {
    const sorted = [...ms].sort((a, b) => a - b)
    const at = (q: number): string => (sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? 0).toFixed(0)
    return `${tool} ${at(0.5)}/${at(0.95)}/${at(1)}`
  }).join(', ')
}

const MiB = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(1)} MiB`

test('load: 2,000 mixed invocations at concurrency 64 across 20 tenants give no 5xx and no cross-tenant result, and leave no fd, ' +
  'memory or process behind', { timeout: 170_000 }, async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-load-'))
  const fixtures = new Map<string, HttpFixture>()
  const started: { gw?: GatewayProcess, inspector?: HeapInspector } = {}
  // One clean-up, in order: the gateway (its inspector session detached first, or it waits for
  // it on exit), any sandbox that outlived it, the MCP servers, the workspaces.
  t.after(async () => {
    started.inspector?.close()
    await started.gw?.stop()
    for (const p of await processesMatching(workspaces)) {
      try { process.kill(p.pid, 'SIGKILL') } catch {}
    }
    await Promise.all([...fixtures.values()].map(async (f) => await f.close()))
    await rm(workspaces, { recursive: true, force: true })
  })
  for (const tenant of TENANTS) fixtures.set(tenant, await startStreamableHttpFixture({ marker: tenantMarker(tenant) }))

  const gw = started.gw = await startGateway(t, {
    SANDBOX: 'bwrap',
    WORKSPACES_DIR: workspaces,
    FUNCTIONS_DIR,
    LOAD_EXAMPLES: 'false',
    EGRESS_ALLOW: '127.0.0.1/32',
    // The limits would answer 429 at this rate and concurrency; this test is about what the
    // tools do under load, the limiter has its own tests (test/http/plugins/rate-limit.test.ts).
    RATE_LIMIT_PER_MINUTE: '1000000',
    MAX_CONCURRENT_PER_TENANT: String(CONCURRENCY),
    LOG_LEVEL: 'info',
    // Where the inspector listens once SIGUSR1 opens it (heapInspector): loopback, random port.
    // Not --inspect itself: with it tsx transforms through a long-lived esbuild service child.
    NODE_OPTIONS: '--inspect-port=127.0.0.1:0'
  })
  const pid = gw.child.pid as number
  const inspector = started.inspector = await heapInspector(gw)

  for (const tenant of TENANTS) {
    const res = await fetch(`${gw.url}/users/${tenant}/mcp/servers/${SERVER_ID}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'streamable_http', url: fixtures.get(tenant)?.url })
    })
    assert.equal(res.status, 201, await res.text())
  }

  // Warm-up: pools connected, modules loaded, JIT warm, every workspace and marker file created.
  // 20 tenants x 5 kinds, 120 requests (a write_read is two).
  const warmUp = warmUpPlan()
  let warmRequests = 0
  for (const phase of warmUp) {
    const warm = await run(gw.url, phase, TENANTS.length)
    assert.deepEqual([...warm.crossTenant, ...warm.wrong], [], 'warm-up results')
    assert.deepEqual(warm.statuses, { 200: warm.requests })
    warmRequests += warm.requests
  }

  assert.deepEqual(await descendantsOf(pid), [], 'no child process at the baseline')
  const baseline = {
    fds: await settledFds(pid, 6000),
    fdKinds: (await openFds(pid)).byKind,
    rss: await rssBytes(pid),
    heap: await inspector.liveHeap()
  }

  const tasks = plan(REQUESTS, warmRequests)
  const load = await run(gw.url, tasks, CONCURRENCY)
  const fivexx = Object.entries(load.statuses).filter(([s]) => Number(s) >= 500).reduce((n, [, c]) => n + c, 0)
  t.diagnostic(`load: ${load.requests} requests in ${(load.ms / 1000).toFixed(1)} s (${(load.requests / (load.ms / 1000)).toFixed(0)} req/s) at concurrency ${CONCURRENCY}, ${TENANTS.length} tenants`)
  t.diagnostic(`load: requests by kind ${JSON.stringify(load.byKind)}; statuses ${JSON.stringify(load.statuses)}; 5xx ${fivexx}; 429 ${load.statuses[429] ?? 0}; cross-tenant ${load.crossTenant.length}; other failures ${load.wrong.length}`)
  t.diagnostic(`load: latency p50/p95/max ms by tool: ${latencySummary(load.latencies)}`)
  assert.deepEqual(load.crossTenant, [], 'results carrying another tenant\'s marker')
  assert.equal(fivexx, 0, `5xx answers: ${load.wrong.filter((w) => /HTTP 5\d\d/.test(w)).slice(0, 5).join('\n')}`)
  assert.deepEqual(load.wrong.slice(0, 10), [], `${load.wrong.length} failed or unexpected results`)
  assert.equal(load.requests, REQUESTS)
  assert.deepEqual(load.statuses, { 200: REQUESTS })

  // Every MCP call reached its own tenant's server, through one pooled session per tenant.
  const mcpCalls = new Map<string, number>()
  for (const task of [...warmUp.flat(), ...tasks]) {
    if (task.kind === 'mcp_encoded' || task.kind === 'mcp_raw') mcpCalls.set(task.tenant, (mcpCalls.get(task.tenant) ?? 0) + 1)
  }
  for (const [tenant, fixture] of fixtures) {
    assert.equal(fixture.stats.toolCalls, mcpCalls.get(tenant), `tools/call requests that reached ${tenant}'s server`)
    assert.equal(fixture.stats.sessions, 1, `MCP sessions opened to ${tenant}'s server`)
  }
  const status = await (await fetch(`${gw.url}/status`)).json() as { userClients: number }
  assert.equal(status.userClients, TENANTS.length, 'one pooled client per tenant server')

  // Back to baseline. Each wait is bounded; the assertion after it reports the last value seen.
  let children = await descendantsOf(pid)
  await waitUntil('no child process of the gateway', async () => (children = await descendantsOf(pid)).length === 0).catch(() => {})
  let fds = await openFds(pid)
  await waitUntil('fds back to the baseline', async () => (fds = await openFds(pid)).total <= baseline.fds + FD_SLACK, 30_000).catch(() => {})
  let heap = await inspector.liveHeap()
  await waitUntil('live heap back to the baseline', async () => (heap = await inspector.liveHeap()) <= baseline.heap + HEAP_SLACK_BYTES, 30_000).catch(() => {})
  let rss = await rssBytes(pid)
  await waitUntil('RSS back to the baseline', async () => (rss = await rssBytes(pid)) <= baseline.rss + RSS_SLACK_BYTES, 30_000).catch(() => {})
  const errors = gw.logs().split('\n').filter((line) => /"level":(50|60)/.test(line))
  t.diagnostic(`after: fds ${baseline.fds} -> ${fds.total} (slack ${FD_SLACK}; by kind ${JSON.stringify(baseline.fdKinds)} -> ${JSON.stringify(fds.byKind)}); live heap ${MiB(baseline.heap)} -> ${MiB(heap)} (slack ${MiB(HEAP_SLACK_BYTES)}); RSS ${MiB(baseline.rss)} -> ${MiB(rss)} (slack ${MiB(RSS_SLACK_BYTES)}); children 0 -> ${children.length}; error log lines ${errors.length}`)

  assert.deepEqual(children, [], 'child processes of the gateway left after the load (zombies included)')
  assert.deepEqual(await processesMatching(workspaces), [], 'sandboxes reparented away from the gateway')
  assert.ok(fds.total <= baseline.fds + FD_SLACK, `open fds ${fds.total} > baseline ${baseline.fds} + ${FD_SLACK}: ${JSON.stringify(fds.byKind)}`)
  assert.ok(heap <= baseline.heap + HEAP_SLACK_BYTES, `live heap ${MiB(heap)} > baseline ${MiB(baseline.heap)} + ${MiB(HEAP_SLACK_BYTES)}`)
  assert.ok(rss <= baseline.rss + RSS_SLACK_BYTES, `RSS ${MiB(rss)} > baseline ${MiB(baseline.rss)} + ${MiB(RSS_SLACK_BYTES)}`)
  assert.deepEqual(errors.slice(0, 5), [], 'errors logged by the gateway')

  // A process with an inspector session attached waits for it to detach before exiting.
  inspector.close()
  assert.equal(await gw.stop(), 0, 'the gateway exits cleanly after the load')
})
