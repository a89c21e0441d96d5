import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdir, mkdtemp, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { globTool } from '../../src/builtin/tools/glob.js'
import { createGrepTool, grepTool, rgPortable } from '../../src/builtin/tools/grep.js'
import { ToolError } from '../../src/builtin/types.js'
import type { BuiltinTool, Workspace } from '../../src/builtin/types.js'

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }
const HAS_RG = spawnSync('rg', ['--version']).status === 0

async function setup (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-gg-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
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
