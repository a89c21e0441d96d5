/**
 * The contract between the bench runner (bench/run.ts) and the benchmark modules (one per row:
 * bench/builtins.ts, later bench/invoke.ts, bench/mcp.ts, ...).
 */

/**
 * A target a row is judged against. `on` says which figure: the measured `value`, the `ratio`
 * value / baseline, or the `delta` value - baseline (e.g. "< 1 ms added p50").
 */
export interface Target {
  on: 'value' | 'ratio' | 'delta'
  op: '<' | '<=' | '>' | '>='
  limit: number
}

/** One line of the results table. Figures are medians or percentiles of repeated, interleaved runs. */
export interface Row {
  /** Stable id: the row number, then a sub-row ("5.1"). */
  id: string
  /** What is measured against what, e.g. "grep tool (rg engine) vs rg -n". */
  name: string
  /** Unit and statistic of value and baseline, e.g. "median ms", "p50 ms", "req/s". */
  metric: string
  /** The subject (the gateway side); null when not measured. */
  value: number | null
  /** The same statistic for the natural baseline, measured in the same run; null when there is none. */
  baseline: number | null
  /** value / baseline, when both exist. */
  ratio: number | null
  /** null for informational rows. */
  target: Target | null
  /** null when there is no target or the row was not measured (not built yet, crashed). */
  pass: boolean | null
  notes: string
  /** Extra figures worth keeping in the JSON (p99, sample counts, phase timings...). */
  detail?: Record<string, number | string | boolean>
}

/** What the runner hands to a module. Everything a module starts must be bounded and cleaned up. */
export interface BenchContext {
  /** A private temporary directory (mode 0700), removed recursively after the module ran. */
  tmpDir: string
  /** Aborted when the module's time budget is spent: stop measuring and return what you have. */
  signal: AbortSignal
  /** Epoch ms at which `signal` aborts. */
  deadline: number
  /** Progress to stderr (stdout carries the table). */
  log: (msg: string) => void
  /** Registers a cleanup (kill a process, close a server). Run in reverse order, even after a crash. */
  defer: (fn: () => unknown) => void
}

/** The shape every bench/<module>.ts exports. */
export type BenchRun = (ctx: BenchContext) => Promise<Row[]>
