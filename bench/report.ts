/** Renders rows as the markdown table printed by `npm run bench` and pasted into the README. */
import { round } from './stats.js'
import type { Row, Target } from './types.js'

function fmt (x: number | null): string {
  if (x === null || Number.isNaN(x)) return '-'
  return String(round(x))
}

export function formatTarget (t: Target | null): string {
  if (t === null) return '-'
  if (t.on === 'ratio') return `${t.op} ${t.limit}x`
  if (t.on === 'delta') return `${t.op} +${t.limit}`
  return `${t.op} ${t.limit}`
}

function cell (s: string): string {
  return s.replaceAll('|', '\\|').replaceAll('\n', ' ')
}

export function markdownTable (rows: readonly Row[]): string {
  const lines = [
    '| # | Row | Metric | Value | Baseline | Ratio | Target | Pass | Notes |',
    '|---|---|---|---:|---:|---:|---|---|---|'
  ]
  for (const r of rows) {
    const ratio = r.ratio === null ? '-' : `${fmt(r.ratio)}x`
    const pass = r.pass === null ? '-' : r.pass ? 'pass' : '**MISS**'
    lines.push(`| ${r.id} | ${cell(r.name)} | ${cell(r.metric)} | ${fmt(r.value)} | ${fmt(r.baseline)} | ${ratio} | ${formatTarget(r.target)} | ${pass} | ${cell(r.notes)} |`)
  }
  return lines.join('\n')
}
