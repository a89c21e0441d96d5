import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, readdir, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { comparePaths } from '../../../../../src/builtin/tools/walk.js'
import { createGrepTool, grepTool } from '../../../../../src/builtin/tools/grep/tool.js'
import { HAS_RG, searchTree, wideTree } from '../../../../helpers/search-tree.js'

test('grep: matches, counts, include, caseInsensitive, skips', async (t) => {
  const { run } = await searchTree(t)
  const r = await run(createGrepTool({ engine: 'node' }), { pattern: 'TODO' })
  const files = (r.matches as Array<{ file: string }>).map((m) => m.file)
  assert.ok(files.includes('.hidden/h.ts') && files.includes('.env'))
  for (const skipped of ['.git/config', 'node_modules/m/index.js', 'bin.dat', 'big.txt', 'link-to-a.ts']) {
    assert.ok(!files.includes(skipped), skipped)
  }
  assert.ok(!files.some((f) => f.startsWith('link-dir')))
  // The binary sniff covers the first 8 KiB only (as git does): a later NUL does not hide the file.
  assert.ok(files.includes('late-nul.txt') && files.includes('exact.txt'))
  const bad = (r.matches as Array<{ file: string, content: string }>).filter((m) => m.file === 'bad-utf8.txt')
  assert.deepEqual(bad.map((m) => m.content), ['TODO ok line'])
  const long = (r.matches as Array<{ file: string, content: string }>).find((m) => m.file === 'long.txt')
  assert.equal(long?.content.length, 503)
  const crlf = (r.matches as Array<{ file: string, content: string, line: number }>).find((m) => m.file === 'b.js')
  assert.deepEqual(crlf, { file: 'b.js', line: 1, content: 'const b = "TODO later"' })

  const ts = await run(createGrepTool({ engine: 'node' }), { pattern: 'todo', include: '*.{ts,tsx}', caseInsensitive: true })
  assert.deepEqual((ts.matches as Array<{ file: string, line: number }>).map((m) => `${m.file}:${m.line}`),
    ['.hidden/h.ts:1', 'a.ts:2', 'src/c.ts:2', 'src/deep/d.ts:1', 'src/deep/d.ts:3', 'src/deep/e.tsx:1'])
  assert.equal(ts.filesMatched, 5)
  assert.equal(ts.totalMatches, 6)
  assert.equal(ts.filesSearched, 5)
  const few = await run(createGrepTool({ engine: 'node' }), { pattern: 'TODO', maxResults: 2 })
  assert.equal((few.matches as unknown[]).length, 2)
  assert.equal(few.truncated, true)
  assert.ok((few.totalMatches as number) > 2)
})

test('grep: invalid JS regex and bad include are clean errors', async (t) => {
  const { run } = await searchTree(t)
  await assert.rejects(run(grepTool, { pattern: '(unclosed' }), /Invalid regular expression \(JavaScript syntax\)/)
  await assert.rejects(run(grepTool, { pattern: '(?i)x' }), /Invalid regular expression/)
  await assert.rejects(run(grepTool, { pattern: 'x', include: 'src/*.ts' }), /file-name glob/)
})

test('grep: a single file as path', async (t) => {
  const { run } = await searchTree(t)
  const r = await run(grepTool, { pattern: 'TODO', path: 'src/deep/d.ts' })
  assert.deepEqual(r, {
    pattern: 'TODO',
    path: 'src/deep/d.ts',
    matches: [{ file: 'src/deep/d.ts', line: 1, content: 'TODO deep' }, { file: 'src/deep/d.ts', line: 3, content: 'TODO again' }],
    filesSearched: 1,
    filesMatched: 1,
    totalMatches: 2,
    truncated: false
  })
})

test('grep: ripgrep and Node engines give identical results', { skip: !HAS_RG }, async (t) => {
  const { run } = await searchTree(t)
  const rg = createGrepTool({ engine: 'rg' })
  const node = createGrepTool({ engine: 'node' })
  const queries: Array<Record<string, unknown>> = [
    { pattern: 'TODO' },
    { pattern: 'todo', caseInsensitive: true },
    { pattern: 'TODO', include: '*.ts' },
    { pattern: 'TODO', include: '*.{ts,tsx,txt}', maxResults: 3 },
    { pattern: 'TODO', include: '!*.ts' },
    { pattern: '^TODO.*$' },
    { pattern: 'later"$' },
    { pattern: 'foo\\(\\d\\)' },
    { pattern: 'a.', maxResults: 1000 },
    { pattern: '[A-Z]{4}', path: 'src' },
    { pattern: 'no-such-thing' },
    { pattern: 'T', maxResults: 1 },
    { pattern: '.', maxResults: 5000 }
  ]
  for (const q of queries) {
    assert.deepEqual(await run(rg, q), await run(node, q), JSON.stringify(q))
  }
})

test('grep: filesSearched counts the same files with both engines, size cap and include applied', async (t) => {
  const { run } = await searchTree(t)
  // 17 regular files outside .git/node_modules; big.txt (10 MiB + 1 byte) is over the cap and not
  // counted, exact.txt (exactly 10 MiB) and empty.txt are; the two symlinks are not files.
  const engines = HAS_RG ? [createGrepTool({ engine: 'rg' }), createGrepTool({ engine: 'node' })] : [createGrepTool({ engine: 'node' })]
  for (const grep of engines) {
    assert.equal((await run(grep, { pattern: 'TODO' })).filesSearched, 17)
    assert.equal((await run(grep, { pattern: 'no-such-thing' })).filesSearched, 17)
    assert.equal((await run(grep, { pattern: 'TODO', include: '*.txt' })).filesSearched, 9)
    assert.equal((await run(grep, { pattern: 'TODO', path: 'src' })).filesSearched, 3)
  }
})

test('grep: a wide tree gives the same sorted results with both engines and in walk order', async (t) => {
  const { root, run } = await searchTree(t)
  await wideTree(root)
  const node = createGrepTool({ engine: 'node' })
  const all = await run(node, { pattern: '^hit', path: 'w', maxResults: 100_000 })
  const matches = all.matches as Array<{ file: string, line: number }>
  assert.equal(all.filesSearched, 13 * 3 * 13)
  assert.equal(all.filesMatched, 169)
  assert.equal(all.totalMatches, 338)
  const sorted = [...matches].sort((a, b) => comparePaths(a.file, b.file) || a.line - b.line)
  assert.deepEqual(matches, sorted)
  // maxResults keeps the first matches in walk order, not the first files read.
  const few = await run(node, { pattern: '^hit', path: 'w', maxResults: 7 })
  assert.deepEqual(few.matches, matches.slice(0, 7))
  assert.equal(few.totalMatches, 338)
  if (HAS_RG) {
    const rg = createGrepTool({ engine: 'rg' })
    for (const q of [{ pattern: '^hit', path: 'w', maxResults: 100_000 }, { pattern: 'hit', maxResults: 5 }, { pattern: 'miss', include: '*.txt' }]) {
      assert.deepEqual(await run(rg, q), await run(node, q), JSON.stringify(q))
    }
  }
})

test('grep: Node engine reads ahead within its byte budget (files bigger than the budget in total)', async (t) => {
  const { root, run } = await searchTree(t)
  // 5 x 9 MiB: more than the 32 MiB the engine holds at once, so reads wait for each other.
  const line = Buffer.from('x'.repeat(1023) + '\n')
  const body = Buffer.concat(Array.from({ length: 9 * 1024 }, () => line))
  for (let i = 0; i < 5; i++) {
    await mkdir(path.join(root, 'big', String(i)), { recursive: true })
    await writeFile(path.join(root, 'big', String(i), 'f.txt'), Buffer.concat([body, Buffer.from(`needle ${i}\n`)]))
  }
  const r = await run(createGrepTool({ engine: 'node' }), { pattern: 'needle', path: 'big' })
  assert.deepEqual((r.matches as Array<{ file: string, line: number }>).map((m) => `${m.file}:${m.line}`),
    [0, 1, 2, 3, 4].map((i) => `big/${i}/f.txt:${9 * 1024 + 1}`))
  assert.equal(r.filesSearched, 5)
})

test('grep: rg output split across many chunks parses as the Node engine reads it', { skip: !HAS_RG }, async (t) => {
  const { root, run } = await searchTree(t)
  await mkdir(path.join(root, 'chunks'))
  // A 2 MB matching line (one record over dozens of pipe reads), a file name holding a newline
  // and a NUL-free colon, and 20,000 short matches (output boundaries fall mid-record).
  await writeFile(path.join(root, 'chunks', 'long.txt'), `start ${'y'.repeat(2_000_000)} HIT end\nafter HIT\n`)
  await writeFile(path.join(root, 'chunks', 'new\nline:name.txt'), 'HIT in an odd name\n')
  await writeFile(path.join(root, 'chunks', 'many.txt'), Array.from({ length: 20_000 }, (_, i) => `HIT ${i} ${'é'.repeat(i % 9)}`).join('\n'))
  const rg = createGrepTool({ engine: 'rg' })
  const node = createGrepTool({ engine: 'node' })
  for (const q of [
    { pattern: 'HIT', path: 'chunks', maxResults: 100_000 },
    { pattern: 'HIT', path: 'chunks', maxResults: 3 },
    { pattern: 'odd', path: 'chunks' }
  ]) {
    const a = await run(rg, q)
    assert.deepEqual(a, await run(node, q), JSON.stringify(q))
  }
  const r = await run(rg, { pattern: 'HIT', path: 'chunks', maxResults: 100_000 })
  assert.equal(r.totalMatches, 20_003)
  assert.equal(r.filesSearched, 3)
})

test('grep: the ripgrep engine closes every directory and file its binary sniff opened', { skip: !HAS_RG }, async (t) => {
  const { run } = await searchTree(t)
  const rg = createGrepTool({ engine: 'rg' })
  // The first call starts the private sandbox (its own fds stay open).
  const first = await run(rg, { pattern: 'TODO' })
  assert.ok((first.filesMatched as number) > 3)
  const before = (await readdir('/proc/self/fd')).length
  for (let i = 0; i < 5; i++) await run(rg, { pattern: 'TODO' })
  assert.equal((await readdir('/proc/self/fd')).length, before)
})

test('grep (Node engine): an include glob backtracking catastrophically on names is matched off the loop, bounded, right', { timeout: 120_000 }, async (t) => {
  const { root, run } = await searchTree(t)
  await mkdir(path.join(root, 'evil'), { recursive: true })
  await writeFile(path.join(root, 'evil', 'a'.repeat(200)), 'TODO evil\n')
  const node = createGrepTool({ engine: 'node' })
  let ticks = 0
  const timer = setInterval(() => { ticks++ }, 10)
  t.after(() => { clearInterval(timer) })
  // Before: picomatch's RegExp ran on the event loop, C(200, 8) ways per name.
  await assert.rejects(run(node, { pattern: 'TODO', path: 'evil', include: '*a*a*a*a*a*a*a*a*b' }), /took too long to evaluate/)
  assert.ok(ticks > 0, 'the event loop kept turning while the include ran')
  const hit = await run(node, { pattern: 'TODO', path: 'evil', include: '*a*a*a*' })
  assert.deepEqual((hit.matches as Array<{ file: string }>).map((m) => m.file), [`evil/${'a'.repeat(200)}`])
  assert.deepEqual((await run(node, { pattern: 'TODO', include: '*x*y*z*' })).matches, [])
})
