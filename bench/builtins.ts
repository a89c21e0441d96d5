/**
 * Row 5: the built-in tools, called through their BuiltinTool `run`
 * interface on a Workspace from WorkspaceManager, against the natural baselines measured in the
 * same run (rg, fast-glob, a raw read, an unsandboxed spawn).
 */
import { spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { chmod, open } from 'node:fs/promises'
import path from 'node:path'
import fg from 'fast-glob'
import { ProcessManager } from '../src/builtin/processes/process-manager.js'
import { buildBwrapArgs, buildPrlimitArgs } from '../src/builtin/sandbox/bwrap-args.js'
import { createSandbox } from '../src/builtin/sandbox/create-sandbox.js'
import { detectHostLayout, writeSandboxEtc } from '../src/builtin/sandbox/system-files.js'
import { createBashTool } from '../src/builtin/tools/bash.js'
import { globTool } from '../src/builtin/tools/glob.js'
import { rgArgs as toolRgArgs, shellQuote } from '../src/builtin/tools/grep/rg.js'
import { createGrepTool } from '../src/builtin/tools/grep/tool.js'
import { readFileTool } from '../src/builtin/tools/read-file.js'
import type { Workspace } from '../src/builtin/types.js'
import type { BuiltinTool } from '../src/builtin/tool.js'
import { WorkspaceManager } from '../src/builtin/workspace/workspaces.js'
import { BIG_LINE_BYTES, generateBigFile, generateTree } from './fixtures/tree.js'
import { makeRow, median, percentile, round, timeInterleaved, timePair } from './stats.js'
import type { BenchContext, Row } from './types.js'

const TREE = { topDirs: 20, subdirs: 50, filesPerDir: 50, needleEvery: 50, seed: 42 }
const BIG_FILE_BYTES = 1024 * 1024 * 1024
const PATTERN = 'NEEDLE_[0-9]+'
const READ_CHARS = 12_000

/** The bench sandbox's cgroup base (v1: in each controller; as root only). */
const CGROUP_BASE = 'tool-gateway-bench'
/** One byte per read and per write: 600,000 syscalls, one thread, little else (row 5.8). */
const SYSCALL_HEAVY = 'dd if=/dev/zero of=/dev/null bs=1 count=300000 status=none'

const LIMITS = { readMaxChars: READ_CHARS, commandTimeoutMs: 30_000, bashLogChars: 12_000, maxProcessOutputChars: 120_000, outputMaxChars: 100_000 }

interface Collected { code: number | null, bytes: number, lines: number }

/** Spawns a command, collects stdout (as the tools do) and resolves on close. */
function runCollect (cmd: string, args: readonly string[], signal: AbortSignal): Promise<Collected> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], signal })
    const chunks: Buffer[] = []
    child.stdout.on('data', (d: Buffer) => { chunks.push(d) })
    child.stderr.resume()
    child.on('error', reject)
    child.on('close', (code) => {
      const out = Buffer.concat(chunks)
      let lines = 0
      for (let i = out.indexOf(10); i !== -1; i = out.indexOf(10, i + 1)) lines++
      resolve({ code, bytes: out.length, lines })
    })
  })
}

/** The best a line-addressed read can do without an index: count '\n' in raw buffers up to line N. */
async function rawScanToLine (file: string, startLine: number, chars: number): Promise<string> {
  const fh = await open(file, 'r')
  try {
    const buf = Buffer.allocUnsafe(1024 * 1024)
    let pos = 0
    let line = 1
    for (;;) {
      const { bytesRead } = await fh.read(buf, 0, buf.length, pos)
      if (bytesRead === 0) return ''
      let i = 0
      while (line < startLine) {
        const nl = buf.indexOf(10, i)
        if (nl === -1 || nl >= bytesRead) break
        line++
        i = nl + 1
      }
      if (line === startLine) {
        const out = Buffer.allocUnsafe(chars * 2)
        const r = await fh.read(out, 0, out.length, pos + i)
        return out.subarray(0, r.bytesRead).toString('utf8').slice(0, chars)
      }
      pos += bytesRead
    }
  } finally {
    await fh.close()
  }
}

function spawnWait (cmd: string, args: readonly string[], opts: { uid?: number, gid?: number } = {}): Promise<number | null> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'], ...opts })
    child.stdout.resume()
    child.stderr.resume()
    child.on('error', reject)
    child.on('close', (code) => resolve(code))
  })
}

function msNote (xs: readonly number[]): string {
  return `n=${xs.length}`
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  const rows: Row[] = []
  const signal = ctx.signal

  // Sandbox first: the workspace manager chowns workspaces to the sandbox uid. Its cgroups (as root) go
  // in a base of their own: other gateways' and tests' sandboxes on this machine are other tenants, whose
  // processes would put the tenant CPU cap on (cpu-cap.ts); 5.1d measures that case on purpose.
  const isRoot = process.getuid?.() === 0
  const sandbox = await createSandbox({ mode: 'bwrap', ...(isRoot ? { cgroupRoot: CGROUP_BASE } : {}) })
  ctx.defer(async () => { await sandbox.close() })
  const processes = new ProcessManager({ sandbox, reapIntervalMs: 0 })
  ctx.defer(async () => { await processes.killAll() })
  // The sandbox uid must be able to traverse down to the workspace.
  await chmod(ctx.tmpDir, 0o711)
  const manager = new WorkspaceManager({
    workspacesDir: path.join(ctx.tmpDir, 'workspaces'),
    workspaceBases: [],
    readRoots: {},
    maxLimits: LIMITS,
    ...(sandbox.owner !== undefined ? { owner: sandbox.owner } : {})
  })
  const caller = { userId: 'bench', isAdmin: false }
  const treeWs = await manager.resolve({ workspaceId: 'tree' }, caller)
  // The big file lives in its own workspace so the grep and glob rows (and the rg baseline, which
  // has no size cap) walk only the 50,000-file tree.
  const bigWs = await manager.resolve({ workspaceId: 'big' }, caller)

  const call = async (tool: BuiltinTool, ws: Workspace, args: Record<string, unknown>): Promise<Record<string, unknown>> =>
    await tool.run(args, { workspace: ws, signal }) as Record<string, unknown>

  // --- bash exec true ---------------------------------------------------------------------------
  // First, while the process is small (spawn cost grows with the parent's memory); the command does
  // not care that the workspace is still empty.
  const bash = createBashTool({ sandbox, processes })
  const execTrue = async (): Promise<void> => {
    const r = await call(bash, treeWs, { action: 'exec', command: 'true' })
    if (r.exitCode !== 0) throw new Error(`bash exec true exited with ${String(r.exitCode)}: ${String(r.stderr)}`)
  }
  const spawnTrue = async (): Promise<void> => {
    const code = await spawnWait('true', [])
    if (code !== 0) throw new Error(`true exited with ${code}`)
  }
  // The same prlimit + bwrap + sh argv spawned bare: the sandbox's own cost, without the tool.
  const layout = await detectHostLayout()
  const etc = await writeSandboxEtc()
  ctx.defer(etc.remove)
  const argv = buildPrlimitArgs(sandbox.limits, ['/usr/bin/bwrap', ...buildBwrapArgs({
    workspaceRoot: treeWs.root, readRoots: [], cwd: treeWs.root, command: 'true', etc, layout, tmpSizeBytes: sandbox.limits.tmpSizeBytes
  })])
  const ids = sandbox.owner !== undefined && process.getuid?.() === 0 ? { uid: sandbox.owner.uid, gid: sandbox.owner.gid } : {}
  const bareBwrap = async (): Promise<void> => {
    const code = await spawnWait('/usr/bin/prlimit', argv, ids)
    if (code !== 0) throw new Error(`bare bwrap exited with ${code}`)
  }
  const rssMiB = Math.round(process.memoryUsage().rss / 2 ** 20)
  const bs = await timeInterleaved({ tool: execTrue, bare: bareBwrap, spawn: spawnTrue }, { warmup: 3, reps: 61, signal })
  const p99 = (xs: number[]): number => round(percentile(xs, 99))
  rows.push(makeRow({
    id: '5.6',
    name: 'bash exec true, bwrap sandbox, vs unsandboxed spawn of true',
    metric: 'p50 ms',
    value: median(bs.tool),
    baseline: median(bs.spawn),
    target: { on: 'value', op: '<', limit: 30 },
    notes: `p99 ${p99(bs.tool)} ms (spawn: ${p99(bs.spawn)}); ${msNote(bs.tool)}; parent RSS ${rssMiB} MiB`,
    detail: { p99: p99(bs.tool), baselineP99: p99(bs.spawn), parentRssMiB: rssMiB }
  }))
  rows.push(makeRow({
    id: '5.7',
    name: 'the same prlimit + bwrap + sh -c true argv spawned bare, vs spawn of true',
    metric: 'p50 ms',
    value: median(bs.bare),
    baseline: median(bs.spawn),
    target: null,
    notes: `the sandbox's own cost, same rounds as 5.6 (5.6 minus this is the tool's); p99 ${p99(bs.bare)} ms`
  }))
  ctx.log(`bash: tool ${round(median(bs.tool))}, bare bwrap ${round(median(bs.bare))}, spawn ${round(median(bs.spawn))} ms`)

  let t0 = Date.now()
  const tree = await generateTree(treeWs.root, TREE)
  ctx.log(`tree: ${tree.files} files in ${tree.dirs} dirs, ${(tree.bytes / 2 ** 20).toFixed(0)} MiB, ${JSON.stringify(tree.byExt)}, ` +
    `${tree.needleLines} needle lines in ${tree.needleFiles} files (${Date.now() - t0} ms)`)
  t0 = Date.now()
  const bigFile = path.join(bigWs.root, 'big.txt')
  const big = await generateBigFile(bigFile, BIG_FILE_BYTES)
  ctx.log(`big file: ${big.lines} lines, ${BIG_FILE_BYTES / 2 ** 20} MiB of real text (${Date.now() - t0} ms)`)

  // --- grep -------------------------------------------------------------------------------------
  // The bench's sandbox, as the gateway hands its own (a private one would sit in the shared cgroup base).
  const grepRg = createGrepTool({ engine: 'rg', sandbox })
  const grepNode = createGrepTool({ engine: 'node' })
  const rgArgs = ['--no-config', '-n', '-e', PATTERN, '--', treeWs.root]
  const rgBase = async (): Promise<Collected> => {
    const r = await runCollect('rg', rgArgs, signal)
    if (r.code !== 0) throw new Error(`rg exited with ${r.code}`)
    return r
  }
  const rgCheck = await rgBase()
  const toolCheck = await call(grepRg, treeWs, { pattern: PATTERN })
  const same = toolCheck.totalMatches === rgCheck.lines && rgCheck.lines === tree.needleLines
  ctx.log(`grep: tool totalMatches=${String(toolCheck.totalMatches)} filesSearched=${String(toolCheck.filesSearched)}; rg lines=${rgCheck.lines}`)

  const g = await timePair(() => call(grepRg, treeWs, { pattern: PATTERN }), rgBase, { warmup: 1, reps: 9, signal })
  rows.push(makeRow({
    id: '5.1',
    name: `grep tool, rg engine, /${PATTERN}/ vs rg -n`,
    metric: 'median ms',
    value: median(g.subject),
    baseline: median(g.baseline),
    target: { on: 'ratio', op: '<=', limit: 1.15 },
    notes: `${tree.files} files; ${String(toolCheck.totalMatches)} matches (rg: ${rgCheck.lines})${same ? '' : ' MISMATCH'}; ${msNote(g.subject)}`,
    detail: { toolMin: round(Math.min(...g.subject)), rgMin: round(Math.min(...g.baseline)), matches: Number(toolCheck.totalMatches) }
  }))
  ctx.log(`grep rg: ${round(median(g.subject))} vs ${round(median(g.baseline))} ms`)

  // The floor under 5.1: rg with the tool's own flags (hidden files, no ignore files, --text, stats),
  // first bare, then spawned in the same bwrap sandbox the tool uses; each against the same rg -n.
  const flagged = toolRgArgs({ pattern: PATTERN, caseInsensitive: false, includeGlob: undefined }, treeWs.root)
  const rgFlagged = async (): Promise<Collected> => await runCollect('rg', flagged, signal)
  const sandboxed = async (ws: Workspace, command: string): Promise<void> => {
    const proc = sandbox.spawn({ workspace: ws, command, cwd: ws.root, stdin: 'ignore' })
    proc.stdout.resume()
    proc.stderr.resume()
    const info = await proc.exited
    if (info.exitCode !== 0) throw new Error(`sandboxed ${command.slice(0, 40)} exited with ${String(info.exitCode)}`)
  }
  const rgSandboxed = async (): Promise<void> => { await sandboxed(treeWs, `exec rg ${flagged.map(shellQuote).join(' ')}`) }
  // CFS periods in which the tenant's group was throttled (cgroup v1 cpu.stat; undefined without it).
  const throttled = (): number | undefined => {
    try {
      return Number(/^nr_throttled (\d+)$/m.exec(readFileSync(`/sys/fs/cgroup/cpu/${CGROUP_BASE}/t-${treeWs.tenant}/cpu.stat`, 'utf8'))?.[1])
    } catch {
      return undefined
    }
  }
  const throttledNote = (before: number | undefined): string => {
    const after = throttled()
    return before === undefined || after === undefined ? 'no cgroup v1 cpu.stat' : `${after - before} throttled CFS periods of the tenant's group`
  }
  const gf = await timePair(rgFlagged, rgBase, { warmup: 1, reps: 9, signal })
  rows.push(makeRow({
    id: '5.1b',
    name: 'rg with the grep tool\'s flags (--hidden --no-ignore --text --null --stats ...), unsandboxed, vs rg -n',
    metric: 'median ms',
    value: median(gf.subject),
    baseline: median(gf.baseline),
    target: null,
    notes: `the cost of the tool's search semantics alone; ${msNote(gf.subject)}`
  }))
  let thr = throttled()
  const gs = await timePair(rgSandboxed, rgBase, { warmup: 1, reps: 9, signal })
  rows.push(makeRow({
    id: '5.1c',
    name: 'the same rg command in the tool\'s bwrap sandbox (prlimit + bwrap + sh), vs rg -n',
    metric: 'median ms',
    value: median(gs.subject),
    baseline: median(gs.baseline),
    target: null,
    notes: 'the floor of 5.1: what the tool spawns, without the tool; 5.1 / 5.1c is the tool\'s own share; the tenant alone: ' +
      `${throttledNote(thr)}; ${msNote(gs.subject)}`
  }))
  // The same while another tenant has a process: the tenant CPU cap (SANDBOX_TENANT_CPUS, half the host) is on.
  const otherWs = await manager.resolve({ workspaceId: 'other' }, { userId: 'bench-other', isAdmin: false })
  await sandbox.prepareWorkspace(otherWs)
  const holder = sandbox.spawn({ workspace: otherWs, command: 'exec sleep 600', cwd: otherWs.root, stdin: 'ignore' })
  let gd
  try {
    if (!await holder.started) throw new Error('the other tenant\'s sleep did not start')
    thr = throttled()
    gd = await timePair(rgSandboxed, rgBase, { warmup: 1, reps: 5, signal })
  } finally {
    holder.kill()
    await holder.exited
  }
  rows.push(makeRow({
    id: '5.1d',
    name: 'the same sandboxed rg while another tenant has a process (the tenant CPU cap on), vs rg -n',
    metric: 'median ms',
    value: median(gd.subject),
    baseline: median(gd.baseline),
    target: null,
    notes: `SANDBOX_TENANT_CPUS ${sandbox.isolation.cgroup === 'none' ? 'not in force (no cgroups)' : 'default (half the host)'}; ${throttledNote(thr)}; ${msNote(gd.subject)}`
  }))
  ctx.log(`grep sandboxed: alone ${round(median(gs.subject))} ms, capped ${round(median(gd.subject))} ms`)

  // A syscall-heavy command in and out of the sandbox: what seccomp, the namespaces and the cgroups cost per syscall.
  const sh = await timePair(() => sandboxed(treeWs, SYSCALL_HEAVY), async () => {
    const code = await spawnWait('/bin/sh', ['-c', SYSCALL_HEAVY])
    if (code !== 0) throw new Error(`dd exited with ${code}`)
  }, { warmup: 1, reps: 9, signal })
  rows.push(makeRow({
    id: '5.8',
    name: 'syscall-heavy command (dd bs=1: 600,000 read/write syscalls, one thread) in the bwrap sandbox vs unsandboxed',
    metric: 'median ms',
    value: median(sh.subject),
    baseline: median(sh.baseline),
    target: null,
    notes: `sandboxed = prlimit + bwrap + seccomp filter + cgroups, spawn included (its fixed cost alone: 5.7); ${msNote(sh.subject)}`
  }))
  ctx.log(`syscall-heavy: sandboxed ${round(median(sh.subject))} vs ${round(median(sh.baseline))} ms`)
  ctx.log(`grep floor: rg with the tool's flags ${round(median(gf.subject))} ms, sandboxed ${round(median(gs.subject))} ms, rg -n ${round(median(gs.baseline))} ms`)

  // Slow (tens of seconds here): one interleaved rep, after the rg rows warmed the page cache.
  const gn = await timePair(() => call(grepNode, treeWs, { pattern: PATTERN }), rgBase, { warmup: 0, reps: 1, signal })
  rows.push(makeRow({
    id: '5.2',
    name: `grep tool, Node engine, /${PATTERN}/ vs rg -n`,
    metric: 'median ms',
    value: median(gn.subject),
    baseline: median(gn.baseline),
    target: null,
    notes: `fallback engine (no rg, or a pattern rg cannot pre-filter); ${msNote(gn.subject)}`
  }))
  ctx.log(`grep node: ${round(median(gn.subject))} vs ${round(median(gn.baseline))} ms`)

  // --- glob -------------------------------------------------------------------------------------
  // The same options the tool passes to fast-glob (src/builtin/tools/glob.ts).
  const fgOptions = {
    cwd: treeWs.root,
    onlyFiles: true,
    dot: true,
    followSymbolicLinks: false,
    ignore: ['**/.git/**', '**/node_modules/**'],
    suppressErrors: true,
    unique: true
  }
  let fgCount = 0
  const gl = await timePair(
    () => call(globTool, treeWs, { pattern: '**/*.ts' }),
    async () => { fgCount = (await fg.glob('**/*.ts', fgOptions)).length },
    { warmup: 2, reps: 9, signal })
  const globCheck = await call(globTool, treeWs, { pattern: '**/*.ts', maxResults: 1_000_000 })
  rows.push(makeRow({
    id: '5.3',
    name: 'glob tool **/*.ts vs fast-glob (same options)',
    metric: 'median ms',
    value: median(gl.subject),
    baseline: median(gl.baseline),
    target: { on: 'ratio', op: '<=', limit: 1.0 },
    notes: `${fgCount} matches (tool: ${String(globCheck.count)} with maxResults 1e6; default returns 1000); ${msNote(gl.subject)}`
  }))
  ctx.log(`glob: ${round(median(gl.subject))} vs ${round(median(gl.baseline))} ms`)

  // --- read_file --------------------------------------------------------------------------------
  const nearStart = 1001
  const rawRead = async (line: number): Promise<void> => {
    const fh = await open(bigFile, 'r')
    try {
      const buf = Buffer.allocUnsafe(READ_CHARS)
      await fh.read(buf, 0, READ_CHARS, (line - 1) * BIG_LINE_BYTES)
    } finally {
      await fh.close()
    }
  }
  const readArgs = { path: 'big.txt', startLine: nearStart, endLine: nearStart + 299 }
  const rs = await timePair(() => call(readFileTool, bigWs, readArgs), () => rawRead(nearStart), { warmup: 3, reps: 31, signal })
  const rsCheck = await call(readFileTool, bigWs, readArgs)
  const rsContent = String(rsCheck.content)
  const rsOk = rsContent.length === READ_CHARS && rsContent.startsWith(String(nearStart).padStart(12, '0'))
  rows.push(makeRow({
    id: '5.4',
    name: `read_file 12,000 chars at line ${nearStart} of a 1 GiB file vs fs read of the same bytes`,
    metric: 'p50 ms',
    value: median(rs.subject),
    baseline: median(rs.baseline),
    target: { on: 'value', op: '<', limit: 50 },
    notes: `${rsContent.length} chars${rsOk ? '' : ' WRONG CONTENT'}; p99 ${round(percentile(rs.subject, 99))} ms; ${msNote(rs.subject)}`,
    detail: { p99: round(percentile(rs.subject, 99)) }
  }))
  ctx.log(`read near start: ${round(median(rs.subject))} vs ${round(median(rs.baseline))} ms`)

  // Deep: the tool has no byte offset, so a startLine near the end streams the whole file.
  const deepLine = big.lines - 1000
  const deepArgs = { path: 'big.txt', startLine: deepLine, endLine: deepLine + 299 }
  const rd = await timePair(() => call(readFileTool, bigWs, deepArgs), () => rawScanToLine(bigFile, deepLine, READ_CHARS), { warmup: 0, reps: 3, signal })
  const rdCheck = await call(readFileTool, bigWs, { ...deepArgs, maxChars: 64 })
  const rdOk = String(rdCheck.content).startsWith(String(deepLine).padStart(12, '0'))
  rows.push(makeRow({
    id: '5.5',
    name: `read_file 12,000 chars at line ${deepLine} (~1 GiB deep) vs raw Node '\\n' scan to that line`,
    metric: 'median ms',
    value: median(rd.subject),
    baseline: median(rd.baseline),
    target: { on: 'value', op: '<', limit: 50 },
    notes: `startLine is line-addressed: the whole file before it is read and split${rdOk ? '' : ' WRONG CONTENT'}; ${msNote(rd.subject)}`
  }))
  ctx.log(`read deep: ${round(median(rd.subject))} vs ${round(median(rd.baseline))} ms`)

  // Measured out of order (bash first); reported in row order.
  return rows.sort((a, b) => a.id.localeCompare(b.id, 'en', { numeric: true }))
}
