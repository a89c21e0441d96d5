/**
 * `npm run soak -- 10m` (or `-- 600`, `-- --duration 90s`): the long soak. Runs the real
 * gateway (bubblewrap sandbox, loopback fixtures) for the given time with the loop of
 * scripts/lib/soak.ts, prints a line per sample and a summary, and exits 1 when the
 * resources did not stay flat, a call failed or answered 5xx, or something outlived the gateway.
 * Durations: plain seconds, or a number with s, m or h.
 */
import { judgeFlatness, mib, runSoak } from './lib/soak.js'
import type { SoakSample } from './lib/soak.js'
import type { CleanupScope } from './lib/gateway-process.js'

const USAGE = 'usage: npm run soak -- <duration>   (600, 90s, 10m, 1h; or --duration <duration>)'

function parseDuration (text: string | undefined): number | undefined {
  const m = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(text?.trim() ?? '')
  if (m === null) return undefined
  const ms = Number(m[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 's') as 's' | 'm' | 'h']
  return ms > 0 ? ms : undefined
}

function durationArg (argv: readonly string[]): string | undefined {
  const i = argv.findIndex((a) => a === '--duration' || a.startsWith('--duration='))
  if (i >= 0) return argv[i]?.includes('=') === true ? argv[i]?.slice('--duration='.length) : argv[i + 1]
  return argv.find((a) => !a.startsWith('-'))
}

function progress (s: SoakSample, errors: () => number): void {
  const kinds = Object.entries(s.fdsByKind).sort().map(([k, n]) => `${k} ${n}`).join(', ')
  process.stdout.write(
    `[soak] t=${String(Math.round(s.atMs / 1000)).padStart(5)}s  it=${String(s.iteration).padStart(5)}  ` +
    `calls=${String(s.calls).padStart(6)}  rss=${mib(s.rssBytes).padStart(10)}  heap=${mib(s.heapUsedBytes).padStart(9)}  fds=${String(s.fds).padStart(4)} (${kinds})  ` +
    `children=${s.children}  clients=${s.poolClients}  failures=${errors()}\n`)
}

const durationMs = parseDuration(durationArg(process.argv.slice(2)))
if (durationMs === undefined) {
  process.stderr.write(`${USAGE}\n`)
  process.exit(2)
}

// The script's own clean-up scope (what node:test's t.after is to the test): run in reverse on
// the way out, including on Ctrl-C.
const cleanups: Array<() => unknown> = []
const scope: CleanupScope = { after: (fn) => { cleanups.push(fn) } }
const runCleanups = async (): Promise<void> => {
  for (const fn of cleanups.splice(0).reverse()) {
    try { await fn() } catch (err) { process.stderr.write(`[soak] clean-up failed: ${String(err)}\n`) }
  }
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    process.stderr.write(`[soak] ${signal}: cleaning up\n`)
    runCleanups().finally(() => process.exit(130))
  })
}

// One sample every ~1/120 of the run (at least after every iteration, at most every 10 s).
const sampleEveryMs = Math.min(10_000, Math.floor(durationMs / 120))
process.stdout.write(`[soak] ${Math.round(durationMs / 1000)} s, a sample every ${sampleEveryMs} ms at least\n`)
let failuresSoFar = 0
let code = 1
try {
  const result = await runSoak({
    durationMs,
    scope,
    sampleEveryMs,
    onSample: (s) => progress(s, () => failuresSoFar)
  })
  failuresSoFar = result.failureCount
  const verdict = judgeFlatness(result.samples)
  const first = result.samples[0]
  const last = result.samples.at(-1)
  const rows: Array<[string, string]> = [
    ['duration', `${(result.durationMs / 1000).toFixed(0)} s`],
    ['iterations', String(result.iterations)],
    ['calls', `${result.calls} (${Object.entries(result.statusCounts).map(([s, n]) => `${s}: ${n}`).join(', ')})`],
    ['steps passed (time)', Object.entries(result.exercised).map(([k, n]) => `${k} ${n} (${((result.stepMs[k] ?? 0) / 1000).toFixed(0)} s)`).join(', ')],
    ['samples', `${result.samples.length} (${verdict.judged} judged after ${(verdict.warmupMs / 1000).toFixed(0)} s of warm-up)`],
    ['RSS start / end / max', `${mib(first?.rssBytes ?? 0)} / ${mib(last?.rssBytes ?? 0)} / ${mib(Math.max(...result.samples.map((s) => s.rssBytes)))}`],
    ['RSS trend (judged)', `${mib(verdict.rss.slopePerMin)}/min, ${mib(verdict.rss.projectedGrowth)} over the window (allowed ${mib(verdict.rss.allowed)})`],
    ['heap after GC start / end', `${mib(first?.heapUsedBytes ?? 0)} / ${mib(last?.heapUsedBytes ?? 0)}`],
    ['heap trend (judged)', verdict.heap === undefined ? 'no figures' : `${mib(verdict.heap.slopePerMin)}/min, ${mib(verdict.heap.projectedGrowth)} over the window (allowed ${mib(verdict.heap.allowed)})`],
    ['fds start / end', `${first?.fds ?? '?'} / ${last?.fds ?? '?'} (floors ${verdict.fds.first} -> ${verdict.fds.last}, allowed ${verdict.fds.allowed})`],
    ['children max / end', `${Math.max(...result.samples.map((s) => s.children))} / ${result.childrenAtEnd}`],
    ['pooled clients floors', `${verdict.poolClients.first} -> ${verdict.poolClients.last}`],
    ['5xx / failed checks', `${result.serverErrors} / ${result.failureCount}`],
    ['gateway exit / leftovers', `${String(result.exitCode)} / ${result.leftovers.length}`],
    ['warnings in the gateway log', String(result.warnings.count)]
  ]
  const problems = [
    ...verdict.problems,
    ...(result.serverErrors > 0 ? [`${result.serverErrors} responses 5xx`] : []),
    ...(result.failureCount > 0 ? [`${result.failureCount} failed checks`] : []),
    ...(result.childrenAtEnd !== 0 ? [`${result.childrenAtEnd} children left under the idle gateway`] : []),
    ...(result.exitCode !== 0 ? [`gateway exit code ${String(result.exitCode)}`] : []),
    ...(result.leftovers.length > 0 ? [`${result.leftovers.length} processes outlived the gateway`] : [])
  ]
  rows.push(['verdict', problems.length === 0 ? 'FLAT' : `NOT OK: ${problems.join('; ')}`])
  const width = Math.max(...rows.map(([k]) => k.length))
  process.stdout.write(`\n| ${'figure'.padEnd(width)} | value |\n|${'-'.repeat(width + 2)}|-------|\n`)
  for (const [k, v] of rows) process.stdout.write(`| ${k.padEnd(width)} | ${v} |\n`)
  for (const f of result.failures.slice(0, 10)) process.stdout.write(`[soak] failure at iteration ${f.iteration}, ${f.step} (${f.status}): ${f.detail}\n`)
  for (const l of result.leftovers) process.stdout.write(`[soak] left behind: ${l}\n`)
  for (const w of result.warnings.examples) process.stdout.write(`[soak] gateway warning: ${w}\n`)
  code = problems.length === 0 ? 0 : 1
} catch (err) {
  process.stderr.write(`[soak] crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`)
} finally {
  await runCleanups()
}
process.exit(code)
