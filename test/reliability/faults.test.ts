/**
 * Faults not covered elsewhere: a tenant's workspace on a full disk, sandboxed
 * commands that ignore SIGTERM, and Redis killed and restarted while the gateway is under load.
 * (MCP servers that hang, die mid-call, exit at start or restart with a new session are in
 * test/integration/remote-mcp/faults.test.ts and test/unit/remote-mcp/pool.test.ts; a Redis outage on an idle gateway is in
 * test/integration/remote-mcp/redis-outage.test.ts.)
 *
 * Each test asserts outcomes, never durations: clear errors while broken, full recovery after,
 * nothing lost, nothing left running.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { randomInt } from 'node:crypto'
import { mkdir, mkdtemp, readdir, readFile, rm, statfs } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildTestApp } from '../helpers/app.js'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import { processesMatching, waitUntil } from '../../scripts/lib/proc.js'
import { freePort, killRedisServer, requireRedisServer, startRedisServer } from '../helpers/redis-server.js'
import { startStreamableHttpFixture, stdioFixture } from '../../scripts/lib/mcp-fixtures/index.js'
import type { HttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'

interface InvokeResult {
  isError: boolean
  output: string
  error: { code: string, message: string } | null
}

async function invoke (app: FastifyInstance, userId: string, name: string, args: Record<string, unknown>): Promise<InvokeResult> {
  const res = await app.inject({ method: 'POST', url: '/invoke', payload: { name, userId, arguments: args } })
  assert.equal(res.statusCode, 200, `${name}: ${res.body}`)
  return res.json()
}

interface ExecResult { stdout: string, stderr: string, exitCode: number, timedOut: boolean }
interface ProcessSnapshot { processId: string, status: string, exitCode: number | null }

/** A successful bash call's result object (the tool's own fields, parsed from the output). */
async function bash<T = ExecResult> (app: FastifyInstance, userId: string, args: Record<string, unknown>): Promise<T> {
  const r = await invoke(app, userId, 'bash', args)
  assert.equal(r.isError, false, r.output)
  return JSON.parse(r.output) as T
}

// ---------------------------------------------------------------------------------------------
// Disk full
// ---------------------------------------------------------------------------------------------

/** Every entry under `dir`, relative, sorted: temp files and directories included. */
async function tree (dir: string): Promise<string[]> {
  return (await readdir(dir, { recursive: true })).map(String).sort()
}

/** Free blocks of the filesystem holding `dir` (tmpfs: pages; every small file takes one). */
async function freeBlocks (dir: string): Promise<number> {
  return (await statfs(dir)).bavail
}

/**
 * Mounts a `sizeBytes` tmpfs on `dir`. Returns false, skipping the test, where mounting is not
 * possible (not root, no CAP_SYS_ADMIN; a loop device would need the same); under CI=true that
 * fails the test instead.
 */
function mountTmpfs (t: TestContext, dir: string, sizeBytes: number): boolean {
  // 0711: the sandbox uid must traverse the mount point to reach the workspace below it.
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeBytes},mode=0711`, 'tmpfs', dir], { encoding: 'utf8' })
  if (r.status === 0) return true
  const why = `cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): ${(r.stderr ?? r.error?.message ?? '').trim()}`
  if (process.env.CI === 'true') throw new Error(`${why}; required under CI=true`)
  t.skip(why)
  return false
}

/** Unmounts `dir` if something is mounted there, lazily when it is still busy. */
function unmount (dir: string): void {
  if (spawnSync('mountpoint', ['-q', dir]).status !== 0) return
  if (spawnSync('umount', [dir]).status !== 0) spawnSync('umount', ['-l', dir])
}

const NO_SPACE = /no space left/i
const ORIGINAL = 'line one\nline two\n'
const PATCH_ADD_THEN_UPDATE = '*** Begin Patch\n*** Add File: added.txt\n+added\n*** Update File: a.txt\n@@\n line one\n-line two\n+line 2\n*** End Patch\n'
const PATCH_UPDATE_THEN_ADD = '*** Begin Patch\n*** Update File: a.txt\n@@\n line one\n-line two\n+line 2\n*** Add File: added.txt\n+added\n*** End Patch\n'

test('disk full in a workspace: every writing tool fails clearly and changes nothing, a half-written patch is rolled back, freeing space recovers, ' +
  'a tenant on another filesystem is unaffected', { timeout: 120_000 }, async (t) => {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-diskfull-'))
  const app = await buildTestApp(t, { env: { SANDBOX: 'bwrap', WORKSPACES_DIR: workspaces } })
  // Tenant `full` lives on a 2 MiB tmpfs; tenant `healthy` on the disk under it. Hooks run in
  // the order they were added: the app closes before the unmount and the removal.
  const fullDir = join(workspaces, 'full')
  await mkdir(fullDir)
  t.after(async () => {
    unmount(fullDir)
    await rm(workspaces, { recursive: true, force: true })
  })
  if (!mountTmpfs(t, fullDir, 2 * 1024 * 1024)) return
  const ws = join(fullDir, 'default')

  for (const path of ['existing.txt', 'a.txt']) {
    const w = await invoke(app, 'full', 'write_file', { path, content: ORIGINAL })
    assert.equal(w.isError, false, w.output)
  }
  // One page, freed later to leave room for exactly one small file.
  assert.equal((await invoke(app, 'full', 'write_file', { path: 'spacer.txt', content: 'x' })).isError, false)

  // Fill it through the API: the sandboxed command's own failure is the first clear error.
  const fill = await bash(app, 'full', { action: 'exec', command: 'dd if=/dev/zero of=filler bs=64k' })
  assert.notEqual(fill.exitCode, 0)
  assert.equal(fill.timedOut, false)
  assert.match(fill.stderr, NO_SPACE)
  assert.equal(await freeBlocks(ws), 0, 'the workspace filesystem is full')
  const before = ['a.txt', 'existing.txt', 'filler', 'spacer.txt']
  assert.deepEqual(await tree(ws), before)

  const unchanged = async (what: string): Promise<void> => {
    assert.equal(await readFile(join(ws, 'existing.txt'), 'utf8'), ORIGINAL, `${what}: existing.txt keeps its bytes`)
    assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), ORIGINAL, `${what}: a.txt keeps its bytes`)
    // No new file, no temp file, no directory left behind.
    assert.deepEqual(await tree(ws), before, what)
  }
  const refused: Array<[string, string, Record<string, unknown>]> = [
    ['write_file (new file)', 'write_file', { path: 'new.txt', content: 'hello\n' }],
    ['write_file (new file in a new folder)', 'write_file', { path: 'sub/new.txt', content: 'hello\n' }],
    ['write_file (overwrite)', 'write_file', { path: 'existing.txt', content: 'line one\nline two\nline three\n' }],
    ['write_file (append)', 'write_file', { path: 'existing.txt', content: 'more\n', mode: 'append' }],
    ['edit', 'edit', { path: 'existing.txt', old_string: 'line two', new_string: 'line 2' }],
    ['apply_patch (add, then update)', 'apply_patch', { patch: PATCH_ADD_THEN_UPDATE }],
    ['apply_patch (update, then add)', 'apply_patch', { patch: PATCH_UPDATE_THEN_ADD }],
    ['update_agents_md', 'update_agents_md', { action: 'write', content: '# rules\n' }]
  ]
  for (const [what, name, args] of refused) {
    const r = await invoke(app, 'full', name, args)
    assert.equal(r.isError, true, `${what}: ${r.output}`)
    assert.match(r.error?.message ?? '', NO_SPACE, what)
    assert.match(r.output, /^TOOL_ERROR: /, what)
    assert.ok(!r.output.includes(workspaces), `${what}: no host path in ${r.output}`)
    if (name === 'apply_patch') assert.match(r.error?.message ?? '', /every change already written was rolled back/, what)
    await unchanged(what)
  }
  // Reading still works on a full disk.
  const read = await invoke(app, 'full', 'read_file', { path: 'existing.txt' })
  assert.equal(read.isError, false, read.output)
  assert.equal(JSON.parse(read.output).content, ORIGINAL.trimEnd())
  assert.equal(JSON.parse((await invoke(app, 'full', 'grep', { pattern: 'line two' })).output).totalMatches, 2)

  // A sandboxed command writing: it fails with the kernel's message, and returns.
  const yes = await bash(app, 'full', { action: 'exec', command: 'yes > out.txt' })
  assert.notEqual(yes.exitCode, 0)
  assert.equal(yes.timedOut, false)
  assert.match(yes.stderr, NO_SPACE)
  // (the shell created out.txt before the first write failed: the command's own doing)
  assert.equal((await bash(app, 'full', { action: 'exec', command: 'rm out.txt' })).exitCode, 0)
  await unchanged('bash exec')

  // Meanwhile a tenant whose workspace is on another filesystem works normally.
  assert.equal((await invoke(app, 'healthy', 'write_file', { path: 'notes.md', content: ORIGINAL })).isError, false)
  assert.equal((await invoke(app, 'healthy', 'edit', { path: 'notes.md', old_string: 'line two', new_string: 'line 2' })).isError, false)
  assert.equal((await invoke(app, 'healthy', 'apply_patch', { patch: '*** Begin Patch\n*** Add File: b.txt\n+b\n*** End Patch\n' })).isError, false)
  const big = await bash(app, 'healthy', { action: 'exec', command: 'head -c 3000000 /dev/zero > big && wc -c < big' })
  assert.equal(big.exitCode, 0, big.stderr)
  assert.equal(big.stdout.trim(), '3000000')
  assert.equal(await readFile(join(workspaces, 'healthy', 'default', 'notes.md'), 'utf8'), 'line one\nline 2\n')
  assert.equal(await freeBlocks(ws), 0, 'still full')

  // Room for one small file only: the patch's first write lands, the second fails, and the first
  // is undone. The rollback must not need free space for a file the failed write never reached.
  assert.equal((await bash(app, 'full', { action: 'exec', command: 'rm spacer.txt' })).exitCode, 0)
  assert.equal(await freeBlocks(ws), 1)
  before.splice(before.indexOf('spacer.txt'), 1)
  const half = await invoke(app, 'full', 'apply_patch', { patch: PATCH_ADD_THEN_UPDATE })
  assert.equal(half.isError, true, half.output)
  assert.match(half.error?.message ?? '', /^Failed to apply patch: No space left for: a\.txt; every change already written was rolled back$/)
  await unchanged('apply_patch with room for one file')
  assert.equal(await freeBlocks(ws), 1, 'the added file was removed again')

  // Space freed: the same calls succeed.
  assert.equal((await bash(app, 'full', { action: 'exec', command: 'rm filler' })).exitCode, 0)
  assert.ok(await freeBlocks(ws) > 100)
  for (const [what, name, args] of refused) {
    if (name === 'apply_patch') continue
    const r = await invoke(app, 'full', name, args)
    assert.equal(r.isError, false, `${what} after freeing space: ${r.output}`)
  }
  const patched = await invoke(app, 'full', 'apply_patch', { patch: PATCH_ADD_THEN_UPDATE })
  assert.equal(patched.isError, false, patched.output)
  const wrote = await bash(app, 'full', { action: 'exec', command: 'yes | head -c 1000000 > out.txt && wc -c < out.txt' })
  assert.equal(wrote.exitCode, 0, wrote.stderr)
  assert.equal(wrote.stdout.trim(), '1000000')
  // overwritten, appended to, then edited
  assert.equal(await readFile(join(ws, 'existing.txt'), 'utf8'), 'line one\nline 2\nline three\nmore\n')
  assert.equal(await readFile(join(ws, 'a.txt'), 'utf8'), 'line one\nline 2\n')
  assert.equal(await readFile(join(ws, 'added.txt'), 'utf8'), 'added\n')
  assert.equal(await readFile(join(ws, 'sub', 'new.txt'), 'utf8'), 'hello\n')
  assert.deepEqual(await tree(ws), ['AGENTS.md', 'a.txt', 'added.txt', 'existing.txt', 'new.txt', 'out.txt', 'sub', 'sub/new.txt'])
})

// ---------------------------------------------------------------------------------------------
// Commands that ignore SIGTERM
// ---------------------------------------------------------------------------------------------

/**
 * A unique number for one command: `sleep 1.{m}` and `sleep 300{m}` are valid sleeps whose
 * command lines carry it, so processesMatching(m) sees every shell and every sleep of it.
 */
function marker (): string {
  return String(randomInt(100_000_000, 999_999_999))
}

/** SIGTERM-proof command shapes; `m` is the marker. */
const STUBBORN: ReadonlyArray<{ what: string, command: (m: string) => string }> = [
  { what: 'a shell that ignores TERM', command: (m) => `trap '' TERM; while :; do sleep 1.${m}; done` },
  { what: 'a child that ignores TERM too', command: (m) => `trap '' TERM; sh -c "trap '' TERM; while :; do sleep 1.${m}; done"; echo unreachable` },
  { what: 'a background grandchild that ignores TERM', command: (m) => `( trap '' TERM; sleep 300${m} ) & trap '' TERM; while :; do sleep 1.${m}; done` }
]
const WITH_GRANDCHILD = STUBBORN[2] as typeof STUBBORN[number]

/** Waits until a sleep carrying `m` runs: the marker is seen, so "none left" later is not vacuous. */
async function running (m: string, what: string): Promise<void> {
  await waitUntil(`"${what}" to run`, async () => (await processesMatching(m)).some((p) => p.cmdline.startsWith('sleep')), 10_000)
}

async function noneLeft (m: string, what: string): Promise<void> {
  await waitUntil(`no process of "${what}" left`, async () => (await processesMatching(m)).length === 0, 10_000)
}

test('bash exec of commands that ignore SIGTERM: the call returns timed out and nothing is left running', { timeout: 120_000 }, async (t) => {
  const app = await buildTestApp(t, { env: { SANDBOX: 'bwrap' } })
  for (const { what, command } of STUBBORN) {
    const m = marker()
    const call = bash(app, 'stubborn', { action: 'exec', command: command(m), timeoutMs: 3000 })
    await running(m, what)
    const r = await call
    assert.equal(r.timedOut, true, what)
    assert.equal(r.exitCode, -1, what)
    assert.match(r.stderr, /timed out after 3000 ms and was killed/, what)
    await noneLeft(m, what)
  }

  // Returning early with a TERM-proof grandchild in the background: the call ends normally and
  // the grandchild goes with the sandbox.
  const m = marker()
  const r = await bash(app, 'stubborn', { action: 'exec', command: `( trap '' TERM; sleep 300${m} ) & echo started` })
  assert.equal(r.exitCode, 0)
  assert.equal(r.timedOut, false)
  assert.equal(r.stdout, 'started\n')
  await noneLeft(m, 'an early exit with a grandchild')
})

test('bash start/stop of commands that ignore SIGTERM: STOPPED, killed after the grace, nothing left', { timeout: 120_000 }, async (t) => {
  const app = await buildTestApp(t, { env: { SANDBOX: 'bwrap' } })
  for (const { what, command } of STUBBORN) {
    const m = marker()
    const started = await bash<ProcessSnapshot>(app, 'stubborn', { action: 'start', command: command(m) })
    assert.equal(started.status, 'RUNNING', what)
    await running(m, what)
    const stopped = await bash<ProcessSnapshot>(app, 'stubborn', { action: 'stop', processId: started.processId })
    assert.equal(stopped.status, 'STOPPED', what)
    // SIGKILL'd (137): the TERM really was ignored, so the grace ran out.
    assert.equal(stopped.exitCode, 137, what)
    await noneLeft(m, what)
  }
})

test('closing the gateway with TERM-proof commands running (background and in-flight exec) leaves nothing', { timeout: 120_000 }, async (t) => {
  const app = await buildTestApp(t, { env: { SANDBOX: 'bwrap' } })
  const markers: string[] = []
  for (const { what, command } of STUBBORN) {
    const m = marker()
    markers.push(m)
    const s = await bash<ProcessSnapshot>(app, 'stubborn', { action: 'start', command: command(m) })
    assert.equal(s.status, 'RUNNING')
    await running(m, what)
  }
  const inFlightMarker = marker()
  const inFlight = app.inject({
    method: 'POST',
    url: '/invoke',
    payload: { name: 'bash', userId: 'stubborn', arguments: { action: 'exec', command: WITH_GRANDCHILD.command(inFlightMarker), timeoutMs: 600_000 } }
  })
  await running(inFlightMarker, 'the in-flight exec')
  await app.close()
  // The in-flight call was ended by the shutdown (it never ends by itself), not left hanging, and
  // says so instead of reporting an exit code the command never returned.
  const res = await inFlight
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(res.json().isError, true, res.body)
  assert.match(res.json().error.message, /shutting down/, res.body)
  for (const m of [...markers, inFlightMarker]) assert.deepEqual(await processesMatching(m), [], `process of ${m} left after close`)
})

// ---------------------------------------------------------------------------------------------
// Redis killed and restarted under load
// ---------------------------------------------------------------------------------------------

type Phase = 'before' | 'down' | 'after'
type OpKind = 'tenant-tool' | 'function' | 'global-stdio-tool' | 'listing' | 'registry-write' | 'registry-read'

interface Outcome { kind: OpKind, phase: Phase, status: number | 'error', ok: boolean, detail: string }

test('Redis killed -9 and restarted during load: ' +
  'no 500, known tools keep working, registry 503 while down, nothing acknowledged is lost, no orphan', { timeout: 180_000 }, async (t) => {
  if (!requireRedisServer(t)) return
  const dir = await mkdtemp(join(tmpdir(), 'tg-faults-redis-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const port = await freePort()
  let redis = await startRedisServer(t, port, dir)

  const tenants = ['t1', 't2', 't3', 't4']
  const fixtures: HttpFixture[] = []
  for (const u of tenants) {
    const f = await startStreamableHttpFixture({ marker: `F-${u}` })
    t.after(async () => await f.close())
    fixtures.push(f)
  }
  const spare = await startStreamableHttpFixture({ marker: 'spare' })
  t.after(async () => await spare.close())
  const stdioMarker = `S${marker()}`

  const gw = await startGateway(t, {
    REDIS_URL: `redis://127.0.0.1:${port}`,
    REDIS_KEY_PREFIX: 'tg-faults:',
    EGRESS_ALLOW: '127.0.0.1/32',
    SANDBOX: 'none',
    RATE_LIMIT_PER_MINUTE: '1000000',
    MCP_CONNECT_TIMEOUT_MS: '15000',
    MCP_LIST_TIMEOUT_MS: '15000',
    MCP_CALL_TIMEOUT_MS: '15000'
  })
  const request = async (method: string, path: string, body?: unknown): Promise<{ status: number, json: any }> => {
    const res = await fetch(`${gw.url}${path}`, {
      method,
      ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
      signal: AbortSignal.timeout(30_000)
    })
    const text = await res.text()
    let json: unknown
    try { json = JSON.parse(text) } catch { json = text }
    return { status: res.status, json }
  }

  // Registered and warmed before the load: these are the "already known" tools.
  for (const [i, u] of tenants.entries()) {
    const put = await request('PUT', `/users/${u}/mcp/servers/srv`, { type: 'http', url: fixtures[i]?.url })
    assert.equal(put.status, 201, JSON.stringify(put.json))
  }
  const cli = await request('PUT', '/mcp/servers/cli', { type: 'stdio', ...stdioFixture('stdio-server.ts', [stdioMarker]) })
  assert.equal(cli.status, 201, JSON.stringify(cli.json))

  let phase: Phase = 'before'
  const stopLoad = new AbortController()
  const outcomes: Outcome[] = []
  /** serverIds acknowledged (2xx) per writer tenant. */
  const acked = new Map<string, Set<string>>()
  let seq = 0

  const op = async (kind: OpKind, worker: number, n: number): Promise<Omit<Outcome, 'phase'>> => {
    const u = tenants[n % tenants.length] as string
    const text = `w${worker}-${n}`
    try {
      switch (kind) {
        case 'tenant-tool': {
          const r = await request('POST', '/invoke', { name: `user_${u}_tool_echo`, userId: u, arguments: { text } })
          return { kind, status: r.status, ok: r.status === 200 && r.json.isError === false && r.json.output === `F-${u}:${text}`, detail: JSON.stringify(r.json) }
        }
        case 'function': {
          const r = await request('POST', '/invoke', { name: 'calculate', arguments: { expression: `${n} + 1` } })
          return {
            kind,
            status: r.status,
            ok: r.status === 200 && r.json.isError === false && r.json.output.includes(String(n + 1)),
            detail: JSON.stringify(r.json)
          }
        }
        case 'global-stdio-tool': {
          const r = await request('POST', '/invoke', { name: 'cli__echo', arguments: { text } })
          return { kind, status: r.status, ok: r.status === 200 && r.json.isError === false && r.json.output === `${stdioMarker}:${text}`, detail: JSON.stringify(r.json) }
        }
        case 'listing': {
          const r = await request('GET', `/tools?format=mcp&functions=calculate&mcp=srv,cli&userId=${u}`)
          const names: string[] = r.status === 200 ? r.json.tools.map((x: any) => x.name) : []
          const ok = r.status === 200 && names.includes('calculate') && names.includes(`user_${u}_tool_echo`) && (names.includes('echo') || names.includes('cli__echo'))
          return { kind, status: r.status, ok, detail: JSON.stringify(r.status === 200 ? { names, unavailable: r.json.unavailable } : r.json) }
        }
        case 'registry-write': {
          const writer = `wr${n % 3}`
          const serverId = `s${++seq}`
          const r = await request('PUT', `/users/${writer}/mcp/servers/${serverId}`, { type: 'http', url: spare.url })
          if (r.status === 201) {
            const set = acked.get(writer) ?? new Set<string>()
            set.add(serverId)
            acked.set(writer, set)
          }
          return {
            kind,
            status: r.status,
            ok: r.status === 201 || (r.status === 503 && r.json.code === 'GW_REGISTRY_UNAVAILABLE'),
            detail: JSON.stringify(r.json)
          }
        }
        case 'registry-read': {
          const r = await request('GET', `/users/${u}/mcp/servers`)
          const ok = (r.status === 200 && r.json.servers.some((s: any) => s.serverId === 'srv')) ||
            (r.status === 503 && r.json.code === 'GW_REGISTRY_UNAVAILABLE')
          return { kind, status: r.status, ok, detail: JSON.stringify(r.json) }
        }
      }
    } catch (err) {
      return { kind, status: 'error', ok: false, detail: String(err) }
    }
  }

  const kinds: OpKind[] = ['tenant-tool', 'function', 'listing', 'tenant-tool', 'global-stdio-tool', 'registry-write', 'registry-read']
  // Warm every known tool once (the directory and the pool learn them).
  for (const [n] of tenants.entries()) {
    for (const kind of ['tenant-tool', 'listing', 'global-stdio-tool'] as const) {
      const o = await op(kind, 0, n)
      assert.ok(o.ok, `warm-up ${kind}: ${o.detail}`)
    }
  }

  const worker = async (w: number): Promise<void> => {
    for (let n = w; !stopLoad.signal.aborted; n += 8) {
      const startedIn = phase
      const o = await op(kinds[n % kinds.length] as OpKind, w, n)
      // A call that overlapped the outage in any way counts as made during it.
      outcomes.push({ ...o, phase: startedIn === 'before' && phase === 'before' ? 'before' : startedIn === 'after' ? 'after' : 'down' })
    }
  }
  const count = (p: Phase, pred: (o: Outcome) => boolean = () => true): number => outcomes.filter((o) => o.phase === p && pred(o)).length
  const workers = Array.from({ length: 8 }, async (_, w) => await worker(w))
  try {
    await waitUntil('load before the outage', () => count('before') >= 150, 60_000)
    await killRedisServer(redis)
    phase = 'down'
    // Keep the load on until the outage is visible to registry writes and many calls went through it.
    await waitUntil('load during the outage', () => count('down') >= 200 && count('down', (o) => o.kind === 'registry-write' && o.status === 503) >= 5, 60_000)
    redis = await startRedisServer(t, port, dir)
    phase = 'after'
    await waitUntil(
      'registry writes accepted again',
      () => count('after', (o) => o.kind === 'registry-write' && o.status === 201) >= 10 && count('after') >= 200,
      60_000
    )
  } finally {
    stopLoad.abort()
    await Promise.all(workers)
  }

  const bad = outcomes.filter((o) => !o.ok)
  const summary = (['before', 'down', 'after'] as const).map((p) => `${p}: ${count(p)} ops, ${count(p, (o) => o.status === 503)} x 503`).join('; ')
  t.diagnostic(summary)
  assert.deepEqual(bad.slice(0, 10), [], `${bad.length} unexpected outcomes (${summary})`)
  assert.equal(outcomes.filter((o) => o.status === 500).length, 0)
  // While Redis was up, the registry answered; while down, writes got 503 and tools kept working.
  assert.equal(count('before', (o) => o.status !== 200 && o.status !== 201), 0)
  assert.ok(count('before', (o) => o.kind === 'registry-write' && o.status === 201) > 0)
  for (const kind of ['registry-write', 'registry-read'] as const) {
    assert.ok(count('down', (o) => o.kind === kind && o.status === 503) > 0, `${kind} got 503 during the outage`)
  }
  for (const kind of ['tenant-tool', 'function', 'global-stdio-tool', 'listing'] as const) {
    assert.ok(count('down', (o) => o.kind === kind && o.ok) > 0, `${kind} ran during the outage`)
  }

  // Recovered: a new tenant's server registers and answers.
  const fresh = await request('PUT', '/users/fresh/mcp/servers/new', { type: 'http', url: spare.url })
  assert.equal(fresh.status, 201, JSON.stringify(fresh.json))
  const call = await request('POST', '/invoke', { name: 'user_fresh_tool_echo', userId: 'fresh', arguments: { text: 'hi' } })
  assert.equal(call.status, 200, JSON.stringify(call.json))
  assert.equal(call.json.output, 'spare:hi')
  assert.equal((await request('GET', '/readyz')).status, 200)

  // Nothing acknowledged was lost.
  let total = 0
  for (const [writer, ids] of acked) {
    const listed = await request('GET', `/users/${writer}/mcp/servers`)
    assert.equal(listed.status, 200, JSON.stringify(listed.json))
    const present = new Set(listed.json.servers.map((s: any) => s.serverId))
    const missing = [...ids].filter((id) => !present.has(id))
    assert.deepEqual(missing, [], `${writer}: acknowledged but missing`)
    total += ids.size
  }
  assert.ok(total > 0)
  for (const u of tenants) {
    const listed = await request('GET', `/users/${u}/mcp/servers`)
    assert.deepEqual(listed.json.servers.map((s: any) => s.serverId), ['srv'])
  }
  assert.deepEqual((await request('GET', '/mcp/servers')).json.servers.map((s: any) => s.serverId), ['cli'])

  // No orphan: clients dropped on the resync closed their stdio child; at most the live one runs.
  await waitUntil('at most one stdio server', async () => (await processesMatching(stdioMarker)).length <= 1, 10_000)
  assert.equal(await gw.stop(), 0, gw.logs().slice(-3000))
  await waitUntil('no stdio server after the gateway exits', async () => (await processesMatching(stdioMarker)).length === 0, 10_000)
  await killRedisServer(redis)
})
