import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// The import rules (no cycle, the domain never imports Fastify/plugins/routes, folder layers,
// scripts never import tests) are enforced by scripts/check-imports.mjs in `npm run lint`.
// These tests show it fails on each kind of violation, and passes on the repository itself.

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const script = join(repo, 'scripts', 'check-imports.mjs')

async function check (root: string): Promise<{ code: number, out: string }> {
  return await new Promise((resolve) => {
    execFile(process.execPath, [script, root], (err, stdout, stderr) => {
      resolve({ code: err ? (err.code as number) : 0, out: stdout + stderr })
    })
  })
}

async function tree (
  t: { after: (fn: () => Promise<void>) => void },
  files: Record<string, string>,
  layers: Record<string, string[]>,
  subLayers: Record<string, string[][]> = {}
): Promise<string> {
  const root = await mkdtemp(join(tmpdir(), 'tg-imports-'))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  await mkdir(join(root, 'scripts'), { recursive: true })
  const units = Object.fromEntries(Object.entries(layers).map(([unit, imports]) => {
    const rows = subLayers[unit]?.map((paths) => ({ paths, job: paths.join('+') }))
    return [unit, { imports, job: unit, ...(rows ? { layers: rows } : {}) }]
  }))
  await writeFile(join(root, 'scripts', 'layers.json'), JSON.stringify({ compositionRoot: { files: ['src/app.ts', 'src/server.ts'] }, units }))
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true })
    await writeFile(join(root, path), text)
  }
  return root
}

test('the repository itself passes the import rules', async () => {
  const { code, out } = await check(repo)
  assert.equal(code, 0, out)
  assert.match(out, /no cycle, layers and sub-layers respected, every allowance used/)
})

test('an import cycle fails the check, type-only imports included', async (t) => {
  const root = await tree(t, {
    'src/a/one.ts': "import type { Two } from './two.js'\nexport type One = Two\n",
    'src/a/two.ts': "import type { One } from './one.js'\nexport type Two = string | One[]\n",
    'src/a/ok.ts': 'export const ok = 1\n'
  }, { a: [] })
  const { code, out } = await check(root)
  assert.equal(code, 1)
  assert.match(out, /import cycle: src\/a\/one\.ts <-> src\/a\/two\.ts/)
})

test('the domain importing Fastify, plugins/ or routes/ fails; the composition root may', async (t) => {
  const root = await tree(t, {
    'src/tools/router.ts': "import Fastify from 'fastify'\nimport fp from 'fastify-plugin'\nexport const x = [Fastify, fp]\n",
    'src/tools/handler.ts': "import { y } from '../../routes/tools.js'\nexport const z = y\n",
    'routes/tools.ts': "import fastify from 'fastify'\nexport const y = fastify\n",
    'plugins/auth.ts': "import { z } from '../src/tools/handler.js'\nexport default z\n",
    'src/app.ts': "import Fastify from 'fastify'\nimport auth from '../plugins/auth.js'\nexport const app = [Fastify, auth]\n"
  }, { tools: [] })
  const { code, out } = await check(root)
  assert.equal(code, 1)
  assert.match(out, /src\/tools\/router\.ts: the domain imports 'fastify'/)
  assert.match(out, /src\/tools\/router\.ts: the domain imports 'fastify-plugin'/)
  assert.match(out, /src\/tools\/handler\.ts: the domain imports routes\/tools\.ts/)
  assert.doesNotMatch(out, /src\/app\.ts/)
})

test('a folder importing one that its layer row does not list fails, naming the row', async (t) => {
  const root = await tree(t, {
    'src/tools/router.ts': "import { run } from '../builtin/bash.js'\nexport const r = run\n",
    'src/builtin/bash.ts': "import { names } from '../naming/names.js'\nexport const run = names\n",
    'src/naming/names.ts': 'export const names = 1\n',
    'src/extra/x.ts': "import { names } from '../naming/names.js'\nexport const x = names\n"
  }, { tools: ['naming'], builtin: ['naming', 'tools'], naming: [] })
  const { code, out } = await check(root)
  assert.equal(code, 1)
  assert.match(out, /src\/tools\/router\.ts: 'tools' may not import 'builtin'/)
  assert.doesNotMatch(out, /^check-imports: src\/builtin\/bash\.ts/m)
  assert.match(out, /src\/extra\/x\.ts: src unit 'extra' has no row/)
})

test('scripts importing from test/ fails; bench may use test fixtures only', async (t) => {
  const root = await tree(t, {
    'scripts/soak.ts': "import { run } from '../test/helpers/soak.js'\nexport const s = run\n",
    'test/helpers/soak.ts': 'export const run = 1\n',
    'bench/mcp.ts': "import { f } from '../test/fixtures/mcp.js'\nimport { h } from '../test/helpers/soak.js'\nexport const b = [f, h]\n",
    'test/fixtures/mcp.ts': 'export const f = 1\n'
  }, {})
  const { code, out } = await check(root)
  assert.equal(code, 1)
  assert.match(out, /scripts\/soak\.ts: imports test\/helpers\/soak\.ts/)
  assert.match(out, /bench\/mcp\.ts: imports test\/helpers\/soak\.ts/)
  assert.doesNotMatch(out, /test\/fixtures\/mcp\.ts/)
})

test('a folder with an index.ts is entered through it from outside; inside, files import each other', async (t) => {
  const root = await tree(t, {
    'src/builtin/index.ts': "export { spawn } from './sandbox/index.js'\n",
    'src/builtin/sandbox/index.ts': "export { spawn } from './spawn.js'\n",
    'src/builtin/sandbox/spawn.ts': "import { probe } from './probe.js'\nexport const spawn = probe\n",
    'src/builtin/sandbox/probe.ts': 'export const probe = 1\n',
    'src/builtin/tools/bash.ts': "import { probe } from '../sandbox/probe.js'\nimport { spawn } from '../sandbox/index.js'\nexport const b = [probe, spawn]\n",
    'src/services.ts': "import { spawn } from './builtin/sandbox/index.js'\nimport { spawn as s2 } from './builtin/index.js'\nexport const x = [spawn, s2]\n"
  }, { builtin: [], services: ['*'] })
  const { code, out } = await check(root)
  assert.equal(code, 1)
  assert.match(out, /src\/builtin\/tools\/bash\.ts: imports src\/builtin\/sandbox\/probe\.ts from outside its folder; import src\/builtin\/sandbox\/index\.ts/)
  assert.match(out, /src\/services\.ts: imports src\/builtin\/sandbox\/index\.ts from outside its folder; import src\/builtin\/index\.ts/)
  assert.doesNotMatch(out, /src\/builtin\/sandbox\/spawn\.ts/)
  assert.doesNotMatch(out, /imports src\/builtin\/index\.ts from outside/)
  assert.equal(out.match(/from outside its folder/g)?.length, 2, out)
})

test('an allowance no file uses and a row without files fail, naming them; used ones and * pass', async (t) => {
  const root = await tree(t, {
    'src/tools/router.ts': "import { names } from '../naming/names.js'\nexport const r = names\n",
    'src/naming/names.ts': 'export const names = 1\n',
    'src/services.ts': "import { r } from './tools/router.js'\nexport const s = r\n"
  }, { tools: ['naming', 'errors'], naming: [], services: ['*'], gone: [] })
  const { code, out } = await check(root)
  assert.equal(code, 1)
  assert.match(out, /scripts\/layers\.json: 'tools' may import 'errors' but none of its files does; remove the allowance/)
  assert.match(out, /scripts\/layers\.json: the row 'gone' names no src unit/)
  assert.doesNotMatch(out, /'tools' may import 'naming'/)
  assert.doesNotMatch(out, /'services' may import/)
  assert.equal(out.match(/^check-imports: /gm)?.length, 2, out)
})

test('inside a unit with sub-layers, a file importing a higher sub-layer fails; a file in none and an empty sub-layer fail', async (t) => {
  const root = await tree(t, {
    'src/builtin/types.ts': 'export type W = string\n',
    'src/builtin/workspace/fd.ts': "import type { W } from '../types.js'\nimport { bash } from '../tools/bash.js'\nexport const fd: W = String(bash)\n",
    'src/builtin/tools/bash.ts': "import type { W } from '../types.js'\nexport const bash: W = 'bash'\n",
    'src/builtin/tools/edit.ts': "import { fd } from '../workspace/fd.js'\nexport const edit = fd\n",
    'src/builtin/stray.ts': 'export const stray = 1\n'
  }, { builtin: [] }, { builtin: [['types.ts'], ['workspace/'], ['sandbox/'], ['tools/']] })
  const { code, out } = await check(root)
  assert.equal(code, 1)
  assert.match(out, /src\/builtin\/workspace\/fd\.ts: the sub-layer 'builtin\/workspace\/' may not import 'builtin\/tools\/' \(src\/builtin\/tools\/bash\.ts\), a higher one/)
  assert.match(out, /src\/builtin\/stray\.ts: in no sub-layer of 'builtin'/)
  assert.match(out, /the sub-layer 'builtin\/sandbox\/' has no file; remove it/)
  assert.doesNotMatch(out, /^check-imports: src\/builtin\/tools\//m)
  assert.equal(out.match(/^check-imports: /gm)?.length, 3, out)
})
