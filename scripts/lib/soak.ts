/**
 * Soak driver: runs the real gateway process (bubblewrap sandbox, API keys, loopback
 * only) and, until the duration ends, registers and removes MCP servers, starts and stops
 * background processes and invokes tools in a loop, while sampling the gateway's RSS, open file
 * descriptors and descendant processes from /proc, and its heap after a forced GC (GC_PROBE).
 *
 * Not a test file, and outside test/ because scripts never import tests: `test/reliability/soak.test.ts`
 * runs a short soak under `npm test`, `scripts/soak.ts` a long one (`npm run soak -- 10m`). Both
 * judge the samples with {@link judgeFlatness}.
 *
 * Each iteration, in order (every step checks its results and cleans up after itself):
 * 1. an MCP server, rotating over three kinds: a tenant streamable-HTTP server, a tenant SSE server
 *    (both loopback fixtures started for the step, on a new port each time, reachable for the
 *    tenant through EGRESS_ALLOW), a global stdio server (the SDK fixture, registered with the
 *    admin key after the tenant key was refused: tenants may not run commands on the gateway host).
 *    Registered, listed, two tools invoked, removed, and the tool checked to be gone;
 * 2. background processes with `bash` in the tenant's workspace: one that prints lines (read with
 *    `logs`, then `stop`), or one that echoes its stdin (`write`, `logs`, `stop`), plus one that
 *    exits by itself (`status` until EXITED, `logs`);
 * 3. file built-ins (`write_file`, `edit`, `read_file`, `glob`, `grep`) and `bash exec`;
 * 4. a batch of function and local-MCP tools with one unknown name.
 * Samples are taken at the end of an iteration, after every stop and removal answered: the
 * quiescent point of the loop, where nothing the soak asked for should still be alive.
 */
import { randomBytes } from 'node:crypto'
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { setTimeout as sleep } from 'node:timers/promises'
import { startSseFixture, startStreamableHttpFixture, stdioFixture } from './mcp-fixtures/index.js'
import type { HttpFixture } from './mcp-fixtures/index.js'
import { startGateway } from './gateway-process.js'
import type { CleanupScope, GatewayProcess } from './gateway-process.js'
import { descendantsOf, openFds, processesMatching, rssBytes, waitUntil } from './proc.js'
import type { ProcInfo } from './proc.js'

/** One measurement of the gateway process, taken at the quiescent point of an iteration. */
export interface SoakSample {
  /** Milliseconds since the loop started. */
  atMs: number
  /** Iterations completed when the sample was taken. */
  iteration: number
  /** HTTP requests made so far. */
  calls: number
  rssBytes: number
  /** V8 heap in use right after a full GC (the GC probe, see GC_PROBE); -1 if the probe did not answer. */
  heapUsedBytes: number
  /** Memory of Buffers and other ArrayBuffers after that GC (part of RSS, outside the heap). */
  arrayBuffersBytes: number
  /** Open file descriptors of the gateway. */
  fds: number
  /** The same by kind (socket, pipe, anon_inode, file). */
  fdsByKind: Record<string, number>
  /** Live or zombie descendants of the gateway (sandboxes, stdio servers). */
  children: number
  /** `GET /status` totalClients: pooled remote MCP clients. */
  poolClients: number
}

/** A call whose status or result was not the expected one. */
export interface SoakFailure {
  iteration: number
  step: string
  /** HTTP status, or `network` when the request itself failed. */
  status: number | 'network' | 'check'
  detail: string
}

export interface SoakOptions {
  /** How long the loop runs; the iteration under way when it ends is finished. */
  durationMs: number
  /**
   * Keep going past `durationMs` until this many iterations ran (default 0), but never past
   * `maxDurationMs` (default 4 x durationMs): on a loaded machine an iteration can take seconds, and
   * the judgement needs enough samples.
   */
  minIterations?: number
  maxDurationMs?: number
  /** Where to register the safety-net clean-up (a node:test context, or the script's own scope). */
  scope: CleanupScope
  /** Called with each sample as it is taken. */
  onSample?: (sample: SoakSample) => void
  /** Least time between two samples; 0 (default) samples after every iteration. */
  sampleEveryMs?: number
  /** Extra environment for the gateway. */
  env?: Record<string, string>
}

export interface SoakResult {
  /** Time spent in the loop. */
  durationMs: number
  iterations: number
  /** HTTP requests made to the gateway (samples' GET /status included). */
  calls: number
  /** Requests by HTTP status (`network` for requests that got no response). */
  statusCounts: Record<string, number>
  /** Requests answered 5xx. */
  serverErrors: number
  /** Every failed check (the first 100 are kept in `failures`). */
  failureCount: number
  failures: SoakFailure[]
  /** What the loop exercised, by kind (`mcp-streamable_http`, `bg-stdin`, ...): steps that passed. */
  exercised: Record<string, number>
  /** Time spent in each kind of step, passed or not (where an iteration's time goes). */
  stepMs: Record<string, number>
  samples: SoakSample[]
  /** Descendants of the gateway once the loop ended and settled (should be 0: nothing is registered or running). */
  childrenAtEnd: number
  /** Exit code of the gateway after SIGTERM. */
  exitCode: number | null
  /** Processes of the soak (by workspace path or stdio marker) still alive after the gateway exited; killed afterwards. */
  leftovers: string[]
  /** Gateway log lines at level warn or above, and Node warnings, with up to 5 examples. */
  warnings: { count: number, examples: string[] }
}

const TENANT = 'soak'
/**
 * Server ids are reused from a pool of this many per kind: per-key bounded caches (listings: 1000
 * entries) then reach their steady state during warm-up instead of filling for the whole run, so
 * what still grows afterwards is a leak per registration, not a cache being filled.
 */
const SERVER_ID_POOL = 8
/**
 * Loaded into the gateway with `--expose-gc --import`: on SIGWINCH it runs a full GC and writes the
 * heap figures on stderr. RSS alone cannot tell a leak of a few KiB per call from V8 postponing a
 * major GC (it grows by 10-30 MiB/min for minutes, then gives it back); the heap after a forced GC
 * can. Nothing else changes in the process, and the env var keeps the probe out of any child.
 * SIGWINCH because its default action is to do nothing and the gateway does not handle it
 * (close-with-grace shuts down on SIGUSR2, and SIGUSR1 starts Node's inspector).
 */
const GC_PROBE = `if (typeof globalThis.gc === 'function' && process.env.SOAK_GC_PROBE === '1') {
  process.on('SIGWINCH', () => {
    globalThis.gc()
    const m = process.memoryUsage()
    process.stderr.write('soak-gc ' + m.heapUsed + ' ' + m.arrayBuffers + '\\n')
  })
}
`
const MAX_KEPT_FAILURES = 100
/** Samples wait this long (at most) for dying children to be reaped; see takeSample. */
const SETTLE_MS = 3000

class CheckFailed extends Error {
  constructor (readonly status: SoakFailure['status'], message: string) {
    super(message)
  }
}

interface Reply {
  status: number | 'network'
  json: any
  text: string
}

/** Runs the soak; resolves after the gateway was stopped and everything was cleaned up. */
export async function runSoak (opts: SoakOptions): Promise<SoakResult> {
  const adminKey = `soak-admin-${randomBytes(16).toString('hex')}`
  const tenantKey = `soak-tenant-${randomBytes(16).toString('hex')}`
  const stdioMarker = `soak-stdio-${randomBytes(6).toString('hex')}`
  const statusCounts: Record<string, number> = {}
  const exercised: Record<string, number> = {}
  const stepMs: Record<string, number> = {}
  const failures: SoakFailure[] = []
  const samples: SoakSample[] = []
  let failureCount = 0
  let calls = 0
  let iteration = 0

  // Workspaces must be traversable by the sandbox uid (65534 when the gateway runs as root).
  const base = await mkdtemp(join(tmpdir(), 'tg-soak-'))
  await chmod(base, 0o755)
  const workspaces = join(base, 'workspaces')
  const fixtures = new Set<HttpFixture>()
  let gw: GatewayProcess | undefined
  const cleanUp = async (): Promise<void> => {
    if (gw !== undefined) await gw.stop(5000)
    await Promise.all([...fixtures].map(async (f) => await f.close()))
    await rm(base, { recursive: true, force: true })
  }
  opts.scope.after(cleanUp)

  try {
    await mkdir(workspaces, { mode: 0o755 })
    const probe = join(base, 'gc-probe.mjs')
    await writeFile(probe, GC_PROBE)
    gw = await startGateway(opts.scope, {
      NODE_OPTIONS: [process.env.NODE_OPTIONS, '--expose-gc', `--import=${pathToFileURL(probe).href}`].filter(Boolean).join(' '),
      SOAK_GC_PROBE: '1',
      SANDBOX: 'bwrap',
      HOST: '127.0.0.1',
      WORKSPACES_DIR: workspaces,
      API_KEYS: `${adminKey}:*,${tenantKey}:${TENANT}`,
      EGRESS_ALLOW: '127.0.0.1/32',
      // The soak makes thousands of requests a minute as one tenant: the limit is not under test.
      RATE_LIMIT_PER_MINUTE: '10000000',
      // The stdio fixture is a Node process: on a loaded machine it takes more than the default 5 s
      // listing deadline to start. Deadlines have their own tests; here they would only add noise.
      MCP_CONNECT_TIMEOUT_MS: '60000',
      MCP_LIST_TIMEOUT_MS: '60000',
      LOG_LEVEL: 'info',
      ...opts.env
    })
    const gateway = gw
    const pid = gateway.child.pid as number
    const logs = boundedLogs(gateway)

    const fail = (step: string, status: SoakFailure['status'], detail: string): void => {
      failureCount++
      if (failures.length < MAX_KEPT_FAILURES) failures.push({ iteration, step, status, detail: detail.slice(0, 500) })
    }

    const request = async (method: string, path: string, who: 'admin' | 'tenant', body?: unknown): Promise<Reply> => {
      calls++
      let reply: Reply
      try {
        const res = await fetch(`${gateway.url}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${who === 'admin' ? adminKey : tenantKey}`,
            ...(body === undefined ? {} : { 'content-type': 'application/json' })
          },
          body: body === undefined ? null : JSON.stringify(body),
          // Bounded: a hung call must end the step, not the soak.
          signal: AbortSignal.timeout(90_000)
        })
        const text = await res.text()
        let json: unknown
        try { json = JSON.parse(text) } catch { json = undefined }
        reply = { status: res.status, json, text }
      } catch (err) {
        reply = { status: 'network', json: undefined, text: String(err) }
      }
      const key = String(reply.status)
      statusCounts[key] = (statusCounts[key] ?? 0) + 1
      return reply
    }

    /** A request that must answer `status`; returns the parsed body. */
    const expect = async (status: number, method: string, path: string, who: 'admin' | 'tenant', body?: unknown): Promise<any> => {
      const r = await request(method, path, who, body)
      if (r.status !== status) throw new CheckFailed(r.status, `${method} ${path}: expected ${status}, got ${r.status}: ${r.text}`)
      return r.json
    }

    /** POST /invoke that must reach the tool and succeed; returns the result. */
    const invoke = async (who: 'admin' | 'tenant', body: Record<string, unknown>): Promise<{ route: string, output: string }> => {
      const result = await expect(200, 'POST', '/invoke', who, body)
      if (result?.isError !== false) throw new CheckFailed('check', `${String(body.name)}: tool error: ${String(result?.output)}`)
      return result
    }

    /** A built-in call as the tenant in workspace `ws`; returns the parsed result object. */
    const builtin = async (ws: string, name: string, args: Record<string, unknown>): Promise<any> => {
      const result = await invoke('tenant', { name, arguments: args, context: { workspaceId: ws } })
      if (result.route !== 'builtin') throw new CheckFailed('check', `${name}: route ${result.route}`)
      return JSON.parse(result.output)
    }

    const check = (ok: boolean, what: string): void => {
      if (!ok) throw new CheckFailed('check', what)
    }

    /** Runs one step; a failed check is recorded and the loop goes on. */
    const step = async (name: string, fn: () => Promise<void>): Promise<void> => {
      const t0 = Date.now()
      try {
        await fn()
        exercised[name] = (exercised[name] ?? 0) + 1
      } catch (err) {
        if (err instanceof CheckFailed) fail(name, err.status, err.message)
        else fail(name, 'check', err instanceof Error ? (err.stack ?? err.message) : String(err))
      } finally {
        stepMs[name] = (stepMs[name] ?? 0) + Date.now() - t0
      }
    }

    /** Polls a bash call until `done` holds (bounded); returns the last result. */
    const pollBuiltin = async (ws: string, args: Record<string, unknown>, done: (r: any) => boolean, what: string): Promise<any> => {
      const until = Date.now() + 15_000
      for (;;) {
        const r = await builtin(ws, 'bash', args)
        if (done(r)) return r
        if (Date.now() > until) throw new CheckFailed('check', `timed out waiting for ${what}: ${JSON.stringify(r).slice(0, 300)}`)
        await sleep(50)
      }
    }

    // A fixture of its own for each registration, closed once the server was removed: the gateway
    // meets a new origin every time, as with many tenants' URLs, and its idle keep-alive sockets to
    // the old one are closed by the peer at once. With one fixture for the whole run they would
    // linger for the keep-alive timeout (~4 s), so whether a sample counts them would depend on how
    // fast iterations go, not on a leak.
    const tenantServer = async (kind: 'streamable_http' | 'sse'): Promise<void> => {
      const marker = `soak-${kind}`
      const fixture = kind === 'sse' ? await startSseFixture({ marker }) : await startStreamableHttpFixture({ marker })
      fixtures.add(fixture)
      try {
        await tenantServerOn(kind, fixture, marker)
      } finally {
        await fixture.close()
        fixtures.delete(fixture)
      }
    }

    const tenantServerOn = async (kind: 'streamable_http' | 'sse', fixture: HttpFixture, marker: string): Promise<void> => {
      const sid = `${kind === 'sse' ? 's' : 'h'}${Math.floor(iteration / 3) % SERVER_ID_POOL}`
      const prefix = `user_${TENANT}_tool_`
      await expect(201, 'PUT', `/users/${TENANT}/mcp/servers/${sid}`, 'tenant', { type: kind, url: fixture.url })
      try {
        const listing = await expect(200, 'GET', `/tools?mcp=${sid}&userId=${TENANT}`, 'tenant')
        const names: string[] = listing.tools.map((t: any) => t.function.name)
        check(names.includes(`${prefix}echo`) && names.includes(`${prefix}add`) && listing.unavailable.length === 0,
          `listing of ${sid}: ${JSON.stringify(listing).slice(0, 300)}`)
        const echo = await invoke('tenant', { name: `${prefix}echo`, arguments: { text: `i${iteration}` } })
        check(echo.route === 'user_mcp' && echo.output === `${marker}:i${iteration}`, `echo: ${JSON.stringify(echo)}`)
        const add = await invoke('tenant', { name: `${prefix}add`, arguments: { a: iteration, b: 2 } })
        check(add.output === String(iteration + 2), `add: ${add.output}`)
      } finally {
        await expect(200, 'DELETE', `/users/${TENANT}/mcp/servers/${sid}`, 'tenant')
      }
      const gone = await expect(404, 'POST', '/invoke', 'tenant', { name: `${prefix}echo`, arguments: { text: 'x' } })
      check(gone.code === 'GW_TOOL_NOT_FOUND', `after removal: ${JSON.stringify(gone)}`)
    }

    const globalStdioServer = async (): Promise<void> => {
      const sid = `p${Math.floor(iteration / 3) % SERVER_ID_POOL}`
      const config = { type: 'stdio', ...stdioFixture('stdio-server.ts', [stdioMarker]) }
      const refused = await expect(403, 'PUT', `/users/${TENANT}/mcp/servers/${sid}`, 'tenant', config)
      check(refused.code === 'GW_FORBIDDEN', `tenant stdio: ${JSON.stringify(refused)}`)
      await expect(201, 'PUT', `/mcp/servers/${sid}`, 'admin', config)
      try {
        const listing = await expect(200, 'GET', `/tools?mcp=${sid}`, 'admin')
        const names: string[] = listing.tools.map((t: any) => t.function.name)
        check(names.includes('echo') && names.includes('add') && listing.unavailable.length === 0,
          `listing of ${sid}: ${JSON.stringify(listing).slice(0, 300)}`)
        const echo = await invoke('admin', { name: 'echo', arguments: { text: `i${iteration}` } })
        check(echo.route === 'global_mcp' && echo.output === `${stdioMarker}:i${iteration}`, `echo: ${JSON.stringify(echo)}`)
        const add = await invoke('admin', { name: `${sid}__add`, arguments: { a: iteration, b: 3 } })
        check(add.output === String(iteration + 3), `add: ${add.output}`)
      } finally {
        await expect(200, 'DELETE', `/mcp/servers/${sid}`, 'admin')
      }
      const gone = await expect(404, 'POST', '/invoke', 'admin', { name: `${sid}__echo`, arguments: { text: 'x' } })
      check(gone.code === 'GW_TOOL_NOT_FOUND', `after removal: ${JSON.stringify(gone)}`)
    }

    /** Starts a background process, waits for `expected` in its logs (after `input`, if any), stops it. */
    const background = async (ws: string, command: string, expected: string, input?: string): Promise<void> => {
      const started = await builtin(ws, 'bash', { action: 'start', command })
      check(typeof started.processId === 'string' && started.status === 'RUNNING', `start: ${JSON.stringify(started)}`)
      const processId: string = started.processId
      try {
        if (input !== undefined) {
          const written = await builtin(ws, 'bash', { action: 'write', processId, input })
          check(written.bytesWritten === Buffer.byteLength(input), `write: ${JSON.stringify(written)}`)
        }
        await pollBuiltin(ws, { action: 'logs', processId }, (r) => String(r.content).includes(`[stdout] ${expected}\n`), `"${expected}" in the logs`)
      } finally {
        const stopped = await builtin(ws, 'bash', { action: 'stop', processId })
        check(stopped.status === 'STOPPED', `stop: ${JSON.stringify(stopped)}`)
      }
    }

    const iterate = async (): Promise<void> => {
      const i = iteration
      // One workspace: its list of finished background processes (64 kept) is full after ~32
      // iterations, so the bounded state stops growing early in the warm-up.
      const ws = 'soak'
      const kind = (['streamable_http', 'sse', 'stdio'] as const)[i % 3] as 'streamable_http' | 'sse' | 'stdio'
      await step(`mcp-${kind}`, async () => {
        if (kind === 'stdio') await globalStdioServer()
        else await tenantServer(kind)
      })

      if (i % 2 === 0) {
        await step('bg-lines', async () => await background(ws,
          'i=0; while [ $i -lt 2000 ]; do echo soak-line-$i; i=$((i+1)); sleep 0.02; done', 'soak-line-3'))
      } else {
        await step('bg-stdin', async () => await background(ws,
          'while IFS= read -r l; do echo "got-$l"; done', `got-ping-${i}`, `ping-${i}\n`))
      }
      await step('bg-exits', async () => {
        const started = await builtin(ws, 'bash', { action: 'start', command: `echo quick-${i}` })
        const processId: string = started.processId
        const status = await pollBuiltin(ws, { action: 'status', processId }, (r) => r.status !== 'RUNNING', 'the process to exit')
        check(status.status === 'EXITED' && status.exitCode === 0, `status: ${JSON.stringify(status)}`)
        const printed = await builtin(ws, 'bash', { action: 'logs', processId })
        check(printed.content === `[stdout] quick-${i}\n`, `logs: ${JSON.stringify(printed)}`)
      })

      await step('files', async () => {
        const path = `soak/notes-${i % 5}.md`
        const content = `alpha ${i}\nbeta ${i}\n`
        const written = await builtin(ws, 'write_file', { path, content, mode: 'overwrite' })
        check(written.bytesWritten === Buffer.byteLength(content), `write_file: ${JSON.stringify(written)}`)
        const edited = await builtin(ws, 'edit', { path, old_string: `beta ${i}`, new_string: `gamma ${i}` })
        check(edited.replacements === 1, `edit: ${JSON.stringify(edited)}`)
        const read = await builtin(ws, 'read_file', { path })
        // read_file returns lines (AI4J's shape): joined by newlines, without the last one.
        check(read.content === `alpha ${i}\ngamma ${i}` && read.endLine === 2, `read_file: ${JSON.stringify(read)}`)
        const globbed = await builtin(ws, 'glob', { pattern: 'soak/*.md' })
        check(globbed.matches.includes(path), `glob: ${JSON.stringify(globbed)}`)
        const grepped = await builtin(ws, 'grep', { pattern: `^gamma ${i}$`, path: 'soak' })
        check(grepped.totalMatches === 1 && grepped.matches[0]?.file === path, `grep: ${JSON.stringify(grepped)}`)
        const exec = await builtin(ws, 'bash', { action: 'exec', command: `wc -l < ${path} && echo $((${i} * 7))` })
        check(exec.exitCode === 0 && exec.stdout === `2\n${i * 7}\n`, `bash exec: ${JSON.stringify(exec)}`)
      })

      await step('functions', async () => {
        const batch = await expect(200, 'POST', '/invoke/batch', 'tenant', {
          calls: [
            { name: 'calculate', arguments: { expression: `${i} * 3 + 1` } },
            { name: 'text_slugify', arguments: JSON.stringify({ text: `Soak Run ${i}!` }) },
            { name: 'no_such_tool_soak', arguments: {} }
          ]
        })
        const [calc, slug, unknown] = batch.results
        check(calc?.route === 'function' && JSON.parse(calc.output).result === i * 3 + 1, `calculate: ${JSON.stringify(calc)}`)
        check(slug?.route === 'local_mcp' && slug.output === `soak-run-${i}`, `text_slugify: ${JSON.stringify(slug)}`)
        check(unknown?.statusCode === 404 && unknown.error?.code === 'GW_TOOL_NOT_FOUND', `unknown: ${JSON.stringify(unknown)}`)
      })
    }

    let baselineChildren = 0
    const takeSample = async (startedAt: number): Promise<SoakSample | undefined> => {
      // Every stop and removal has answered, but a removed stdio server gets stdin EOF and then
      // signals (the SDK's close), and a finished sandbox's namespace ends asynchronously: give the
      // children a bounded moment to go. A leaked child outlives any wait, so it still shows.
      await waitUntil('children to settle', async () => (await gatewayChildren(pid)).length <= baselineChildren, SETTLE_MS).catch(() => {})
      try {
        const heap = await logs.collectGarbage(pid)
        const status = await request('GET', '/status', 'admin')
        if (status.status !== 200) fail('sample', status.status, `GET /status: ${status.text}`)
        const fds = await openFds(pid)
        const sample: SoakSample = {
          atMs: Date.now() - startedAt,
          iteration,
          calls,
          rssBytes: await rssBytes(pid),
          heapUsedBytes: heap?.heapUsed ?? -1,
          arrayBuffersBytes: heap?.arrayBuffers ?? -1,
          fds: fds.total,
          fdsByKind: fds.byKind,
          children: (await gatewayChildren(pid)).length,
          poolClients: typeof status.json?.totalClients === 'number' ? status.json.totalClients : -1
        }
        samples.push(sample)
        opts.onSample?.(sample)
        return sample
      } catch (err) {
        fail('sample', 'check', `could not read /proc of the gateway: ${String(err)}`)
        return undefined
      }
    }

    const startedAt = Date.now()
    baselineChildren = (await gatewayChildren(pid)).length
    await takeSample(startedAt)
    let lastSampleAt = Date.now()
    const deadline = startedAt + opts.durationMs
    const hardDeadline = startedAt + (opts.maxDurationMs ?? 4 * opts.durationMs)
    const minIterations = opts.minIterations ?? 0
    while ((Date.now() < deadline || iteration < minIterations) && Date.now() < hardDeadline) {
      await iterate()
      iteration++
      if (gateway.child.exitCode !== null) {
        fail('gateway', 'check', `the gateway exited with ${gateway.child.exitCode}:\n${logs.tail()}`)
        break
      }
      // Past 200 failed checks something is broken for good: stop rather than spin.
      if (failureCount > 200) break
      if (Date.now() - lastSampleAt >= (opts.sampleEveryMs ?? 0)) {
        await takeSample(startedAt)
        lastSampleAt = Date.now()
      }
    }
    const durationMs = Date.now() - startedAt
    if (samples.at(-1)?.iteration !== iteration) await takeSample(startedAt)

    let childrenAtEnd = -1
    if (gateway.child.exitCode === null) {
      await waitUntil('the gateway to have no children', async () => (await gatewayChildren(pid)).length === 0, 10_000).catch(() => {})
      childrenAtEnd = (await gatewayChildren(pid)).length
    }

    const exitCode = await gateway.stop(10_000)
    // What survives the gateway: sandboxes bind the workspaces path, stdio servers carry the marker.
    const survivors = async (): Promise<Array<{ pid: number, cmdline: string }>> =>
      [...await processesMatching(base), ...await processesMatching(stdioMarker)]
    await waitUntil('the soak\'s processes to end', async () => (await survivors()).length === 0, 5000).catch(() => {})
    const left = await survivors()
    for (const p of left) {
      try { process.kill(p.pid, 'SIGKILL') } catch {}
    }

    logs.flush()

    const serverErrors = Object.entries(statusCounts).filter(([s]) => /^5\d\d$/.test(s)).reduce((n, [, c]) => n + c, 0)
    return {
      durationMs,
      iterations: iteration,
      calls,
      statusCounts,
      serverErrors,
      failureCount,
      failures,
      exercised,
      stepMs,
      samples,
      childrenAtEnd,
      exitCode,
      leftovers: left.map((p) => `${p.pid} ${p.cmdline}`),
      warnings: { count: logs.warnings, examples: logs.examples }
    }
  } finally {
    await cleanUp()
  }
}

/**
 * Descendants of the gateway that are the gateway's doing. tsx, which runs the gateway as `npm
 * start` does, starts esbuild's service process as a child whenever it has to compile a file that
 * is not in its cache (a cold cache, a file just edited), and keeps it: that one is not counted.
 */
async function gatewayChildren (pid: number): Promise<ProcInfo[]> {
  return (await descendantsOf(pid)).filter((p) => !/\/esbuild --service=/.test(p.cmdline))
}

/**
 * Takes the gateway's output over from startGateway's helper, which keeps all of it in a string:
 * at LOG_LEVEL=info (the default, so the soak runs what `npm start` runs) that is three lines per
 * call, hundreds of MiB in this process over an hour. Keeps a count and examples of the lines at
 * warn or above (and Node's own warnings on stderr), and a short tail for a crash report. The
 * streams must keep being read: a full pipe would block the gateway's logger.
 */
interface BoundedLogs {
  warnings: number
  examples: string[]
  tail: () => string
  flush: () => void
  /** Asks the GC probe for a full GC; resolves with the heap figures after it, or undefined after 10 s. */
  collectGarbage: (pid: number) => Promise<GcFigures | undefined>
}

interface GcFigures { heapUsed: number, arrayBuffers: number }

function boundedLogs (gateway: GatewayProcess): BoundedLogs {
  let gcWaiter: ((figures: GcFigures | undefined) => void) | undefined
  const state: BoundedLogs = {
    warnings: 0,
    examples: [],
    tail: () => recent.join('\n'),
    flush: () => {},
    collectGarbage: async (pid) => await new Promise((resolve) => {
      const done = (figures: GcFigures | undefined): void => { clearTimeout(timer); gcWaiter = undefined; resolve(figures) }
      const timer = setTimeout(() => done(undefined), 10_000)
      gcWaiter = done
      try { process.kill(pid, 'SIGWINCH') } catch { done(undefined) }
    })
  }
  const recent: string[] = []
  const pending = { stdout: '', stderr: '' }
  const line = (l: string): void => {
    if (l === '') return
    const gc = /^soak-gc (\d+) (\d+)$/.exec(l)
    if (gc !== null) {
      gcWaiter?.({ heapUsed: Number(gc[1]), arrayBuffers: Number(gc[2]) })
      return
    }
    recent.push(l.slice(0, 500))
    if (recent.length > 20) recent.shift()
    if (/"level":(40|50|60)\b|Warning:/.test(l)) {
      state.warnings++
      if (state.examples.length < 5) state.examples.push(l.slice(0, 300))
    }
  }
  for (const name of ['stdout', 'stderr'] as const) {
    const stream = gateway.child[name]
    if (stream === null) continue
    stream.removeAllListeners('data')
    stream.on('data', (chunk: Buffer) => {
      const lines = (pending[name] + chunk.toString()).split('\n')
      pending[name] = lines.pop() ?? ''
      for (const l of lines) line(l)
    })
  }
  state.flush = () => {
    for (const name of ['stdout', 'stderr'] as const) {
      line(pending[name])
      pending[name] = ''
    }
  }
  return state
}

/** Thresholds of {@link judgeFlatness}; the defaults are explained there. */
export interface FlatnessOptions {
  /** Share of the run (by time) treated as warm-up and not judged. Default 0.25, at most `maxWarmupMs`. */
  warmupFraction?: number
  maxWarmupMs?: number
  /** How far the fd floor may rise. Default 3. */
  fdSlack?: number
  /** How far the children and pool-client floors may rise. Default 0. */
  childSlack?: number
  /** RSS growth allowed over the judged window: the larger of these two. Defaults 32 MiB and 0.25. */
  rssSlackBytes?: number
  rssSlackFraction?: number
  /** Heap (after a full GC) growth allowed over the judged window: the larger of these two. Defaults 2 MiB and 0.05. */
  heapSlackBytes?: number
  heapSlackFraction?: number
}

/** Figures and outcome of {@link judgeFlatness}. */
export interface FlatnessVerdict {
  flat: boolean
  /** One line per rule that failed. */
  problems: string[]
  /** Samples judged (after warm-up), and how many make up each compared quarter. */
  judged: number
  quarter: number
  warmupMs: number
  /** Floors (minimum) of the first and last judged quarters. */
  fds: { first: number, last: number, allowed: number }
  children: { first: number, last: number, max: number, allowed: number }
  poolClients: { first: number, last: number, allowed: number }
  rss: {
    /** Median RSS of the first and last judged quarters. */
    first: number
    last: number
    max: number
    /** Theil-Sen slope over the judged samples, in bytes per minute, and the growth it projects over the judged window. */
    slopePerMin: number
    projectedGrowth: number
    allowed: number
  }
  /** The same for the heap after a full GC; undefined when the GC probe did not answer every judged sample. */
  heap: { first: number, last: number, slopePerMin: number, projectedGrowth: number, allowed: number } | undefined
}

/**
 * Says whether the gateway's resources stayed flat over a soak. One rule set for the short run of
 * `npm test` and the long `npm run soak`:
 *
 * - Warm-up: the first quarter of the run (at most 2 minutes) is not judged: V8 grows its heaps and
 *   compiles, bounded state fills (the workspace's list of finished background processes, 64
 *   kept; listing caches for the pooled server ids), connection pools reach their working size.
 * - The judged samples are split into quarters; the first and the last are compared.
 * - File descriptors and children: the FLOOR (minimum) of each quarter. Samples are taken at the
 *   quiescent point of the loop, but a socket being closed or a keep-alive connection that has
 *   not timed out yet can still be counted; such resources only ever add to a count, so the
 *   minimum over several samples is the resting level. A leak (one fd or process kept per
 *   iteration, or per stdio server) raises every later sample, floor included, by one per leaking
 *   iteration: several over the short run (checked: not stopping background processes, or not
 *   removing servers, fails it). Slack: 3 fds (this driver's keep-alive connections to the
 *   gateway), 0 children and 0 pooled clients (nothing is registered or running at that point).
 * - Heap after a forced full GC (the GC probe): the precise signal for memory kept by JavaScript.
 *   At steady state it moves by ~0.1 MiB between samples. The growth is the Theil-Sen slope (the
 *   median of the pairwise slopes: a few odd samples do not move it) times the judged window, and
 *   must stay under max(2 MiB, 5% of the first quarter's median). With the two leaks found by this
 *   soak removed in a scratch copy of the gateway, runs judged 0.8 MiB (90 s, 96 iterations) and
 *   0.9 MiB (10 min, 469 iterations); with them (~25 KiB per registration), 4.4 MiB in 10 min
 *   at 282 iterations. So a 10-minute run fails a leak of ~10 KiB per iteration; a short run
 *   should pass a looser bound (its bounded state is still filling).
 * - RSS, for memory outside the JS heap (buffers, native allocations): noisy (GC timing, heap
 *   growth in steps, the allocator keeping pages), judged by the same slope, under max(32 MiB,
 *   25% of the first quarter's median RSS): 32-50 MiB for this gateway (165-200 MiB). That only
 *   catches a gross native leak over a short run, ~100 KiB per iteration over 10 minutes.
 *   Measured on a 2-vCPU machine at load 2-11: RSS rises 12-30 MiB/min for the first minute or
 *   two, then a major GC gives it back; judged growth stayed under 15 MiB, including a run whose
 *   heap was flat (11.6 MiB of RSS over 8 minutes).
 */
export function judgeFlatness (samples: readonly SoakSample[], options: FlatnessOptions = {}): FlatnessVerdict {
  const warmupFraction = options.warmupFraction ?? 0.25
  const maxWarmupMs = options.maxWarmupMs ?? 120_000
  const fdSlack = options.fdSlack ?? 3
  const childSlack = options.childSlack ?? 0
  const rssSlackBytes = options.rssSlackBytes ?? 32 * 1024 * 1024
  const rssSlackFraction = options.rssSlackFraction ?? 0.25
  const heapSlackBytes = options.heapSlackBytes ?? 2 * 1024 * 1024
  const heapSlackFraction = options.heapSlackFraction ?? 0.05

  const endMs = samples.at(-1)?.atMs ?? 0
  const warmupMs = Math.min(endMs * warmupFraction, maxWarmupMs)
  const judged = samples.filter((s) => s.atMs >= warmupMs)
  const quarter = Math.max(1, Math.floor(judged.length / 4))
  const first = judged.slice(0, quarter)
  const last = judged.slice(-quarter)
  const problems: string[] = []
  if (judged.length < 8) problems.push(`too few samples after warm-up to judge (${judged.length}, need 8)`)

  const floor = (xs: readonly SoakSample[], f: (s: SoakSample) => number): number => Math.min(...xs.map(f))
  const fds = { first: floor(first, (s) => s.fds), last: floor(last, (s) => s.fds), allowed: 0 }
  fds.allowed = fds.first + fdSlack
  if (fds.last > fds.allowed) problems.push(`open fds: floor rose from ${fds.first} to ${fds.last} (allowed ${fds.allowed})`)

  const children = {
    first: floor(first, (s) => s.children),
    last: floor(last, (s) => s.children),
    max: Math.max(...judged.map((s) => s.children)),
    allowed: 0
  }
  children.allowed = children.first + childSlack
  if (children.last > children.allowed) problems.push(`child processes: floor rose from ${children.first} to ${children.last} (allowed ${children.allowed})`)

  const poolClients = { first: floor(first, (s) => s.poolClients), last: floor(last, (s) => s.poolClients), allowed: 0 }
  poolClients.allowed = poolClients.first + childSlack
  if (poolClients.last > poolClients.allowed) problems.push(`pooled MCP clients: floor rose from ${poolClients.first} to ${poolClients.last} (allowed ${poolClients.allowed})`)

  const rssFirst = median(first.map((s) => s.rssBytes))
  const slope = theilSen(judged.map((s) => [s.atMs, s.rssBytes]))
  const windowMs = judged.length > 1 ? (judged.at(-1) as SoakSample).atMs - (judged[0] as SoakSample).atMs : 0
  const rss = {
    first: rssFirst,
    last: median(last.map((s) => s.rssBytes)),
    max: Math.max(...judged.map((s) => s.rssBytes)),
    slopePerMin: slope * 60_000,
    projectedGrowth: slope * windowMs,
    allowed: Math.max(rssSlackBytes, rssFirst * rssSlackFraction)
  }
  if (rss.projectedGrowth > rss.allowed) {
    problems.push(`RSS: grows ${mib(rss.slopePerMin)}/min, ${mib(rss.projectedGrowth)} over the judged ${Math.round(windowMs / 1000)} s (allowed ${mib(rss.allowed)})`)
  }

  let heap: FlatnessVerdict['heap']
  if (judged.length > 0 && judged.every((s) => s.heapUsedBytes >= 0)) {
    const heapFirst = median(first.map((s) => s.heapUsedBytes))
    const heapSlope = theilSen(judged.map((s) => [s.atMs, s.heapUsedBytes]))
    heap = {
      first: heapFirst,
      last: median(last.map((s) => s.heapUsedBytes)),
      slopePerMin: heapSlope * 60_000,
      projectedGrowth: heapSlope * windowMs,
      allowed: Math.max(heapSlackBytes, heapFirst * heapSlackFraction)
    }
    if (heap.projectedGrowth > heap.allowed) {
      problems.push(`heap after GC: grows ${mib(heap.slopePerMin)}/min, ${mib(heap.projectedGrowth)} over the judged ${Math.round(windowMs / 1000)} s (allowed ${mib(heap.allowed)})`)
    }
  } else {
    problems.push('heap after GC: the GC probe did not answer every judged sample')
  }
  return { flat: problems.length === 0, problems, judged: judged.length, quarter, warmupMs, fds, children, poolClients, rss, heap }
}

/** `12.3 MiB` */
export function mib (bytes: number): string {
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`
}

function median (xs: readonly number[]): number {
  if (xs.length === 0) return 0
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/** Median of the slopes between every pair of points (at most 300 points, evenly picked). */
function theilSen (points: ReadonlyArray<readonly [number, number]>): number {
  const step = Math.max(1, Math.ceil(points.length / 300))
  const pts = points.filter((_, i) => i % step === 0)
  const slopes: number[] = []
  for (let a = 0; a < pts.length; a++) {
    for (let b = a + 1; b < pts.length; b++) {
      const [xa, ya] = pts[a] as readonly [number, number]
      const [xb, yb] = pts[b] as readonly [number, number]
      if (xb !== xa) slopes.push((yb - ya) / (xb - xa))
    }
  }
  return median(slopes)
}
