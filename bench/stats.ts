/** Timing and statistics helpers shared by the benchmark modules. */
import { performance } from 'node:perf_hooks'
import type { Row, Target } from './types.js'

/** Nearest-rank percentile (p in 0..100) of unsorted samples; NaN when empty. */
export function percentile (samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const rank = Math.ceil((p / 100) * sorted.length)
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] as number
}

export function median (samples: readonly number[]): number {
  if (samples.length === 0) return Number.NaN
  const sorted = [...samples].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 === 1 ? sorted[mid] as number : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2
}

/** Wall-clock milliseconds of one awaited call. */
export async function timeMs (fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now()
  await fn()
  return performance.now() - t0
}

/** CPU microseconds per iteration of `fn` over `n` iterations (user + system, this process), each awaited. */
export async function cpuPerCall (n: number, fn: () => unknown): Promise<number> {
  const before = process.cpuUsage()
  for (let i = 0; i < n; i++) await fn()
  const used = process.cpuUsage(before)
  return (used.user + used.system) / n
}

export interface PairOptions {
  /** Untimed runs of each side first (JIT, page cache, first spawn). */
  warmup: number
  reps: number
  /** Stop early (keeping what was measured) once this signal aborts; at least one rep always runs. */
  signal?: AbortSignal
}

/**
 * Times several calls round-robin, rotating which goes first each round, so that drift on a
 * shared, noisy machine hits every side alike. Returns the raw samples in ms, by name.
 */
export async function timeInterleaved<K extends string> (
  fns: Record<K, () => Promise<unknown>>,
  opts: PairOptions
): Promise<Record<K, number[]>> {
  const names = Object.keys(fns) as K[]
  const out = Object.fromEntries(names.map((n) => [n, [] as number[]])) as Record<K, number[]>
  for (let i = 0; i < opts.warmup; i++) {
    for (const n of names) await fns[n]()
  }
  for (let i = 0; i < opts.reps; i++) {
    if (i > 0 && opts.signal?.aborted === true) break
    for (let j = 0; j < names.length; j++) {
      const n = names[(i + j) % names.length] as K
      out[n].push(await timeMs(fns[n]))
    }
  }
  return out
}

/** timeInterleaved for a subject and its baseline. */
export async function timePair (
  subject: () => Promise<unknown>,
  baseline: () => Promise<unknown>,
  opts: PairOptions
): Promise<{ subject: number[], baseline: number[] }> {
  return await timeInterleaved({ subject, baseline }, opts)
}

export function judge (target: Target | null, value: number | null, baseline: number | null): boolean | null {
  if (target === null || value === null || !Number.isFinite(value)) return null
  let x: number
  if (target.on === 'value') {
    x = value
  } else {
    if (baseline === null || !Number.isFinite(baseline)) return null
    x = target.on === 'ratio' ? value / baseline : value - baseline
  }
  switch (target.op) {
    case '<': return x < target.limit
    case '<=': return x <= target.limit
    case '>': return x > target.limit
    case '>=': return x >= target.limit
  }
}

/** Builds a row, computing ratio and pass from value, baseline and target. */
export function makeRow (r: Omit<Row, 'ratio' | 'pass'>): Row {
  const ratio = r.value !== null && r.baseline !== null && r.baseline > 0 ? r.value / r.baseline : null
  return { ...r, ratio, pass: judge(r.target, r.value, r.baseline) }
}

/** Rounds for display and JSON: 3 significant digits below 100, integers above. */
export function round (x: number): number {
  if (!Number.isFinite(x)) return x
  if (Math.abs(x) >= 100) return Math.round(x)
  return Number(x.toPrecision(3))
}

/** The figure a row is judged on (its target's), or its ratio, else its value: what picks the median run. */
function judgedFigure (row: Row): number | null {
  const on = row.target?.on ?? (row.ratio !== null ? 'ratio' : 'value')
  if (row.value === null) return null
  if (on === 'value') return row.value
  if (row.baseline === null) return null
  return on === 'ratio' ? (row.baseline > 0 ? row.value / row.baseline : null) : row.value - row.baseline
}

/**
 * BENCH_REPEAT: a module run N times gives N rows per id; the result keeps, per id, the row of
 * the median run by its judged figure (a whole run's row, so value, baseline and ratio stay from
 * the same side-by-side measurement), with every run's figure in its notes and detail. Rows of
 * an id that some run lacks are kept from the runs that have them. Order: the first run's.
 */
export function medianOfRuns (runs: readonly Row[][]): Row[] {
  if (runs.length <= 1) return [...(runs[0] ?? [])]
  const ids: string[] = []
  for (const rows of runs) for (const r of rows) if (!ids.includes(r.id)) ids.push(r.id)
  return ids.map((id) => {
    const candidates = runs.map((rows) => rows.find((r) => r.id === id)).filter((r): r is Row => r !== undefined)
    const measured = candidates.filter((r) => judgedFigure(r) !== null)
    if (measured.length === 0) return candidates[0] as Row
    const sorted = [...measured].sort((a, b) => (judgedFigure(a) as number) - (judgedFigure(b) as number))
    const pick = sorted[(sorted.length - 1) >> 1] as Row
    const figures = measured.map((r) => round(judgedFigure(r) as number))
    const what = pick.target?.on ?? (pick.ratio !== null ? 'ratio' : 'value')
    return {
      ...pick,
      notes: `median of ${runs.length} runs by ${what} (${figures.join(', ')}); ${pick.notes}`,
      detail: { ...(pick.detail ?? {}), runs: runs.length, runFigures: figures.join(',') }
    }
  })
}
