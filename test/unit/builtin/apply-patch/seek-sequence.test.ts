import { test } from 'node:test'
import assert from 'node:assert/strict'
import { normalisePunctuation, seekSequence } from '../../../../src/builtin/apply-patch/seek-sequence.js'

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
