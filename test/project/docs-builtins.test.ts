import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { BUILTIN_NAMES } from '../../src/naming/builtin-names.js'

// The built-ins are BUILTIN_NAMES (docs/ARCHITECTURE.md#add-a-builtin): the docs list them where
// they list them, and never write their count, which went stale in six places when it was written.

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const read = (path: string): string => readFileSync(join(repo, path), 'utf8')

test("the README's tier 1 row names exactly BUILTIN_NAMES, in their order", () => {
  const row = read('README.md').split('\n').find((l) => l.startsWith('| 1 | built-in coding tools:'))
  assert.ok(row !== undefined, 'the tier table has no tier 1 row')
  const names = [...(row.split('|')[2] ?? '').matchAll(/`([a-z_]+)`/g)].map((m) => m[1])
  assert.deepEqual(names, [...BUILTIN_NAMES])
})

test('README, RELIABILITY and docs/ never write the number of built-ins', () => {
  const n = '(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\\d+)'
  // "8 built-ins", "all eight\n  built-ins", "(all 8)", "the eight tools", "the 8 coding tools".
  const count = new RegExp(`\\b${n}\\s+built-?ins?\\b|\\ball\\s+${n}(?:\\)|\\s+built-?ins?\\b)|\\bthe\\s+${n}\\s+(?:coding\\s+)?tools\\b`, 'gi')
  const docs = ['README.md', 'RELIABILITY.md', ...readdirSync(join(repo, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)]
  for (const doc of docs) {
    const found = [...read(doc).matchAll(count)].map((m) => m[0])
    assert.deepEqual(found, [], `${doc} writes a count of built-ins; name BUILTIN_NAMES instead`)
  }
})
