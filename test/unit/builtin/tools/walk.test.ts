import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { mkdir, mkdtemp, open, readdir, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { comparePaths, pathSortKey, sortPaths, walkDirs } from '../../../../src/builtin/tools/walk.js'

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

/** A tree of `width` x `width` directories with two files each, a skipped dir, a link to a dir. */
async function dirTree (t: { after: (fn: () => Promise<void>) => void }, width: number): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), 'walk-dirs-'))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  for (let i = 0; i < width; i++) {
    for (let j = 0; j < width; j++) {
      const d = path.join(root, `d${i}`, `e${j}`)
      await mkdir(d, { recursive: true })
      await writeFile(path.join(d, 'a.txt'), 'a')
      await writeFile(path.join(d, 'b.txt'), 'b')
    }
  }
  await mkdir(path.join(root, 'd0', 'skipme', 'x'), { recursive: true })
  await writeFile(path.join(root, 'd0', 'skipme', 'x', 'no.txt'), 'no')
  await symlink(path.join(root, 'd1'), path.join(root, 'd0', 'link'))
  return root
}

const openFds = async (): Promise<number> => (await readdir('/proc/self/fd')).length

test('walkDirs: concurrent walk sees every directory once, skips, never enters links, closes every fd', async (t) => {
  const root = await dirTree(t, 12)
  const base = await open(root, 'r')
  t.after(async () => { await base.close() })
  const before = await openFds()
  const files: string[] = []
  const prefixes: string[] = []
  const stopped = await walkDirs(base, { skip: new Set(['skipme']) }, (prefix, entries) => {
    prefixes.push(prefix)
    for (const d of entries) if (d.isFile()) files.push(prefix === '' ? d.name : `${prefix}/${d.name}`)
    return true
  })
  assert.equal(stopped, false)
  assert.equal(await openFds(), before)
  assert.equal(files.length, 12 * 12 * 2)
  assert.equal(new Set(prefixes).size, prefixes.length)
  assert.equal(prefixes.length, 1 + 12 + 12 * 12)
  assert.ok(!prefixes.some((p) => p.includes('skipme') || p.includes('link')))

  const shallow: string[] = []
  await walkDirs(base, { maxDepth: 2 }, (prefix) => { shallow.push(prefix); return true })
  assert.equal(shallow.length, 1 + 12)
})

test('walkDirs: stopping early or on abort resolves true with every fd closed', async (t) => {
  const root = await dirTree(t, 12)
  const base = await open(root, 'r')
  t.after(async () => { await base.close() })
  const before = await openFds()
  let seen = 0
  assert.equal(await walkDirs(base, {}, () => ++seen < 20), true)
  assert.ok(seen >= 20 && seen < 1 + 12 + 12 * 12, String(seen))
  assert.equal(await openFds(), before)

  const ac = new AbortController()
  let visited = 0
  assert.equal(await walkDirs(base, { signal: ac.signal }, () => { if (++visited === 5) ac.abort(); return true }), true)
  assert.equal(await openFds(), before)

  await assert.rejects(walkDirs(base, {}, (prefix) => { if (prefix !== '') throw new Error('boom'); return true }), /boom/)
  assert.equal(await openFds(), before)
})
