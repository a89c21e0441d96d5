import { test } from 'node:test'
import assert from 'node:assert/strict'
import { makeRow, medianOfRuns } from '../../bench/stats.js'
import type { Row } from '../../bench/types.js'

// BENCH_REPEAT: each row of the table is the median run of a module run N times.

const row = (id: string, value: number | null, baseline: number | null, on: 'value' | 'ratio' | 'delta' = 'ratio'): Row =>
  makeRow({ id, name: `row ${id}`, metric: 'ms', value, baseline, target: { on, op: '<', limit: 2 }, notes: `v=${value}` })

test('one run passes through unchanged', () => {
  const rows = [row('1.1', 3, 2)]
  assert.deepEqual(medianOfRuns([rows]), rows)
})

test('three runs: per id the whole row of the median run by its target\'s figure, every run\'s figure noted', () => {
  const runs = [
    [row('1.1', 9, 3), row('2.1', 5, 1, 'delta'), row('3.1', 7, null, 'value')],
    [row('1.1', 4, 2), row('2.1', 2, 1, 'delta'), row('3.1', 9, null, 'value')],
    [row('1.1', 5, 1), row('2.1', 8, 1, 'delta'), row('3.1', 8, null, 'value')]
  ]
  const out = medianOfRuns(runs)
  assert.deepEqual(out.map((r) => r.id), ['1.1', '2.1', '3.1'])
  // Ratios 3, 2, 5: the median is 3 (run 1); value and baseline stay that run's pair.
  assert.deepEqual([out[0]?.value, out[0]?.baseline, out[0]?.ratio], [9, 3, 3])
  // Deltas 4, 1, 7: the median is 4 (run 1).
  assert.deepEqual([out[1]?.value, out[1]?.baseline], [5, 1])
  // Values 7, 9, 8: the median is 8 (run 3).
  assert.equal(out[2]?.value, 8)
  assert.match(out[0]?.notes ?? '', /^median of 3 runs by ratio \(3, 2, 5\); v=9$/)
  assert.equal(out[0]?.pass, false)
  assert.equal(out[1]?.detail?.runs, 3)
})

test('unmeasured runs do not count; a row only some runs have is kept', () => {
  const out = medianOfRuns([
    [row('1.1', null, null), row('9.9', 1, 1)],
    [row('1.1', 6, 2)],
    [row('1.1', 2, 2)]
  ])
  assert.deepEqual(out.map((r) => r.id), ['1.1', '9.9'])
  // Ratios 3 and 1 from the two measured runs: the lower middle, 1.
  assert.equal(out[0]?.value, 2)
  assert.equal(out[1]?.value, 1)
})
