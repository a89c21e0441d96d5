import { test } from 'node:test'
import assert from 'node:assert/strict'
import { link, lstat, mkdir, mkdtemp, readFile, readdir, readlink, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { locate, locateWritable, openForRead, removeFile, writeFileAtomic } from '../../../../src/builtin/workspace/fd-tree.js'
import type { Location } from '../../../../src/builtin/workspace/fd-tree.js'
import { ToolError } from '../../../../src/builtin/types.js'
import type { Workspace } from '../../../../src/builtin/types.js'

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }

async function setup (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-paths-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const root = path.join(dir, 'root')
  const ro = path.join(dir, 'ro')
  await mkdir(root)
  await mkdir(ro)
  await writeFile(path.join(ro, 'skill.md'), 'skill\n')
  const ws: Workspace = { tenant: 't', workspaceId: 'default', root, readRoots: [{ name: 'skills', path: ro }], limits: LIMITS }
  return { dir, root, ro, ws }
}

/** Where a location's parent really is on the host, and its name, then closed. */
async function where (p: Promise<Location>): Promise<{ abs: string, rel: string, readOnly: boolean }> {
  const loc = await p
  try {
    const dir = await readlink(`/proc/self/fd/${loc.parent.fd}`)
    return { abs: loc.name === '' ? dir : path.join(dir, loc.name), rel: loc.rel, readOnly: loc.readOnly }
  } finally {
    await loc.close()
  }
}

async function rejects (p: Promise<unknown>, re: RegExp, reason?: string): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ToolError, `expected ToolError, got ${String(err)}`)
    assert.match(err.message, re)
    if (reason !== undefined) assert.equal(err.reason, reason)
    return true
  })
}

test('relative paths resolve against the root, display is workspace-relative', async (t) => {
  const { root, ws } = await setup(t)
  await mkdir(path.join(root, 'a'))
  const r = await where(locate(ws, 'a/../a/./b.txt', 'read'))
  assert.deepEqual(r, { abs: path.join(root, 'a', 'b.txt'), rel: 'a/b.txt', readOnly: false })
  assert.equal((await where(locate(ws, '.', 'read'))).rel, '.')
  assert.equal((await where(locate(ws, path.join(root, 'a'), 'read'))).rel, 'a')
})

test('read roots: absolute paths inside are readable and read-only', async (t) => {
  const { ro, ws } = await setup(t)
  const r = await where(locate(ws, path.join(ro, 'skill.md'), 'read'))
  assert.equal(r.readOnly, true)
  assert.equal(r.rel, path.join(ro, 'skill.md'))
  await rejects(locate(ws, path.join(ro, 'x.md'), 'write'), /read-only root/, 'forbidden')
})

test('symlinks inside the workspace are followed when they stay inside', async (t) => {
  const { root, ws } = await setup(t)
  await mkdir(path.join(root, 'real'))
  await symlink('real', path.join(root, 'alias'))
  const r = await where(locate(ws, 'alias/new.txt', 'read'))
  assert.equal(r.abs, path.join(root, 'real', 'new.txt'))
  assert.equal(r.rel, 'alias/new.txt')
  const w = await where(locate(ws, 'alias/new.txt', 'write'))
  assert.equal(w.abs, path.join(root, 'real', 'new.txt'))
})

test('writeFileAtomic creates parents, replaces atomically and appends', async (t) => {
  const { root, ws } = await setup(t)
  const target = 'deep/er/f.txt'
  assert.deepEqual(await writeFileAtomic(ws, target, 'one\n'), { created: true, bytesWritten: 4, rel: target })
  assert.deepEqual(await writeFileAtomic(ws, target, 'two\n', { append: true }), { created: false, bytesWritten: 4, rel: target })
  assert.equal(await readFile(path.join(root, 'deep/er/f.txt'), 'utf8'), 'one\ntwo\n')
  assert.deepEqual(await writeFileAtomic(ws, target, Buffer.from('é')), { created: false, bytesWritten: 2, rel: target })
  assert.equal(await readFile(path.join(root, 'deep/er/f.txt'), 'utf8'), 'é')
  // No temp files are left behind.
  assert.deepEqual(await readdir(path.join(root, 'deep/er')), ['f.txt'])
})

test('writeFileAtomic keeps the file mode', async (t) => {
  const { root, ws } = await setup(t)
  await writeFile(path.join(root, 'run.sh'), '#!/bin/sh\n', { mode: 0o755 })
  await writeFileAtomic(ws, 'run.sh', 'echo hi\n')
  assert.equal((await stat(path.join(root, 'run.sh'))).mode & 0o777, 0o755)
})

test('writeFileAtomic refuses a directory and a hard-linked target', async (t) => {
  const { root, ws } = await setup(t)
  await mkdir(path.join(root, 'd'))
  await rejects(writeFileAtomic(ws, 'd', 'x'), /Path is a directory: d/)
  await writeFile(path.join(root, 'a'), 'a')
  await link(path.join(root, 'a'), path.join(root, 'b'))
  await rejects(writeFileAtomic(ws, 'b', 'x'), /multiple hard links/, 'forbidden')
  assert.equal(await readFile(path.join(root, 'a'), 'utf8'), 'a')
})

test('writeFileAtomic chowns created entries to the workspace owner', { skip: process.getuid?.() !== 0 }, async (t) => {
  const { root, ws } = await setup(t)
  const owned: Workspace = { ...ws, owner: { uid: 12345, gid: 12346 } }
  await writeFileAtomic(owned, 'sub/f.txt', 'x')
  for (const p of ['sub', 'sub/f.txt']) {
    const st = await lstat(path.join(root, p))
    assert.equal(st.uid, 12345)
    assert.equal(st.gid, 12346)
  }
})

test('removeFile deletes files, refuses directories and missing files', async (t) => {
  const { root, ws } = await setup(t)
  await writeFile(path.join(root, 'gone.txt'), 'x')
  await removeFile(ws, 'gone.txt')
  await assert.rejects(lstat(path.join(root, 'gone.txt')), { code: 'ENOENT' })
  await mkdir(path.join(root, 'dir'))
  await rejects(removeFile(ws, 'dir'), /^Path is a directory: dir$/)
  await rejects(removeFile(ws, 'nope.txt'), /File does not exist: nope.txt/)
})

test('input validation gives clean ToolErrors', async (t) => {
  const { ws } = await setup(t)
  await rejects(locate(ws, 'a\0b', 'read'), /NUL/, 'invalid-arguments')
  await rejects(locate(ws, 'a/'.repeat(2500), 'read'), /too long/, 'invalid-arguments')
  await rejects(locate(ws, 'x'.repeat(256), 'read'), /longer than 255 bytes/, 'invalid-arguments')
  await rejects(locate(ws, '', 'read'), /must not be empty/, 'invalid-arguments')
  await rejects(locateWritable(ws, '.'), /Path is a directory/)
})

test('protected segments are refused case-folded and NFC-normalised', async (t) => {
  const { ws } = await setup(t)
  for (const p of ['.git/hooks/pre-commit', '.GIT/Hooks/x', 'sub/.ssh/id', '.Aws/credentials', '.s\u0073h/x']) {
    await rejects(locateWritable(ws, p), /protected/, 'forbidden')
  }
  // .git itself and other hooks-named dirs stay writable.
  await writeFileAtomic(ws, '.git/config', 'x')
  await writeFileAtomic(ws, 'hooks/x', 'x')
})

test('a path ending in "/" names a directory, as the kernel reads it: no file is written, read or removed through it', async (t) => {
  const { root, ws } = await setup(t)
  await mkdir(path.join(root, 'dir'))
  await writeFile(path.join(root, 'x.txt'), 'x\n')
  // Writing "newdir/" made a file named newdir, and "x.txt/" overwrote x.txt (open(2) answers EISDIR and ENOTDIR).
  await rejects(writeFileAtomic(ws, 'newdir/', 'hi'), /names a directory/, 'invalid-arguments')
  await rejects(writeFileAtomic(ws, 'x.txt/', 'hi'), /names a directory/, 'invalid-arguments')
  await rejects(writeFileAtomic(ws, 'dir/.', 'hi'), /names a directory/, 'invalid-arguments')
  await rejects(removeFile(ws, 'x.txt/'), /names a directory/, 'invalid-arguments')
  await rejects(locateWritable(ws, 'x.txt/'), /names a directory/, 'invalid-arguments')
  assert.deepEqual((await readdir(root)).sort(), ['dir', 'x.txt'])
  assert.equal(await readFile(path.join(root, 'x.txt'), 'utf8'), 'x\n')
  // Reading: a file through "x.txt/" is not a directory; a directory through "dir/" still opens.
  await rejects(openForRead(ws, 'x.txt/'), /Not a directory: x\.txt\//)
  await rejects(openForRead(ws, 'x.txt/', { allowDirectory: true }), /Not a directory/)
  const opened = await openForRead(ws, 'dir/', { allowDirectory: true })
  assert.ok(opened.st.isDirectory())
  await opened.fh.close()
  // Without the slash nothing changes.
  assert.equal((await writeFileAtomic(ws, 'dir/new.txt', 'n')).rel, 'dir/new.txt')
})
