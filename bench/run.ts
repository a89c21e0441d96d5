/**
 * `npm run bench [-- module...]`: runs the benchmark modules in order, prints a markdown
 * table on stdout and writes bench/results/latest.json. BENCH_REPEAT=N (1-9) runs every module N
 * times and reports, per row, the run whose judged figure is the median (bench/stats.ts medianOfRuns). A missed target never fails the run; a
 * crashed module does (exit code 1, after the other modules ran and everything was cleaned up).
 */
import { execFileSync } from 'node:child_process'
import { existsSync } from 'node:fs'
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { markdownTable } from './report.js'
import { makeRow, medianOfRuns, round } from './stats.js'
import type { BenchContext, BenchRun, Row } from './types.js'

interface ModuleSpec {
  /** File name under bench/ (without .ts) and the CLI filter name. */
  key: string
  /** Row number (the table's first column). */
  row: number
  title: string
  /** Wall-clock budget; the module's signal aborts then, and it is declared crashed 30 s later. */
  budgetMs: number
}

/** In row order (then workspaces). A module whose file does not exist yet is reported as "not yet built". */
const MODULES: readonly ModuleSpec[] = [
  { key: 'invoke', row: 1, title: 'POST /invoke of a local function vs a bare Fastify route; the same with tracing on', budgetMs: 150_000 },
  { key: 'mcp', row: 2, title: 'POST /invoke of a streamable-HTTP MCP tool vs the SDK client directly', budgetMs: 80_000 },
  { key: 'mcp-modern', row: 2, title: 'The same hop in the 2026-07-28 revision; first listings over 2026-07-28 servers', budgetMs: 120_000 },
  {
    key: 'mcp-endpoint',
    row: 2,
    title: 'The gateway\'s own /mcp (SDK client -> /mcp -> echo server) in both eras vs the SDK client directly; POST /invoke beside it',
    budgetMs: 160_000
  },
  { key: 'stdio', row: 3, title: 'POST /invoke of a stdio MCP tool vs supergateway + SDK client', budgetMs: 60_000 },
  { key: 'tools-list', row: 4, title: 'GET /tools, 20 servers x 25 tools, warm and cold', budgetMs: 60_000 },
  { key: 'builtins', row: 5, title: 'Built-in tools on a 50,000-file tree', budgetMs: 200_000 },
  { key: 'scale', row: 6, title: '10,000 tenants x 3 servers in Redis', budgetMs: 160_000 },
  { key: 'search', row: 7, title: 'GET /tools/search over 1,000 tools; index build; recall@5 and MRR of the eval set', budgetMs: 120_000 },
  { key: 'code-mode', row: 8, title: 'code mode: 20 chained MCP calls in one run_tools_script vs one by one (the gateway\'s side alone)', budgetMs: 120_000 },
  { key: 'replay', row: 9, title: 'A recorded coding-agent session (~190 calls) through POST /invoke vs the same operations done directly', budgetMs: 300_000 },
  { key: 'guardrails', row: 18, title: 'Guardrails: CPU per call with every check on a 10 KiB result; the injection check on its corpus', budgetMs: 60_000 },
  { key: 'workspaces-checkpoint', row: 14, title: 'Workspace checkpoint and restore, 50,000-file tree, 10 files changed', budgetMs: 240_000 },
  { key: 'workspaces-archive', row: 14, title: 'Workspace download vs tar czf, upload vs tar xzf, 50,000-file tree', budgetMs: 500_000 },
  { key: 'journal', row: 16, title: 'POST /invoke with JOURNAL=full vs JOURNAL=off: CPU per request', budgetMs: 150_000 },
  { key: 'policy', row: 16, title: 'Warm GET /tools under a 50-pattern tool policy vs none', budgetMs: 90_000 },
  { key: 'cluster', row: 17, title: 'cluster: bash logs forwarded to the owner instance; registry change propagation between instances', budgetMs: 120_000 }
]

const GRACE_MS = 30_000
const here = path.dirname(fileURLToPath(import.meta.url))

function log (msg: string): void {
  process.stderr.write(`[bench] ${msg}\n`)
}

function placeholder (spec: ModuleSpec, notes: string): Row {
  return makeRow({ id: String(spec.row), name: spec.title, metric: '-', value: null, baseline: null, target: null, notes })
}

function gitCommit (): string {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: here, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()
  } catch {
    return 'unknown'
  }
}

async function runModule (spec: ModuleSpec, file: string): Promise<{ rows: Row[], crashed: boolean }> {
  const started = Date.now()
  const tmpDir = await mkdtemp(path.join(os.tmpdir(), `tg-bench-${spec.key}-`))
  await chmod(tmpDir, 0o700)
  const cleanups: Array<() => unknown> = []
  const ac = new AbortController()
  const deadline = started + spec.budgetMs
  const budgetTimer = setTimeout(() => ac.abort(), spec.budgetMs)
  const ctx: BenchContext = {
    tmpDir,
    signal: ac.signal,
    deadline,
    log: (msg) => log(`${spec.key}: ${msg}`),
    defer: (fn) => { cleanups.push(fn) }
  }
  let rows: Row[]
  let crashed = false
  let hardTimer: NodeJS.Timeout | undefined
  try {
    const mod = await import(pathToFileURL(file).href) as { run?: BenchRun }
    if (typeof mod.run !== 'function') throw new Error(`bench/${spec.key}.ts does not export run(ctx)`)
    const overdue = new Promise<never>((_resolve, reject) => {
      hardTimer = setTimeout(() => reject(new Error(`still running ${GRACE_MS / 1000} s after its ${spec.budgetMs / 1000} s budget`)), spec.budgetMs + GRACE_MS)
    })
    rows = await Promise.race([mod.run(ctx), overdue])
  } catch (err) {
    crashed = true
    const msg = err instanceof Error ? err.message : String(err)
    log(`${spec.key}: CRASHED: ${err instanceof Error ? err.stack ?? msg : msg}`)
    rows = [placeholder(spec, `crashed: ${msg}`)]
  } finally {
    clearTimeout(budgetTimer)
    clearTimeout(hardTimer)
    ac.abort()
    for (const fn of cleanups.reverse()) {
      try {
        await fn()
      } catch (err) {
        log(`${spec.key}: cleanup failed: ${(err as Error).message}`)
      }
    }
    await rm(tmpDir, { recursive: true, force: true, maxRetries: 3 })
  }
  log(`${spec.key}: done in ${((Date.now() - started) / 1000).toFixed(1)} s`)
  return { rows, crashed }
}

async function main (): Promise<number> {
  const filters = process.argv.slice(2).filter((a) => !a.startsWith('-'))
  const unknown = filters.filter((f) => !MODULES.some((m) => m.key === f))
  if (unknown.length > 0) {
    log(`unknown module(s): ${unknown.join(', ')}; known: ${MODULES.map((m) => m.key).join(', ')}`)
    return 2
  }
  const selected = filters.length === 0 ? MODULES : MODULES.filter((m) => filters.includes(m.key))
  // BENCH_REPEAT=3: every module runs three times and each row is its median run, so one noisy run does not decide.
  const repeat = Number(process.env.BENCH_REPEAT ?? '1')
  if (!Number.isInteger(repeat) || repeat < 1 || repeat > 9) {
    log(`BENCH_REPEAT must be an integer from 1 to 9, got ${process.env.BENCH_REPEAT ?? ''}`)
    return 2
  }
  const started = new Date()
  const loadBefore = os.loadavg()[0] ?? 0
  const rows: Row[] = []
  let crashes = 0
  for (const spec of selected) {
    const file = path.join(here, `${spec.key}.ts`)
    if (!existsSync(file)) {
      rows.push(placeholder(spec, 'not yet built'))
      continue
    }
    const runs: Row[][] = []
    for (let i = 1; i <= repeat; i++) {
      log(`${spec.key}: starting${repeat > 1 ? ` run ${i} of ${repeat}` : ''} (budget ${spec.budgetMs / 1000} s)`)
      const r = await runModule(spec, file)
      runs.push(r.rows)
      if (r.crashed) crashes++
    }
    rows.push(...medianOfRuns(runs))
  }

  const cpus = os.cpus()
  const result = {
    date: started.toISOString(),
    durationMs: Date.now() - started.getTime(),
    commit: gitCommit(),
    modules: selected.map((m) => m.key),
    repeat,
    machine: {
      nproc: os.availableParallelism(),
      cpu: cpus[0]?.model ?? 'unknown',
      memGiB: Math.round(os.totalmem() / 2 ** 30),
      platform: `${os.type()} ${os.release()} ${os.arch()}`,
      node: process.version,
      // 1-minute load average at start and end: this machine is shared, read the figures with it.
      load: [round(loadBefore), round(os.loadavg()[0] ?? 0)]
    },
    rows
  }
  const resultsDir = path.join(here, 'results')
  await mkdir(resultsDir, { recursive: true })
  await writeFile(path.join(resultsDir, 'latest.json'), JSON.stringify(result, null, 2) + '\n')
  const m = result.machine
  process.stdout.write(`\n${markdownTable(rows)}\n\n` +
    `${result.date.slice(0, 10)}, commit ${result.commit}, ${m.nproc} vCPU (${m.cpu}), ${m.memGiB} GiB, ${m.platform}, Node ${m.node}, load ${m.load.join(' -> ')}; ` +
    `${(result.durationMs / 1000).toFixed(0)} s. Written to bench/results/latest.json.\n`)
  return crashes > 0 ? 1 : 0
}

function finish (code: number): void {
  process.exitCode = code
  // A crashed module may have left a handle open: do not hang, but let stdout drain first.
  setTimeout(() => process.exit(code), 5000).unref()
}

main().then(finish, (err: unknown) => {
  log(`runner crashed: ${err instanceof Error ? err.stack ?? err.message : String(err)}`)
  finish(1)
})
