import { test } from 'node:test'
import assert from 'node:assert/strict'
import { link, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import { applyPatch } from '../../../../src/builtin/apply-patch/execute.js'
import type { PatchIo } from '../../../../src/builtin/apply-patch/execute.js'
import { applyPatchTool } from '../../../../src/builtin/tools/apply-patch.js'
import { ToolError } from '../../../../src/builtin/types.js'
import type { Workspace } from '../../../../src/builtin/types.js'
import { renameAt, writeFileAtomic } from '../../../../src/builtin/workspace/fd-tree.js'
import { testWorkspace } from '../../../helpers/workspace.js'

interface Fixture {
  ws: Workspace
  /** The workspace root. */
  root: string
  /** A directory next to the workspace, outside it. */
  outside: string
  read: (rel: string) => Promise<string>
  exists: (rel: string) => Promise<boolean>
}

async function fixture (t: TestContext, files: Record<string, string> = {}): Promise<Fixture> {
  const base = await realpath(await mkdtemp(join(tmpdir(), 'apply-patch-')))
  t.after(() => rm(base, { recursive: true, force: true }))
  const root = join(base, 'ws')
  const outside = join(base, 'outside')
  await mkdir(root)
  await mkdir(outside)
  for (const [rel, content] of Object.entries(files)) {
    await mkdir(join(root, rel, '..'), { recursive: true })
    await writeFile(join(root, rel), content)
  }
  const ws = testWorkspace(root)
  return {
    ws,
    root,
    outside,
    read: (rel) => readFile(join(root, rel), 'utf8'),
    exists: (rel) => stat(join(root, rel)).then(() => true, () => false)
  }
}

function patch (...lines: string[]): string {
  return ['*** Begin Patch', ...lines, '*** End Patch'].join('\n')
}

async function run (f: Fixture, text: string): Promise<unknown> {
  return await applyPatchTool.run({ patch: text }, { workspace: f.ws, signal: AbortSignal.timeout(30_000) })
}

async function refused (f: Fixture, text: string, message: RegExp, reason?: ToolError['reason']): Promise<ToolError> {
  const err = await run(f, text).then(
    (r) => assert.fail(`expected an error, got ${JSON.stringify(r)}`),
    (e: unknown) => e
  )
  assert.ok(err instanceof ToolError, `expected a ToolError, got ${String(err)}`)
  assert.match(err.message, message)
  if (reason !== undefined) assert.equal(err.reason, reason)
  return err
}

test('result object: add, update, delete and move, workspace-relative paths', async (t) => {
  const f = await fixture(t, { 'mod.txt': 'a\nb\nc\n', 'gone.txt': 'x\ny\n', 'src/old.ts': 'one\ntwo\n' })
  const result = await run(f, patch(
    '*** Add File: new/file.txt',
    '+hello',
    '+world',
    '*** Update File: mod.txt',
    '@@',
    ' a',
    '-b',
    '+B1',
    '+B2',
    '*** Delete File: gone.txt',
    '*** Update File: src/old.ts',
    '*** Move to: lib/new.ts',
    '@@',
    '-two',
    '+TWO'
  ))
  assert.deepEqual(result, {
    filesChanged: 5,
    operationsApplied: 4,
    changedFiles: ['new/file.txt', 'mod.txt', 'gone.txt', 'src/old.ts', 'lib/new.ts'],
    fileChanges: [
      { path: 'new/file.txt', operation: 'add', linesAdded: 2, linesRemoved: 0 },
      { path: 'mod.txt', operation: 'update', linesAdded: 2, linesRemoved: 1 },
      { path: 'gone.txt', operation: 'delete', linesAdded: 0, linesRemoved: 2 },
      { path: 'lib/new.ts', operation: 'move', movedFrom: 'src/old.ts', linesAdded: 1, linesRemoved: 1 }
    ]
  })
  assert.equal(await f.read('new/file.txt'), 'hello\nworld\n')
  assert.equal(await f.read('mod.txt'), 'a\nB1\nB2\nc\n')
  assert.equal(await f.exists('gone.txt'), false)
  assert.equal(await f.exists('src/old.ts'), false)
  assert.equal(await f.read('lib/new.ts'), 'one\nTWO\n')
})

test('CRLF line endings of an updated file are kept', async (t) => {
  const f = await fixture(t, { 'win.txt': 'one\r\ntwo\r\nthree\r\n' })
  await run(f, patch('*** Update File: win.txt', '@@', ' one', '-two', '+TWO', '+2b', ' three'))
  assert.equal(await f.read('win.txt'), 'one\r\nTWO\r\n2b\r\nthree\r\n')
})

test('a missing trailing newline stays missing; added files end with a newline', async (t) => {
  const f = await fixture(t, { 'no-eol.txt': 'first\nlast' })
  await run(f, patch('*** Update File: no-eol.txt', '@@', '-last', '+LAST', '*** Add File: added.txt', '+x'))
  assert.equal(await f.read('no-eol.txt'), 'first\nLAST')
  assert.equal(await f.read('added.txt'), 'x\n')
})

test('atomic: a failing second hunk leaves the first file untouched and creates nothing', async (t) => {
  const f = await fixture(t, { 'a.txt': 'alpha\n', 'b.txt': 'beta\n' })
  await refused(f, patch(
    '*** Update File: a.txt',
    '@@',
    '-alpha',
    '+ALPHA',
    '*** Add File: fresh/new.txt',
    '+new',
    '*** Update File: b.txt',
    '@@',
    '-not there',
    '+x'
  ), /^Failed to find expected lines in b\.txt:\nnot there$/)
  assert.equal(await f.read('a.txt'), 'alpha\n')
  assert.equal(await f.read('b.txt'), 'beta\n')
  assert.equal(await f.exists('fresh'), false)
  assert.deepEqual((await readdir(f.root)).sort(), ['a.txt', 'b.txt'])
})

test('atomic: a failing context locator also changes nothing', async (t) => {
  const f = await fixture(t, { 'a.txt': 'alpha\n', 'b.txt': 'beta\n' })
  await refused(f, patch(
    '*** Delete File: a.txt',
    '*** Add File: c.txt',
    '+c',
    '*** Update File: b.txt',
    '@@ nowhere',
    '-beta',
    '+x'
  ), /^Failed to find context 'nowhere' in b\.txt$/)
  assert.equal(await f.read('a.txt'), 'alpha\n')
  assert.equal(await f.read('b.txt'), 'beta\n')
  assert.equal(await f.exists('c.txt'), false)
})

test('Move to with .. traversal is refused and nothing is written', async (t) => {
  const f = await fixture(t, { 'src.txt': 'keep\n' })
  await refused(f, patch('*** Update File: src.txt', '*** Move to: ../outside/evil.txt', '@@', '-keep', '+pwned'), /Path escapes workspace root: \.\.\/outside\/evil\.txt/, 'forbidden')
  assert.equal(await f.read('src.txt'), 'keep\n')
  assert.deepEqual(await readdir(f.outside), [])
})

test('Move to an absolute path outside the workspace is refused', async (t) => {
  const f = await fixture(t, { 'src.txt': 'keep\n' })
  const target = join(f.outside, 'evil.txt')
  await refused(f, patch('*** Update File: src.txt', `*** Move to: ${target}`, '@@', '-keep', '+pwned'), /Path escapes workspace root/, 'forbidden')
  assert.equal(await f.read('src.txt'), 'keep\n')
  assert.deepEqual(await readdir(f.outside), [])
})

test('Move to through a symlink pointing outside the workspace is refused', async (t) => {
  const f = await fixture(t, { 'src.txt': 'keep\n' })
  await symlink(f.outside, join(f.root, 'link'))
  await refused(f, patch('*** Update File: src.txt', '*** Move to: link/evil.txt', '@@', '-keep', '+pwned'), /Path escapes workspace root: link\/evil\.txt/, 'forbidden')
  assert.equal(await f.read('src.txt'), 'keep\n')
  assert.deepEqual(await readdir(f.outside), [])
})

test('Add and Update through traversal, symlinks and protected paths are refused', async (t) => {
  const f = await fixture(t, {})
  await writeFile(join(f.outside, 'target.txt'), 'outside\n')
  await symlink(join(f.outside, 'target.txt'), join(f.root, 'file-link.txt'))
  await symlink(f.outside, join(f.root, 'dir-link'))
  await refused(f, patch('*** Add File: ../escape.txt', '+x'), /Path escapes workspace root/, 'forbidden')
  await refused(f, patch('*** Add File: dir-link/escape.txt', '+x'), /Path escapes workspace root/, 'forbidden')
  await refused(f, patch('*** Update File: file-link.txt', '@@', '-outside', '+pwned'), /symbolic link/, 'forbidden')
  await refused(f, patch('*** Add File: .git/hooks/pre-commit', '+#!/bin/sh'), /protected/, 'forbidden')
  await refused(f, patch('*** Add File: ok.txt', '+fine', '*** Add File: .SSH/authorized_keys', '+key'), /protected/, 'forbidden')
  assert.equal(await readFile(join(f.outside, 'target.txt'), 'utf8'), 'outside\n')
  assert.deepEqual((await readdir(f.outside)).sort(), ['target.txt'])
  assert.equal(await f.exists('ok.txt'), false)
  assert.equal(await f.exists('.git'), false)
})

test('Unicode punctuation in the file matches ASCII in the patch', async (t) => {
  const f = await fixture(t, { 'doc.md': 'Title\n\u201CQuoted\u201D \u2014 it\u2019s\u00A0here\nEnd\n' })
  await run(f, patch('*** Update File: doc.md', '@@', ' Title', '-"Quoted" - it\'s here', '+Plain now', ' End'))
  assert.equal(await f.read('doc.md'), 'Title\nPlain now\nEnd\n')
})

test('@@ context picks the right one of repeated blocks', async (t) => {
  const block = (name: string): string => `def ${name}():\n    value = 1\n    return value\n`
  const f = await fixture(t, { 'm.py': block('first') + block('second') + block('third') })
  await run(f, patch('*** Update File: m.py', '@@ def second():', '-    value = 1', '+    value = 2'))
  assert.equal(await f.read('m.py'), block('first') + 'def second():\n    value = 2\n    return value\n' + block('third'))
  await refused(f, patch('*** Update File: m.py', '@@ def fourth():', '-    value = 1', '+    value = 4'), /^Failed to find context 'def fourth\(\):' in m\.py$/)
})

test('End of File anchors the chunk at the end of the file', async (t) => {
  const f = await fixture(t, { 'tail.txt': 'x\nmiddle\nx\n' })
  await run(f, patch('*** Update File: tail.txt', '@@', '-x', '+LAST', '*** End of File'))
  assert.equal(await f.read('tail.txt'), 'x\nmiddle\nLAST\n')
})

test('heredoc-wrapped patch is accepted', async (t) => {
  const f = await fixture(t, { 'h.txt': 'old\n' })
  await run(f, `<<'EOF'\n${patch('*** Update File: h.txt', '@@', '-old', '+new')}\nEOF\n`)
  assert.equal(await f.read('h.txt'), 'new\n')
})

test('later hunks see earlier ones: add then update, delete then add below it', async (t) => {
  const f = await fixture(t, { node: 'was a file\n' })
  const result = await run(f, patch(
    '*** Add File: fresh.txt',
    '+one',
    '*** Update File: fresh.txt',
    '@@',
    '-one',
    '+two',
    '*** Delete File: node',
    '*** Add File: node/child.txt',
    '+child'
  ))
  assert.equal(await f.read('fresh.txt'), 'two\n')
  assert.equal(await f.read('node/child.txt'), 'child\n')
  assert.deepEqual((result as { changedFiles: string[] }).changedFiles, ['fresh.txt', 'node', 'node/child.txt'])
  await refused(f, patch('*** Delete File: fresh.txt', '*** Update File: fresh.txt', '@@', '-two', '+three'), /^Failed to read file to update fresh\.txt: No such file or directory$/)
  assert.equal(await f.read('fresh.txt'), 'two\n')
})

test('Move to the same path is a plain update (Codex would delete the file)', async (t) => {
  const f = await fixture(t, { 'same.txt': 'a\n' })
  const result = await run(f, patch('*** Update File: same.txt', '*** Move to: ./same.txt', '@@', '-a', '+b'))
  assert.equal(await f.read('same.txt'), 'b\n')
  assert.deepEqual((result as { fileChanges: unknown[] }).fileChanges, [{ path: 'same.txt', operation: 'update', linesAdded: 1, linesRemoved: 1 }])
})

test('refusals checked before writing: directories, missing files, parent is a file, binary, hard links', async (t) => {
  const f = await fixture(t, { 'dir/inner.txt': 'in\n', 'plain.txt': 'p\n' })
  await writeFile(join(f.root, 'bin.dat'), Buffer.from([0x66, 0x6f, 0xff, 0xfe, 0x0a]))
  await link(join(f.root, 'plain.txt'), join(f.root, 'hard.txt'))
  const first = ['*** Add File: first.txt', '+should not appear']
  await refused(f, patch(...first, '*** Delete File: dir'), /^Failed to delete file dir: path is a directory$/)
  await refused(f, patch(...first, '*** Add File: dir', '+x'), /^Failed to write file dir: path is a directory$/)
  await refused(f, patch(...first, '*** Delete File: nope.txt'), /^Failed to delete file nope\.txt: No such file or directory$/)
  await refused(f, patch(...first, '*** Add File: plain.txt/below.txt', '+x'), /^Failed to write file plain\.txt\/below\.txt: a parent path is a file$/)
  await refused(f, patch(...first, '*** Update File: bin.dat', '@@', '-fo', '+x'), /not valid UTF-8/)
  await refused(f, patch(...first, '*** Update File: hard.txt', '@@', '-p', '+x'), /multiple hard links/, 'forbidden')
  assert.equal(await f.exists('first.txt'), false)
  assert.equal(await f.read('plain.txt'), 'p\n')
})

test('a write failing midway is rolled back: restored files, removed new files and folders', async (t) => {
  const f = await fixture(t, { 'a.txt': 'alpha\n', 'd.txt': 'delete me\n' })
  let writes = 0
  const io: PatchIo = {
    renameAt,
    writeFileAtomic: async (ws, input, data) => {
      const r = await writeFileAtomic(ws, input, data)
      // The second write of the commit lands on disk and then fails (as a failing chown would).
      if (++writes === 2) throw Object.assign(new Error(`ENOSPC: no space left, write '${join(ws.root, input)}'`), { code: 'ENOSPC' })
      return r
    }
  }
  const text = patch(
    '*** Delete File: d.txt',
    '*** Update File: a.txt',
    '@@',
    '-alpha',
    '+ALPHA',
    '*** Add File: deep/er/new.txt',
    '+new'
  )
  const err = await applyPatch(f.ws, text, { io }).then(() => assert.fail('expected a failure'), (e: unknown) => e)
  assert.ok(err instanceof ToolError)
  assert.equal(err.message, 'Failed to apply patch: ENOSPC; every change already written was rolled back')
  assert.ok(!err.message.includes(f.root), 'no host path in the message')
  assert.equal(await f.read('a.txt'), 'alpha\n')
  assert.equal(await f.read('d.txt'), 'delete me\n')
  assert.equal(await f.exists('deep'), false)
  assert.deepEqual((await readdir(f.root)).sort(), ['a.txt', 'd.txt'])
})

test('a cancelled call writes nothing', async (t) => {
  const f = await fixture(t, { 'a.txt': 'alpha\n' })
  const ctl = new AbortController()
  ctl.abort()
  const err = await applyPatch(f.ws, patch('*** Update File: a.txt', '@@', '-alpha', '+ALPHA'), { signal: ctl.signal }).then(
    () => assert.fail('expected a failure'),
    (e: unknown) => e
  )
  assert.ok(err instanceof ToolError)
  assert.equal(err.reason, 'timeout')
  assert.equal(await f.read('a.txt'), 'alpha\n')
})

test('arguments: patch must be a string; parse errors surface with Codex wording', async (t) => {
  const f = await fixture(t)
  await assert.rejects(
    applyPatchTool.run({ patch: 42 }, { workspace: f.ws, signal: AbortSignal.timeout(30_000) }),
    (e: unknown) => e instanceof ToolError && e.reason === 'invalid-arguments'
  )
  await refused(f, '*** Update File: x', /^invalid patch: The first line of the patch must be '\*\*\* Begin Patch'$/)
  assert.equal(applyPatchTool.mutates({}), true)
  assert.deepEqual(applyPatchTool.inputSchema['required'], ['patch'])
})

test('1,000-line file: many chunks applied correctly', async (t) => {
  const lines = Array.from({ length: 1000 }, (_, i) => `const v${i} = ${i}`)
  const f = await fixture(t, { 'big.ts': lines.join('\n') + '\n' })
  const chunks: string[] = []
  for (let k = 0; k < 100; k++) {
    const i = k * 10 + 5
    chunks.push(`@@ const v${i - 2} = ${i - 2}`, ` const v${i - 1} = ${i - 1}`, `-const v${i} = ${i}`, `+const v${i} = ${i * 2}`, ` const v${i + 1} = ${i + 1}`)
  }
  const result = await run(f, patch('*** Update File: big.ts', ...chunks)) as { fileChanges: Array<{ linesAdded: number, linesRemoved: number }> }
  assert.deepEqual(result.fileChanges[0], { path: 'big.ts', operation: 'update', linesAdded: 100, linesRemoved: 100 })
  const out = (await f.read('big.ts')).split('\n')
  assert.equal(out.length, 1001)
  assert.equal(out[995], 'const v995 = 1990')
  assert.equal(out[994], 'const v994 = 994')
  assert.equal(out[5], 'const v5 = 10')
})
