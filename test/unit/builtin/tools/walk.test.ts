import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { comparePaths, pathSortKey, sortPaths } from '../../../../src/builtin/tools/walk.js'

test('pathSortKey orders exactly like comparePaths', () => {
  const seg = fc.stringMatching(/^[a-zA-Z0-9._\- \u00e9\u00ff\u4e00\uE000\uFFFD\u{1F600}\u{10000}]{1,4}$/u)
  const p = fc.array(seg, { minLength: 1, maxLength: 4 }).map((s) => s.join('/'))
  fc.assert(fc.property(p, p, (a, b) => {
    const ka = pathSortKey(a)
    const kb = pathSortKey(b)
    assert.equal(Math.sign(ka < kb ? -1 : ka > kb ? 1 : 0), Math.sign(comparePaths(a, b)), `${a} | ${b}`)
  }), { numRuns: 5000 })
  const paths = ['a.ts', 'a/x.txt', 'a', 'é/1', '\uE000', '\u{1F600}', 'a-b/c', 'B', 'a/x']
  assert.deepEqual(sortPaths([...paths]), [...paths].sort(comparePaths))
})
