/**
 * Row 9: a recorded coding-agent session (bench/fixtures/replay/session.json: ~190 calls of
 * read_file, grep, glob, edit, write_file, apply_patch and bash exec on picomatch's source, an
 * agent fixing a bug and adding tests; written and checked by make-session.ts) replayed two ways
 * in the same run, in lockstep (call by call, alternating which side goes first), each replay on
 * a fresh copy of the project:
 * - through the gateway: POST /invoke of each call, one at a time, to the production build with
 *   SANDBOX=bwrap, the copy uploaded as the tenant's workspace through the workspace API (untimed);
 * - directly, as an agent harness without a gateway does it on a local checkout
 *   (fixtures/replay/direct.ts): node fs calls, bare rg, fast-glob, and bash commands through the
 *   same sandbox exec the bash tool uses (createSandbox in this process, like bench/builtins.ts).
 * Every call must succeed (HTTP 200, isError false, each bash command's recorded exit code) and
 * give the same figure on both sides (grep matches, glob counts, read contents, exit codes), and
 * both final trees must be equal: a failed call fails the module instead of being timed. The first
 * replay is a warm-up, not reported.
 * 9.1 wall time of the session; 9.2 CPU time (the gateway process and its children, the sandboxed
 * commands, vs this process and its children over its direct calls); 9.3a-g the wall time by tool.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { chmod, mkdir, rm, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { performance } from 'node:perf_hooks'
import { promisify } from 'node:util'
import { createSandbox } from '../src/builtin/sandbox/create-sandbox.js'
import { WorkspaceManager } from '../src/builtin/workspace/workspaces.js'
import { directExecutor, freshCopy, loadSession, removeCopy, treeDigest } from './fixtures/replay/direct.js'
import type { CallSummary, ReplayCall, Session } from './fixtures/replay/direct.js'
import { closeHttp, gatewayEnv, http, httpOk, startGateway } from './fixtures/procs.js'
import { makeRow, median, round } from './stats.js'
import type { BenchContext, Row } from './types.js'

const execFileAsync = promisify(execFile)

/** Timed replays of each side (after one untimed, checked replay each), order alternating. */
const ROUNDS = 3
const USER = 'bench'
const TOOLS = ['read_file', 'grep', 'glob', 'edit', 'write_file', 'apply_patch', 'bash'] as const
const LIMITS = { readMaxChars: 12_000, commandTimeoutMs: 30_000, bashLogChars: 12_000, maxProcessOutputChars: 120_000, outputMaxChars: 100_000 }

interface Replay {
  wallMs: number
  cpuMs: number
  byTool: Record<string, number>
  cpuByTool: Record<string, number>
  /** The final tree's treeDigest. */
  digest: string
}

/** One side of a replay: a fresh copy made; its calls, one at a time; its final tree's digest, the copy removed. */
interface Side {
  call: (i: number) => Promise<CallSummary>
  finish: () => Promise<string>
}

/** CPU (user + system) of a process and of the children it reaped, in ms (/proc, 10 ms ticks); read synchronously, a few microseconds. */
function cpuWithChildrenMs (pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  return (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * 10
}

/** The figure a gateway answer is compared on, as direct.ts computes it for the direct side. */
function gatewayFigure (call: ReplayCall, out: Record<string, unknown>): CallSummary {
  switch (call.name) {
    case 'read_file': return { figure: String(out.content) }
    case 'grep': return { figure: Number(out.totalMatches) }
    case 'glob': return { figure: Number(out.count) }
    case 'apply_patch': return { figure: (out.fileChanges as unknown[]).length }
    case 'bash': return { figure: Number(out.exitCode) }
    default: return { figure: 1 }
  }
}

function pct (part: number, whole: number): string {
  return `${round((100 * part) / whole)}%`
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  ctx.defer(closeHttp)
  // The sandbox uids must be able to pass through to the workspaces under tmpDir.
  await chmod(ctx.tmpDir, 0o711)
  const session: Session = await loadSession()
  const calls = session.calls
  const counts = Object.fromEntries(TOOLS.map((t) => [t, calls.filter((c) => c.name === t).length]))
  ctx.log(`session: ${calls.length} calls ${JSON.stringify(counts)} on ${session.project}`)

  // Direct side: the sandbox the bash tool uses, in this process, and workspaces resolved as the gateway resolves them.
  const sandbox = await createSandbox({ mode: 'bwrap' })
  ctx.defer(async () => { await sandbox.close() })
  const manager = new WorkspaceManager({
    workspacesDir: path.join(ctx.tmpDir, 'direct-workspaces'),
    workspaceBases: [],
    readRoots: {},
    maxLimits: LIMITS,
    ...(sandbox.owner !== undefined ? { owner: sandbox.owner } : {})
  })
  const gw = await startGateway(ctx, gatewayEnv(ctx, { SANDBOX: 'bwrap' }))
  const staging = path.join(ctx.tmpDir, 'staging')

  let n = 0
  /** A fresh copy uploaded as the tenant's workspace; its calls through POST /invoke; its final tree, downloaded. */
  const gatewaySide = async (): Promise<Side> => {
    const wsId = `replay-${++n}`
    const copy = path.join(staging, wsId)
    await freshCopy(session, copy)
    const { stdout: tar } = await execFileAsync('tar', ['cf', '-', '-C', copy, '.'], { encoding: 'buffer', maxBuffer: 64 * 2 ** 20 })
    await removeCopy(copy)
    const up = await fetch(`${gw.url}/users/${USER}/workspaces/${wsId}`, { method: 'PUT', body: tar, headers: { 'content-type': 'application/x-tar' } })
    if (up.status !== 201) throw new Error(`upload of ${wsId}: ${up.status} ${await up.text()}`)
    const context = { workspaceId: wsId }
    return {
      call: async (i) => {
        const call = calls[i] as ReplayCall
        const r = await http('POST', `${gw.url}/invoke`, { userId: USER, name: call.name, arguments: call.arguments, context })
        const a = JSON.parse(r.body) as { isError?: boolean, output?: string }
        if (r.status !== 200 || a.isError !== false) throw new Error(`call ${i} (${call.name}) through the gateway: ${r.status} ${r.body.slice(0, 600)}`)
        const f = gatewayFigure(call, JSON.parse(a.output as string) as Record<string, unknown>)
        if (call.exitCode !== undefined && f.figure !== call.exitCode) throw new Error(`call ${i} (bash) exited ${String(f.figure)}, recorded ${call.exitCode}: ${r.body.slice(0, 1500)}`)
        return f
      },
      finish: async () => {
        // The tree as the tenant sees it: downloaded through the API, unpacked here.
        const back = path.join(staging, `${wsId}-back`)
        const arch = await fetch(`${gw.url}/users/${USER}/workspaces/${wsId}/archive`)
        if (arch.status !== 200) throw new Error(`download of ${wsId}: ${arch.status} ${await arch.text()}`)
        await mkdir(back, { recursive: true })
        await writeFile(`${back}.tgz`, Buffer.from(await arch.arrayBuffer()))
        await execFileAsync('tar', ['xzf', `${back}.tgz`, '-C', back])
        const digest = await treeDigest(back)
        await removeCopy(back)
        await rm(`${back}.tgz`)
        await httpOk('DELETE', `${gw.url}/users/${USER}/workspaces/${wsId}`, undefined, [200, 204])
        return digest
      }
    }
  }
  /** A fresh copy in a workspace of this process's manager (handed to the sandbox uid as the gateway's are); the calls done directly. */
  const directSide = async (): Promise<Side> => {
    const wsId = `replay-${++n}`
    await freshCopy(session, path.join(ctx.tmpDir, 'direct-workspaces', USER, wsId))
    const ws = await manager.resolve({ workspaceId: wsId }, { userId: USER, isAdmin: false })
    const exec = directExecutor(ws.root, async (command) => {
      const r = await sandbox.exec({
        workspace: ws, command, cwd: ws.root, timeoutMs: LIMITS.commandTimeoutMs, maxOutputBytes: LIMITS.outputMaxChars
      })
      return { exitCode: r.exitCode, stdout: r.stdout, stderr: r.stderr }
    })
    return {
      call: async (i) => {
        const call = calls[i] as ReplayCall
        try {
          return await exec(call)
        } catch (err) {
          throw new Error(`call ${i} (${call.name}) done directly: ${(err as Error).message}`)
        }
      },
      finish: async () => {
        const digest = await treeDigest(ws.root)
        await removeCopy(ws.root)
        return digest
      }
    }
  }

  /**
   * Both sides replay the session in lockstep, call by call, the side that goes first alternating,
   * so that the shared machine's drift (its load moved 4 -> 7 in one run) hits both alike. The
   * gateway's CPU is its process's over the whole replay (it does nothing else); this process's
   * is summed over its direct calls alone (it also drives the gateway's calls), read synchronously.
   */
  const lockstep = async (): Promise<{ g: Replay, d: Replay } | undefined> => {
    const gs = await gatewaySide()
    const ds = await directSide()
    const g: Replay = { wallMs: 0, cpuMs: 0, byTool: {}, cpuByTool: {}, digest: '' }
    const d: Replay = { wallMs: 0, cpuMs: 0, byTool: {}, cpuByTool: {}, digest: '' }
    const gCpu0 = cpuWithChildrenMs(gw.pid)
    // The gateway's CPU by tool: from the start of one of its calls to the start of its next one,
    // so what it does after answering (the log line, the journal) counts with the call.
    let gMark = gCpu0
    let gLast: string | undefined
    const gAttribute = (): void => {
      const now = cpuWithChildrenMs(gw.pid)
      if (gLast !== undefined) g.cpuByTool[gLast] = (g.cpuByTool[gLast] ?? 0) + now - gMark
      gMark = now
    }
    for (const [i, call] of calls.entries()) {
      // Out of time (the module's budget): the replay stops short, its copies removed, and is not counted.
      if (ctx.signal.aborted) {
        await gs.finish()
        await ds.finish()
        return undefined
      }
      let gf: CallSummary | undefined
      let df: CallSummary | undefined
      const viaGateway = async (): Promise<void> => {
        gAttribute()
        gLast = call.name
        const t0 = performance.now()
        gf = await gs.call(i)
        const ms = performance.now() - t0
        g.wallMs += ms
        g.byTool[call.name] = (g.byTool[call.name] ?? 0) + ms
      }
      const direct = async (): Promise<void> => {
        const c0 = cpuWithChildrenMs(process.pid)
        const t0 = performance.now()
        df = await ds.call(i)
        const ms = performance.now() - t0
        const cpu = cpuWithChildrenMs(process.pid) - c0
        d.cpuMs += cpu
        d.cpuByTool[call.name] = (d.cpuByTool[call.name] ?? 0) + cpu
        d.wallMs += ms
        d.byTool[call.name] = (d.byTool[call.name] ?? 0) + ms
      }
      if (i % 2 === 0) { await viaGateway(); await direct() } else { await direct(); await viaGateway() }
      if (gf?.figure !== df?.figure) {
        throw new Error(`call ${i} (${call.name} ${JSON.stringify(call.arguments).slice(0, 100)}) differs: gateway ${JSON.stringify(gf?.figure).slice(0, 200)}, ` +
          `direct ${JSON.stringify(df?.figure).slice(0, 200)}`)
      }
    }
    gAttribute()
    g.cpuMs = gMark - gCpu0
    g.digest = await gs.finish()
    d.digest = await ds.finish()
    if (g.digest !== d.digest) throw new Error(`the session's final trees differ: gateway ${g.digest}, direct ${d.digest}`)
    return { g, d }
  }

  // The first replay warms both sides up (JIT, page cache, the sandbox's first spawns) and is not reported.
  const warm = await lockstep()
  if (warm === undefined) throw new Error('out of time during the warm-up replay')
  ctx.log(`warm-up: gateway ${round(warm.g.wallMs)} ms, direct ${round(warm.d.wallMs)} ms; every call's figure and the final trees equal`)
  const g: Replay[] = []
  const d: Replay[] = []
  for (let i = 0; i < ROUNDS; i++) {
    if (i > 0 && ctx.signal.aborted) break
    const r = await lockstep()
    if (r === undefined) break
    if (r.g.digest !== warm.g.digest) throw new Error(`round ${i + 1} ended with another tree (${r.g.digest})`)
    g.push(r.g)
    d.push(r.d)
    ctx.log(`  round ${i + 1}: gateway ${round(r.g.wallMs)} ms wall, ${round(r.g.cpuMs)} ms CPU; direct ${round(r.d.wallMs)} ms, ${round(r.d.cpuMs)} ms CPU`)
  }
  if (g.length === 0) throw new Error('out of time before the first timed replay ended')
  return rows(calls.length, counts, g, d)
}

/** The rows from the timed replays: medians of each side's figures. */
function rows (total: number, counts: Record<string, number>, g: Replay[], d: Replay[]): Row[] {
  const gw = median(g.map((r) => r.wallMs))
  const dw = median(d.map((r) => r.wallMs))
  const gc = median(g.map((r) => r.cpuMs))
  const dc = median(d.map((r) => r.cpuMs))
  const share = (a: number, b: number, unit: string): string => `the gateway's share ${round(a - b)} ${unit} (${pct(a - b, a)} of the session through it)`
  const byTool = (rs: Replay[], t: string): number => median(rs.map((r) => r.byTool[t] ?? 0))
  const cpuByTool = (rs: Replay[], t: string): number => median(rs.map((r) => r.cpuByTool[t] ?? 0))
  const out: Row[] = [
    makeRow({
      id: '9.1',
      name: `coding-agent session replay (${total} calls on picomatch, one at a time): wall time through POST /invoke vs the same operations done directly`,
      metric: 'median ms',
      value: gw,
      baseline: dw,
      target: null,
      notes: `${share(gw, dw, 'ms')}, ${round((gw - dw) / total)} ms per call; direct: node fs, rg, fast-glob, bash in the same bwrap sandbox exec; ` +
        `n=${g.length} lockstep replays; runs ${g.map((r) => round(r.wallMs)).join(', ')} vs ${d.map((r) => round(r.wallMs)).join(', ')}`,
      detail: { calls: total, addedMs: round(gw - dw), sharePct: round((100 * (gw - dw)) / gw), addedPerCallMs: round((gw - dw) / total) }
    }),
    makeRow({
      id: '9.2',
      name: 'the same replays: CPU time, the gateway process and its children (sandboxed commands) vs this process and its children doing them directly',
      metric: 'median CPU ms',
      value: gc,
      baseline: dc,
      target: null,
      notes: `${share(gc, dc, 'ms')}; /proc utime+stime+cutime+cstime, 10 ms ticks; the client side of POST /invoke not counted; ` +
        `runs ${g.map((r) => round(r.cpuMs)).join(', ')} vs ${d.map((r) => round(r.cpuMs)).join(', ')}`,
      detail: { addedCpuMs: round(gc - dc), sharePct: round((100 * (gc - dc)) / gc) }
    })
  ]
  const letters = 'abcdefg'
  for (const [i, t] of TOOLS.entries()) {
    const gt = byTool(g, t)
    const dt = byTool(d, t)
    const n = counts[t] ?? 0
    out.push(makeRow({
      id: `9.3${letters[i] ?? ''}`,
      name: `the same replays, ${t} calls only: wall time through the gateway vs directly`,
      metric: 'median ms',
      value: gt,
      baseline: dt,
      target: null,
      notes: `${n} calls; added ${round((gt - dt) / Math.max(1, n))} ms per call; ${pct(gt, gw)} of the session through the gateway, ${pct(dt, dw)} of the direct one; ` +
        `CPU ${round(cpuByTool(g, t))} vs ${round(cpuByTool(d, t))} ms (10 ms ticks summed per call)` +
        (t === 'grep' ? '; the gateway runs rg in the tenant\'s bwrap sandbox, the direct side runs rg bare' : '') +
        (t === 'bash' ? '; both sides run the command in the same bwrap sandbox' : ''),
      detail: { calls: n, addedMs: round(gt - dt), cpuMs: round(cpuByTool(g, t)), baselineCpuMs: round(cpuByTool(d, t)) }
    }))
  }
  return out
}
