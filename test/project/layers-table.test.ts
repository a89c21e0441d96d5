import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { readLayers, renderLayersTable, renderRepoLayersTable, withLayersTable } from '../../scripts/lib/layers.js'

// The table of docs/ARCHITECTURE.md#layers is rendered from scripts/layers.json (`npm run docs`),
// as the README's error table is from src/errors.ts: the doc once omitted gateway -> approvals.

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..')

test('the layers table of docs/ARCHITECTURE.md is the one rendered from scripts/layers.json (run npm run docs)', () => {
  const doc = readFileSync(join(repo, 'docs', 'ARCHITECTURE.md'), 'utf8')
  const table = /<!-- layers:start -->\n([\s\S]*?)\n<!-- layers:end -->/.exec(doc)?.[1]
  assert.ok(table !== undefined, 'the layers markers are missing')
  assert.equal(table, renderRepoLayersTable(repo))
})

test('every src unit has a row in scripts/layers.json, so the table lists every folder', () => {
  const layers = readLayers(repo)
  const units = readdirSync(join(repo, 'src'), { withFileTypes: true })
    .filter((e) => e.isDirectory() || (e.name.endsWith('.ts') && !layers.compositionRoot.files.includes(`src/${e.name}`)))
    .map((e) => e.name.replace(/\.ts$/, ''))
  assert.deepEqual(Object.keys(layers.units).sort(), units.sort())
})

test('the rendering: folder or file, nothing, any unit, pipes escaped; the markers are required', () => {
  const table = renderLayersTable({
    compositionRoot: { files: ['src/app.ts'], job: 'the root', imports: 'anything' },
    units: { errors: { imports: [], job: 'codes | classes' }, tools: { imports: ['errors'], job: 'router' }, services: { imports: ['*'], job: 'wiring' } },
    outside: { 'routes/': { job: 'HTTP', imports: 'the domain' } }
  }, (unit) => unit === 'tools')
  assert.equal(table, [
    '| folder | its job | may import (inside `src/`) |',
    '|---|---|---|',
    '| `src/errors.ts` | codes \\| classes | nothing |',
    '| `src/tools/` | router | errors |',
    '| `src/services.ts` | wiring | any domain unit |',
    '| `src/app.ts` | the root | anything |',
    '| `routes/` | HTTP | the domain |'
  ].join('\n'))
  assert.equal(withLayersTable('a\n<!-- layers:start -->\nold\n<!-- layers:end -->\nb', 'new'), 'a\n<!-- layers:start -->\nnew\n<!-- layers:end -->\nb')
  assert.throws(() => withLayersTable('no markers', 'new'), /markers are missing/)
})
