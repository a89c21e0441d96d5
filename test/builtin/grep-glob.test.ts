import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmod, mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import fc from 'fast-check'
import fg from 'fast-glob'
import { globTool } from '../../src/builtin/tools/glob.js'
import { comparePaths, pathSortKey, sortPaths } from '../../src/builtin/tools/walk.js'
import { createGrepTool, grepTool } from '../../src/builtin/tools/grep/tool.js'
import { rgPortable } from '../../src/builtin/tools/grep/rg.js'
import { ToolError } from '../../src/builtin/types.js'
import type { BuiltinTool, Workspace } from '../../src/builtin/types.js'

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }
const HAS_RG = spawnSync('rg', ['--version']).status === 0

async function setup (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-gg-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  // ripgrep runs in a bwrap sandbox as an unprivileged uid: it must be able to reach the root.
  await chmod(dir, 0o755)
  const root = path.join(dir, 'root')
  const files: Record<string, string | Buffer> = {
    'a.ts': 'export const a = 1\n// TODO: a\n',
    'b.js': 'const b = "TODO later"\r\nfoo(1)\r\n',
    'src/c.ts': 'import x from "y"\nfunction todo () {}\n',
    'src/deep/d.ts': 'TODO deep\nnot here\nTODO again',
    'src/deep/e.tsx': 'Todo mixed case\n',
    'a/x.txt': 'TODO in a/\n',
    'a.txt': 'TODO in a.txt\n',
    '.hidden/h.ts': 'TODO hidden\n',
    '.env': 'SECRET=1 TODO\n',
    '.git/config': 'TODO git\n',
    'node_modules/m/index.js': 'TODO module\n',
    'bin.dat': Buffer.concat([Buffer.from('TODO bin\n'), Buffer.from([0, 1, 2])]),
    'late-nul.txt': Buffer.concat([Buffer.from('TODO before\n'), Buffer.alloc(9000, 0x61), Buffer.from([0]), Buffer.from('\nTODO after\n')]),
    'bad-utf8.txt': Buffer.concat([Buffer.from('TODO ok line\nTODO bad '), Buffer.from([0xff, 0xfe]), Buffer.from('\n')]),
    'bom.txt': '\uFEFFTODO bom\n',
    'long.txt': `TODO ${'z'.repeat(1000)}\n`,
    'uni.txt': 'café TODO ünïcode\n',
    'big.txt': Buffer.alloc(10 * 1024 * 1024 + 1, 0x54),
    'exact.txt': Buffer.concat([Buffer.from('TODO exact\n'), Buffer.alloc(10 * 1024 * 1024 - 11, 0x0a)]),
    'empty.txt': ''
  }
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(root, rel)), { recursive: true })
    await writeFile(path.join(root, rel), content)
  }
  await symlink('a.ts', path.join(root, 'link-to-a.ts'))
  await symlink('src', path.join(root, 'link-dir'))
  const ws: Workspace = { tenant: 't', workspaceId: 'default', root, readRoots: [], limits: LIMITS }
  const run = (tool: BuiltinTool, args: Record<string, unknown>) => tool.run(args, { workspace: ws, signal: new AbortController().signal }) as Promise<Record<string, unknown>>
  return { dir, root, ws, run }
}

test('glob: standard globstar, sorted, files only, skips .git/node_modules, no symlinks', async (t) => {
  const { run } = await setup(t)
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

test('glob: refuses absolute and .. patterns', async (t) => {
  const { run } = await setup(t)
  for (const pattern of ['/etc/*', '../*', 'src/../../*', '**/../x']) {
    await assert.rejects(run(globTool, { pattern }), ToolError)
  }
})

test('grep: matches, counts, include, caseInsensitive, skips', async (t) => {
  const { run } = await setup(t)
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
  const { run } = await setup(t)
  await assert.rejects(run(grepTool, { pattern: '(unclosed' }), /Invalid regular expression \(JavaScript syntax\)/)
  await assert.rejects(run(grepTool, { pattern: '(?i)x' }), /Invalid regular expression/)
  await assert.rejects(run(grepTool, { pattern: 'x', include: 'src/*.ts' }), /file-name glob/)
})

test('grep: a single file as path', async (t) => {
  const { run } = await setup(t)
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

test('rgPortable keeps patterns whose Rust meaning differs in Node', () => {
  assert.equal(rgPortable('foo\\(\\d+\\)', false), true)
  assert.equal(rgPortable('^import .* from', false), true)
  for (const p of ['\\bword', '\\s+', 'caf\u00e9', '[[:alpha:]]', '[a&&b]', '[^]x', '\\u0041', '\\x{41}', '\\p{L}', '\\1']) {
    assert.equal(rgPortable(p, false), false, p)
  }
  assert.equal(rgPortable('[^k]', true), false)
})

test('grep: ripgrep and Node engines give identical results', { skip: !HAS_RG }, async (t) => {
  const { run } = await setup(t)
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
  const { run } = await setup(t)
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

/** A tree whose names exercise the bytewise path order, with more files than the Node engine reads ahead. */
async function wideTree (root: string): Promise<void> {
  const names = ['a', 'a.b', 'a-b', 'a_b', 'B', 'b', 'é', 'z\u00ff', '\u{1F600}', '\uE000', '10', '9', '.dot']
  let n = 0
  for (const d of names) {
    for (const sub of ['', 'x/', 'x.y/']) {
      for (const f of names) {
        const rel = `w/${d}/${sub}${f}.txt`
        await mkdir(path.dirname(path.join(root, rel)), { recursive: true })
        n++
        await writeFile(path.join(root, rel), n % 3 === 0 ? `hit ${n}\nmiss\nhit again ${n}\n` : `miss ${n}\n`)
      }
    }
  }
}

test('grep: a wide tree gives the same sorted results with both engines and in walk order', async (t) => {
  const { root, run } = await setup(t)
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
  const { root, run } = await setup(t)
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

test('glob: a wide tree comes back in comparePaths order, the same files fast-glob finds', async (t) => {
  const { root, run } = await setup(t)
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
  const { ws } = await setup(t)
  const ac = new AbortController()
  ac.abort()
  await assert.rejects(globTool.run({ pattern: '**/*' }, { workspace: ws, signal: ac.signal }), /Cancelled/)
})

test('grep: rg output split across many chunks parses as the Node engine reads it', { skip: !HAS_RG }, async (t) => {
  const { root, run } = await setup(t)
  await mkdir(path.join(root, 'chunks'))
  // A 2 MB matching line (one record over dozens of pipe reads), a file name holding a newline
  // and a NUL-free colon, and 20,000 short matches (output boundaries fall mid-record).
  await writeFile(path.join(root, 'chunks', 'long.txt'), `start ${'y'.repeat(2_000_000)} HIT end\nafter HIT\n`)
  await writeFile(path.join(root, 'chunks', 'new\nline:name.txt'), 'HIT in an odd name\n')
  await writeFile(path.join(root, 'chunks', 'many.txt'), Array.from({ length: 20_000 }, (_, i) => `HIT ${i} ${'é'.repeat(i % 9)}`).join('\n'))
  const rg = createGrepTool({ engine: 'rg' })
  const node = createGrepTool({ engine: 'node' })
  for (const q of [{ pattern: 'HIT', path: 'chunks', maxResults: 100_000 }, { pattern: 'HIT', path: 'chunks', maxResults: 3 }, { pattern: 'odd', path: 'chunks' }]) {
    const a = await run(rg, q)
    assert.deepEqual(a, await run(node, q), JSON.stringify(q))
  }
  const r = await run(rg, { pattern: 'HIT', path: 'chunks', maxResults: 100_000 })
  assert.equal(r.totalMatches, 20_003)
  assert.equal(r.filesSearched, 3)
})
