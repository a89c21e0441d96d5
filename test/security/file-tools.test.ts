/**
 * One test per escape class of the file tools (traversal, absolute paths, symlinks, hard links,
 * protected paths, read roots, rg arguments; docs/ARCHITECTURE.md#fd-layer). Each asserts the defence
 * and, where something could leak or change, that the outside data stayed untouched.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { chmod, link, mkdir, mkdtemp, readFile, readdir, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { readFileTool } from '../../src/builtin/tools/read-file.js'
import { writeFileTool } from '../../src/builtin/tools/write-file.js'
import { editTool } from '../../src/builtin/tools/edit.js'
import { globTool } from '../../src/builtin/tools/glob.js'
import { createGrepTool } from '../../src/builtin/tools/grep/tool.js'
import { ToolError } from '../../src/builtin/types.js'
import type { Workspace } from '../../src/builtin/types.js'
import type { BuiltinTool } from '../../src/builtin/tool.js'

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }
const HAS_RG = spawnSync('rg', ['--version']).status === 0
const grepNode = createGrepTool({ engine: 'node' })
const grepRg = createGrepTool({ engine: HAS_RG ? 'rg' : 'node' })

async function setup (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-sec-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  // ripgrep runs in a bwrap sandbox as an unprivileged uid: it must be able to reach the root.
  await chmod(dir, 0o755)
  const root = path.join(dir, 'ws', 'alice', 'default')
  const other = path.join(dir, 'ws', 'bob', 'default')
  const outside = path.join(dir, 'outside')
  const ro = path.join(dir, 'ro')
  for (const d of [root, other, outside, ro]) await mkdir(d, { recursive: true })
  await writeFile(path.join(other, 'secret.txt'), 'BOB SECRET\n')
  await writeFile(path.join(outside, 'host.txt'), 'HOST SECRET\n')
  await writeFile(path.join(ro, 'skill.md'), 'skill\n')
  const ws: Workspace = { tenant: 'alice', workspaceId: 'default', root, readRoots: [{ name: 'skills', path: ro }], limits: LIMITS }
  const run = (tool: BuiltinTool, args: Record<string, unknown>) =>
    tool.run(args, { workspace: ws, signal: new AbortController().signal }) as Promise<Record<string, unknown>>
  return { dir, root, other, outside, ro, ws, run }
}

/** Refused with a ToolError whose message never names a host path outside the workspace. */
async function refused (p: Promise<unknown>, re: RegExp, ...hidden: string[]): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ToolError, `expected ToolError, got ${String(err)}`)
    assert.match(err.message, re)
    for (const h of hidden) assert.ok(!err.message.includes(h), `message leaks ${h}: ${err.message}`)
    return true
  })
}

test('.. traversal is refused for every tool', async (t) => {
  const { run, dir } = await setup(t)
  const p = '../../bob/default/secret.txt'
  await refused(run(readFileTool, { path: p }), /^Path escapes workspace root: \.\.\/\.\.\/bob/, dir)
  await refused(run(writeFileTool, { path: p, content: 'x' }), /Path escapes workspace root/, dir)
  await refused(run(editTool, { path: p, old_string: 'BOB', new_string: 'x' }), /Path escapes workspace root/, dir)
  await refused(run(grepNode, { pattern: 'SECRET', path: '../..' }), /Path escapes workspace root/, dir)
  await refused(run(globTool, { pattern: '*', path: '../../bob' }), /Path escapes workspace root/, dir)
})

test('absolute paths outside the workspace and read roots are refused', async (t) => {
  const { run, other, outside } = await setup(t)
  await refused(run(readFileTool, { path: path.join(other, 'secret.txt') }), /Path escapes workspace root/)
  await refused(run(readFileTool, { path: '/etc/passwd' }), /^Path escapes workspace root: \/etc\/passwd$/)
  await refused(run(writeFileTool, { path: path.join(outside, 'new.txt'), content: 'x' }), /Path escapes workspace root/)
  await refused(run(grepNode, { pattern: 'x', path: '/etc' }), /Path escapes workspace root/)
  assert.deepEqual(await readdir(outside), ['host.txt'])
})

test('/proc/self/root is refused, directly and through a symlink', async (t) => {
  const { run, root } = await setup(t)
  await refused(run(readFileTool, { path: '/proc/self/root/etc/passwd' }), /Path escapes workspace root/)
  await symlink('/proc/self/root', path.join(root, 'p'))
  await refused(run(readFileTool, { path: 'p/etc/passwd' }), /^Path escapes workspace root: p\/etc\/passwd$/)
})

test('a symlink to / inside the workspace: read, write, edit, glob, grep through it are refused', async (t) => {
  const { run, root, outside } = await setup(t)
  await symlink('/', path.join(root, 'rootlink'))
  const hostRel = `rootlink${outside}/host.txt`
  await refused(run(readFileTool, { path: hostRel }), /Path escapes workspace root/)
  await refused(run(writeFileTool, { path: `rootlink${outside}/new.txt`, content: 'x' }), /Path escapes workspace root/)
  await refused(run(editTool, { path: hostRel, old_string: 'HOST', new_string: 'PWNED' }), /Path escapes workspace root/)
  await refused(run(globTool, { pattern: 'rootlink/etc/*' }), /Path escapes workspace root/)
  await refused(run(globTool, { pattern: '*', path: 'rootlink/etc' }), /Path escapes workspace root/)
  const g = await run(globTool, { pattern: '**/passwd' })
  assert.deepEqual(g.matches, [])
  await refused(run(grepNode, { pattern: 'root', path: 'rootlink/etc' }), /Path escapes workspace root/)
  for (const grep of [grepNode, grepRg]) {
    const r = await run(grep, { pattern: 'SECRET|root:' })
    assert.deepEqual(r.matches, [])
  }
  assert.equal(await readFile(path.join(outside, 'host.txt'), 'utf8'), 'HOST SECRET\n')
  assert.deepEqual(await readdir(outside), ['host.txt'])
})

test('a symlink to another tenant\'s workspace: read, write, edit, glob, grep are refused', async (t) => {
  const { run, root, other } = await setup(t)
  await symlink(other, path.join(root, 'bob'))
  await refused(run(readFileTool, { path: 'bob/secret.txt' }), /^Path escapes workspace root: bob\/secret.txt$/, other)
  await refused(run(writeFileTool, { path: 'bob/planted.txt', content: 'x' }), /Path escapes workspace root/, other)
  await refused(run(editTool, { path: 'bob/secret.txt', old_string: 'BOB', new_string: 'x' }), /Path escapes workspace root/, other)
  await refused(run(globTool, { pattern: '*', path: 'bob' }), /Path escapes workspace root/, other)
  await refused(run(globTool, { pattern: 'bob/*.txt' }), /Path escapes workspace root/, other)
  assert.deepEqual((await run(globTool, { pattern: '**/*.txt' })).matches, [])
  for (const grep of [grepNode, grepRg]) {
    await refused(run(grep, { pattern: 'SECRET', path: 'bob' }), /Path escapes workspace root/, other)
    assert.deepEqual((await run(grep, { pattern: 'SECRET' })).matches, [])
  }
  assert.equal(await readFile(path.join(other, 'secret.txt'), 'utf8'), 'BOB SECRET\n')
  assert.deepEqual(await readdir(other), ['secret.txt'])
})

test('a dangling symlink as write target is refused and nothing is created outside', async (t) => {
  const { run, root, outside } = await setup(t)
  await symlink(path.join(outside, 'created-by-attack.txt'), path.join(root, 'dangling'))
  await refused(run(writeFileTool, { path: 'dangling', content: 'x' }), /symbolic link/)
  await symlink(path.join(outside, 'newdir'), path.join(root, 'dangling-dir'))
  await refused(run(writeFileTool, { path: 'dangling-dir/x.txt', content: 'x' }), /dangling symbolic link|escapes/)
  assert.deepEqual(await readdir(outside), ['host.txt'])
})

test('a final-component symlink on write is refused even when it points inside', async (t) => {
  const { run, root, outside } = await setup(t)
  await writeFile(path.join(root, 'real.txt'), 'inside\n')
  await symlink('real.txt', path.join(root, 'alias.txt'))
  await refused(run(writeFileTool, { path: 'alias.txt', content: 'x' }), /symbolic link/)
  await refused(run(editTool, { path: 'alias.txt', old_string: 'inside', new_string: 'x' }), /symbolic link/)
  await symlink(path.join(outside, 'host.txt'), path.join(root, 'out.txt'))
  await refused(run(writeFileTool, { path: 'out.txt', content: 'PWNED', mode: 'append' }), /symbolic link|escapes/)
  assert.equal(await readFile(path.join(root, 'real.txt'), 'utf8'), 'inside\n')
  assert.equal(await readFile(path.join(outside, 'host.txt'), 'utf8'), 'HOST SECRET\n')
})

test('a hard link to an outside file: writes refused, outside file unchanged', async (t) => {
  const { run, root, outside } = await setup(t)
  await link(path.join(outside, 'host.txt'), path.join(root, 'hard.txt'))
  await refused(run(writeFileTool, { path: 'hard.txt', content: 'PWNED' }), /multiple hard links/)
  await refused(run(writeFileTool, { path: 'hard.txt', content: 'PWNED', mode: 'append' }), /multiple hard links/)
  await refused(run(editTool, { path: 'hard.txt', old_string: 'HOST', new_string: 'PWNED' }), /multiple hard links/)
  assert.equal(await readFile(path.join(outside, 'host.txt'), 'utf8'), 'HOST SECRET\n')
})

test('NUL bytes and over-long paths are clean tool errors', async (t) => {
  const { run } = await setup(t)
  for (const tool of [readFileTool, writeFileTool]) {
    await refused(run(tool, { path: 'a\0/etc/passwd', content: 'x' }), /NUL/)
    await refused(run(tool, { path: 'a/'.repeat(2500), content: 'x' }), /too long/)
  }
  await refused(run(readFileTool, { path: 'x'.repeat(5000) }), /too long/)
  await refused(run(globTool, { pattern: '*', path: 'a\0b' }), /NUL/)
  await refused(run(grepNode, { pattern: 'x', path: 'y'.repeat(5000) }), /too long/)
})

test('case and Unicode tricks on protected paths are refused', async (t) => {
  const { run, root } = await setup(t)
  await refused(run(writeFileTool, { path: '.GIT/hooks/pre-commit', content: '#!/bin/sh\n' }), /protected/)
  await refused(run(writeFileTool, { path: '.git/HOOKS/post-checkout', content: 'x' }), /protected/)
  await refused(run(writeFileTool, { path: '.SSH/authorized_keys', content: 'x' }), /protected/)
  await refused(run(writeFileTool, { path: 'x/.Aws/credentials', content: 'x' }), /protected/)
  // A symlink with an innocent name pointing at .git/hooks is caught on the real path.
  await mkdir(path.join(root, '.git', 'hooks'), { recursive: true })
  await symlink('.git/hooks', path.join(root, 'innocent'))
  await refused(run(writeFileTool, { path: 'innocent/pre-commit', content: 'x' }), /protected/)
  assert.deepEqual(await readdir(path.join(root, '.git', 'hooks')), [])
})

test('read roots are readable but never writable', async (t) => {
  const { run, ro } = await setup(t)
  assert.equal((await run(readFileTool, { path: path.join(ro, 'skill.md') })).content, 'skill')
  await refused(run(writeFileTool, { path: path.join(ro, 'skill.md'), content: 'x' }), /read-only/)
  await refused(run(editTool, { path: path.join(ro, 'skill.md'), old_string: 'skill', new_string: 'x' }), /read-only/)
  assert.equal(await readFile(path.join(ro, 'skill.md'), 'utf8'), 'skill\n')
})

test('rg argument injection: option-like patterns, paths and includes are inert', { skip: !HAS_RG }, async (t) => {
  const { run, root, dir } = await setup(t)
  const marker = path.join(dir, 'pwned')
  await writeFile(path.join(root, 'pre.sh'), `#!/bin/sh\ntouch ${marker}\n`, { mode: 0o755 })
  await writeFile(path.join(root, 'f.txt'), '--pre=sh\n-x\nhello\n')
  await mkdir(path.join(root, '-x'))
  await writeFile(path.join(root, '-x', 'g.txt'), 'hello from dash dir\n')
  for (const grep of [grepRg, grepNode]) {
    const a = await run(grep, { pattern: `--pre=${path.join(root, 'pre.sh')}` })
    assert.deepEqual(a.matches, [])
    const b = await run(grep, { pattern: '--pre=sh' })
    assert.deepEqual(b.matches, [{ file: 'f.txt', line: 1, content: '--pre=sh' }])
    const c = await run(grep, { pattern: 'hello', path: '-x' })
    assert.deepEqual(c.matches, [{ file: '-x/g.txt', line: 1, content: 'hello from dash dir' }])
    const d = await run(grep, { pattern: 'hello', include: '--pre=sh' })
    assert.deepEqual(d.matches, [])
    // Anchored: the random temp dir name in pre.sh may itself contain "-x" (it did once in CI).
    const e = await run(grep, { pattern: '-x$' })
    assert.deepEqual(e.matches, [{ file: 'f.txt', line: 2, content: '-x' }])
  }
  await assert.rejects(readFile(marker), { code: 'ENOENT' })
})
