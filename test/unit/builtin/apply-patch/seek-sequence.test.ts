import { test } from 'node:test'
import assert from 'node:assert/strict'
import { normalisePunctuation, seekSequence, trim, trimEnd } from '../../../../src/builtin/apply-patch/seek-sequence.js'
import { prng } from '../../../../scripts/lib/prng.js'

test('seekSequence: four passes in order, from the cursor', () => {
  assert.equal(seekSequence(['foo', 'bar', 'baz'], ['bar', 'baz'], 0, false), 1)
  assert.equal(seekSequence(['foo   ', 'bar\t\t'], ['foo', 'bar'], 0, false), 0)
  assert.equal(seekSequence(['    foo   ', '   bar\t'], ['foo', 'bar'], 0, false), 0)
  assert.equal(seekSequence(['just one line'], ['too', 'many', 'lines'], 0, false), -1)
  assert.equal(seekSequence(['a', 'b', 'a'], ['a'], 1, false), 2)
  assert.equal(seekSequence(['a', 'b'], [], 1, false), 1)
  // An exact match later in the file wins over a fuzzy match earlier.
  assert.equal(seekSequence(['x ', 'x'], ['x'], 0, false), 1)
  // End of file: only a match ending at the last line counts.
  assert.equal(seekSequence(['a', 'b', 'a'], ['a'], 0, true), 2)
  assert.equal(seekSequence(['a', 'b'], ['a'], 0, true), -1)
})

test('seekSequence: Unicode punctuation folded in the last pass', () => {
  assert.equal(normalisePunctuation('\u201Chi\u201D \u2014 it\u2019s\u00A0ok'), '"hi" - it\'s ok')
  assert.equal(seekSequence(['const s = \u201Cx\u201D \u2013 1'], ['const s = "x" - 1'], 0, false), 0)
  assert.equal(seekSequence(['a\u2003b'], ['a b'], 0, false), 0)
  assert.equal(seekSequence(['a\u2003b'], ['a  b'], 0, false), -1)
})

/** The search as it was written first: every start position compared line by line (quadratic). */
function naiveSeek (lines: readonly string[], pattern: readonly string[], start: number, eof: boolean): number {
  if (pattern.length === 0) return start
  if (pattern.length > lines.length) return -1
  const last = lines.length - pattern.length
  const from = eof ? last : Math.max(0, start)
  if (from > last) return -1
  for (const key of [(s: string) => s, trimEnd, trim, normalisePunctuation]) {
    for (let i = from; i <= last; i++) {
      let j = 0
      while (j < pattern.length && key(lines[i + j] as string) === key(pattern[j] as string)) j++
      if (j === pattern.length) return i
    }
  }
  return -1
}

test('seekSequence: the same answers as comparing at every position, on random files and patterns of few distinct lines', () => {
  const rand = prng(35)
  const alphabet = ['a', 'a ', ' a', 'b', '\u201Cq\u201D', '"q"']
  const pick = (): string => alphabet[Math.floor(rand() * alphabet.length)] as string
  for (let n = 0; n < 3000; n++) {
    const lines = Array.from({ length: Math.floor(rand() * 30) }, pick)
    // Patterns cut from the file (so they are found, often after near misses) or made up.
    const from = Math.floor(rand() * (lines.length + 1))
    const pattern = rand() < 0.6 ? lines.slice(from, from + Math.floor(rand() * 6)) : Array.from({ length: Math.floor(rand() * 5) }, pick)
    const start = Math.floor(rand() * 8)
    const eof = rand() < 0.2
    assert.equal(seekSequence(lines, pattern, start, eof), naiveSeek(lines, pattern, start, eof), JSON.stringify({ lines, pattern, start, eof }))
  }
})

test('seekSequence: linear in the file and the pattern (a tenant\'s patch of near misses cannot hold the event loop)', { timeout: 120_000 }, () => {
  // The attack: 1,000,000 identical lines (2 MB, within the 10 MiB a patch may read) and a hunk of
  // 100,000 of them then one that is not there. Compared at every position, each of the four passes
  // costs 9e10 line comparisons (minutes; 5.3 s of a frozen gateway for a 100,000-line file and a
  // 10,000-line hunk, measured); scanned once per pass, milliseconds.
  const lines = Array.from({ length: 1_000_000 }, () => 'a')
  const pattern = [...Array.from({ length: 100_000 }, () => 'a'), 'b']
  assert.equal(seekSequence(lines, pattern, 0, false), -1)
  lines.push('b')
  assert.equal(seekSequence(lines, pattern, 0, false), 900_000)
  assert.equal(seekSequence(lines, pattern, 0, true), 900_000)
})
