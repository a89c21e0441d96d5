import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import fg from 'fast-glob'
import { globTool } from '../../../../src/builtin/tools/glob.js'
import { ToolError } from '../../../../src/builtin/types.js'
import { comparePaths } from '../../../../src/builtin/tools/walk.js'
import { searchTree, wideTree } from '../../../helpers/search-tree.js'

test('glob: standard globstar, sorted, files only, skips .git/node_modules, no symlinks', async (t) => {
  const { run } = await searchTree(t)
  assert.deepEqual(await run(globTool, { pattern: '**/*.ts' }), {
    pattern: '**/*.ts', path: '.', matches: ['.hidden/h.ts', 'a.ts', 'src/c.ts', 'src/deep/d.ts'], count: 4, truncated: false
  })
  assert.deepEqual((await run(globTool, { pattern: '*.ts' })).matches, ['a.ts'])
  assert.deepEqual((await run(globTool, { pattern: '**/*.{ts,tsx}', path: 'src' })).matches, ['src/c.ts', 'src/deep/d.ts', 'src/deep/e.tsx'])
  const all = await run(globTool, { pattern: '**/*' })
  const matches = all.matches as string[]
  assert.ok(!matches.some((m) => m.startsWith('.git/') || m.startsWith('node_modules/') || m.startsWith('link')))
  // Path order: "a/x.txt" sorts before "a.ts" (segment-wise), like a sorted tree walk.
  assert.ok(matches.indexOf('a/x.txt') < matches.indexOf('a.ts'))
  const limited = await run(globTool, { pattern: '**/*', maxResults: 2 })
  assert.equal(limited.count, 2)
  assert.equal(limited.truncated, true)
  assert.deepEqual(limited.matches, matches.slice(0, 2))
})

test('glob: a search that starts at the base (a literal at it, a pattern without a literal prefix) on a directory, a file and a link as base', async (t) => {
  const { root, run } = await searchTree(t)
  assert.deepEqual((await run(globTool, { pattern: 'a.ts' })).matches, ['a.ts'])
  assert.deepEqual((await run(globTool, { pattern: 'c.ts', path: 'src' })).matches, ['src/c.ts'])
  assert.deepEqual((await run(globTool, { pattern: 'nope.ts', path: 'src' })).matches, [])
  assert.deepEqual((await run(globTool, { pattern: '*.ts', path: 'src' })).matches, ['src/c.ts'])
  // A base that is a file: nothing below it, for a pattern as for a literal.
  assert.deepEqual(await run(globTool, { pattern: '**/*', path: 'a.ts' }), { pattern: '**/*', path: 'a.ts', matches: [], count: 0, truncated: false })
  assert.deepEqual((await run(globTool, { pattern: 'x', path: 'a.ts' })).matches, [])
  // A base that is a link to a directory in the tree is followed as a read is; one leading out is refused.
  await writeFile(path.join(root, 'src', 'deep', 'f.ts'), '')
  await symlink('src/deep', path.join(root, 'deeplink'))
  assert.deepEqual((await run(globTool, { pattern: '*.ts', path: 'deeplink' })).matches, ['deeplink/d.ts', 'deeplink/f.ts'])
  await symlink('/etc', path.join(root, 'out'))
  await assert.rejects(run(globTool, { pattern: '*', path: 'out' }), /escapes/)
})

test('glob: refuses absolute and .. patterns', async (t) => {
  const { run } = await searchTree(t)
  for (const pattern of ['/etc/*', '../*', 'src/../../*', '**/../x']) {
    await assert.rejects(run(globTool, { pattern }), ToolError)
  }
})

test('glob: a wide tree comes back in comparePaths order, the same files fast-glob finds', async (t) => {
  const { root, run } = await searchTree(t)
  await wideTree(root)
  const r = await run(globTool, { pattern: '**/*.txt', path: 'w', maxResults: 100_000 })
  const expected = (await fg.glob('**/*.txt', { cwd: path.join(root, 'w'), dot: true, onlyFiles: true, followSymbolicLinks: false }))
    .map((m) => `w/${m}`).sort(comparePaths)
  assert.equal(expected.length, 13 * 3 * 13)
  assert.deepEqual(r.matches, expected)
  const few = await run(globTool, { pattern: '**/*.txt', path: 'w', maxResults: 10 })
  assert.deepEqual(few.matches, expected.slice(0, 10))
  assert.equal(few.truncated, true)
})

test('glob: cancellation is a clean error', async (t) => {
  const { ws } = await searchTree(t)
  const ac = new AbortController()
  ac.abort()
  await assert.rejects(globTool.run({ pattern: '**/*' }, { workspace: ws, signal: ac.signal }), /Cancelled/)
})

test('glob: a pattern that backtracks catastrophically on file names is matched off the event loop, bounded, and right', { timeout: 120_000 }, async (t) => {
  const { root, run } = await searchTree(t)
  // The attack: names of 200 'a's and `*a*a*a*a*a*a*a*a*b`. picomatch's RegExp ([^/]*?a[^/]*?a...b)
  // tries C(200, 8) ways per name before failing: years on the event loop (2.7 s for 60 'a's and 6 stars).
  await mkdir(path.join(root, 'evil'), { recursive: true })
  for (let i = 0; i < 3; i++) await writeFile(path.join(root, 'evil', 'a'.repeat(200 - i)), '')
  await writeFile(path.join(root, 'evil', 'ab'), '')
  let ticks = 0
  const timer = setInterval(() => { ticks++ }, 10)
  t.after(() => { clearInterval(timer) })
  await assert.rejects(run(globTool, { pattern: 'evil/*a*a*a*a*a*a*a*a*b' }), /took too long to evaluate/)
  assert.ok(ticks > 0, 'the event loop kept turning while the pattern ran')
  // A complex pattern that is fine on these names is matched right, off the loop too.
  assert.deepEqual((await run(globTool, { pattern: 'evil/*a*b*' })).matches, ['evil/ab'])
  assert.deepEqual((await run(globTool, { pattern: '**/*a*a*b' })).matches, [])
  assert.equal(((await run(globTool, { pattern: 'evil/*a*' })).matches as string[]).length, 4)
  assert.deepEqual((await run(globTool, { pattern: 'e*/*a*b*' })).matches, ['evil/ab'])
})
