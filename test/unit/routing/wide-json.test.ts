import { test } from 'node:test'
import assert from 'node:assert/strict'
import { hasObjectWiderThan, MAX_OBJECT_MEMBERS } from '../../../src/routing/wide-json.js'
import { prng } from '../../../scripts/lib/prng.js'

/** The most members of any object in a parsed value (the reference the scan of the text must agree with). */
function widest (value: unknown): number {
  if (value === null || typeof value !== 'object') return 0
  const children = Array.isArray(value) ? value : Object.values(value)
  const own = Array.isArray(value) ? 0 : children.length
  return children.reduce((max: number, v) => Math.max(max, widest(v)), own)
}

// Strings hold what the scan must not take for structure: quotes, backslashes, colons, brackets, escaped JSON.
const PIECES = ['a', ':', '"', '\\', '{', '}', '[', ']', '\\"', '":', '{"k":1}', '\n', 'é', '😀', ' ']

function randomValue (rand: () => number, depth: number): unknown {
  const r = rand()
  if (depth > 4 || r < 0.3) {
    if (r < 0.1) return Math.floor(rand() * 1000) - 500
    if (r < 0.15) return rand() < 0.5 ? null : true
    return Array.from({ length: Math.floor(rand() * 6) }, () => PIECES[Math.floor(rand() * PIECES.length)]).join('')
  }
  const n = Math.floor(rand() * 8)
  if (r < 0.6) return Array.from({ length: n }, () => randomValue(rand, depth + 1))
  const o: Record<string, unknown> = {}
  for (let i = 0; i < n; i++) o[`${randomValue(rand, 9) as string}${i}`] = randomValue(rand, depth + 1)
  return o
}

test('the scan finds the widest object as a parse does, on random JSON with structure characters inside strings, compact and indented', () => {
  const rand = prng(34)
  for (let i = 0; i < 3000; i++) {
    const value = randomValue(rand, 0)
    const width = widest(value)
    for (const text of [JSON.stringify(value), JSON.stringify(value, null, 2)]) {
      for (const limit of [0, 1, 2, 3, 5, 7]) {
        assert.equal(hasObjectWiderThan(text, limit), width > limit, `${text} (limit ${limit}, widest ${width})`)
      }
    }
  }
})

test('the bound is MAX_OBJECT_MEMBERS by default; a text too short to hold that many members is not scanned; broken JSON gets an answer', () => {
  const members = (n: number): string => `{${Array.from({ length: n }, (_, i) => `"${i.toString(36)}":0`).join(',')}}`
  assert.equal(hasObjectWiderThan(members(MAX_OBJECT_MEMBERS)), false)
  assert.equal(hasObjectWiderThan(members(MAX_OBJECT_MEMBERS + 1)), true)
  // Repeated keys count: the text holds them whatever the parse keeps.
  assert.equal(hasObjectWiderThan(`{${'"a":0,'.repeat(MAX_OBJECT_MEMBERS)}"a":0}`), true)
  // A wide object nested in arrays and objects.
  assert.equal(hasObjectWiderThan(`[{"x":[1,2,{"y":${members(MAX_OBJECT_MEMBERS + 1)}}]}]`), true)
  // Not JSON, cut in a string, unbalanced: an answer, no throw (the parser says what is wrong).
  for (const text of ['"'.repeat(100_000), '\\'.repeat(100_001), ':'.repeat(100_000), `{${':'.repeat(100_000)}`, `]]]}}${'{"a":1,'.repeat(20_000)}`]) {
    assert.equal(typeof hasObjectWiderThan(text), 'boolean')
  }
  assert.equal(hasObjectWiderThan(`{${':'.repeat(100_000)}`), true)
  assert.equal(hasObjectWiderThan(`[${':'.repeat(100_000)}]`), false)
})
