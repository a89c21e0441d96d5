/**
 * The fd-based file layer (src/builtin/workspace/fd-tree.ts): in-tree symlinks are followed beneath
 * the root, everything else is refused, and a tight symlink-swap loop running beside the calls
 * never gets a read, write, delete or walk outside the tree. The swap loop runs on the host
 * here (perl's renameat2 RENAME_EXCHANGE), the fastest a tenant's own process could do it; the
 * end-to-end version through a tenant's sandbox is test/security/symlink-races.test.ts.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { mkdir, mkdtemp, readFile, readdir, realpath, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { ToolError } from '../../../../src/builtin/types.js'
import { locate, openForRead, readFileCapped, removeFile, writeFileAtomic } from '../../../../src/builtin/workspace/fd-tree.js'
import { walk } from '../../../../src/builtin/workspace/fd-walk.js'
import { testWorkspace } from '../../../helpers/workspace.js'

const RENAMEAT2 = process.arch === 'arm64' ? 276 : 316
const HAS_PERL = spawnSync('perl', ['-e', '1']).status === 0

async function setup (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-tree-')))
  t.after(() => rm(dir, { recursive: true, force: true, maxRetries: 5 }))
  const root = path.join(dir, 'ws')
  const outside = path.join(dir, 'outside')
  const ro = path.join(dir, 'ro')
  for (const d of [root, outside, ro]) await mkdir(d, { recursive: true })
  await writeFile(path.join(outside, 'secret'), 'OUTSIDE SECRET\n')
  await writeFile(path.join(ro, 'skill.md'), 'skill\n')
  const ws = testWorkspace(root, { readRoots: [{ name: 'skills', path: ro }] })
  return { dir, root, outside, ro, ws }
}

async function refused (p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ToolError, `expected a ToolError, got ${String(err)}`)
    assert.match(err.message, re)
    return true
  })
}

test('in-tree symlinks are followed beneath the root; links out of it are escapes', async (t) => {
  const { root, outside, ro, ws } = await setup(t)
  await mkdir(path.join(root, 'real/sub'), { recursive: true })
  await writeFile(path.join(root, 'real/sub/f.txt'), 'inside\n')
  await symlink('real', path.join(root, 'rel-dir'))
  await symlink(path.join(root, 'real'), path.join(root, 'abs-dir'))
  await symlink('sub/f.txt', path.join(root, 'real/link-file'))
  await symlink('../../real/sub/f.txt', path.join(root, 'real/sub/up'))
  await symlink(outside, path.join(root, 'out-abs'))
  await symlink('../outside', path.join(root, 'out-rel'))
  await symlink('../../../../../../../../../..', path.join(root, 'way-up'))
  await symlink(path.join(ro, 'skill.md'), path.join(root, 'to-ro'))
  await symlink('loop-b', path.join(root, 'loop-a'))
  await symlink('loop-a', path.join(root, 'loop-b'))

  for (const p of ['rel-dir/sub/f.txt', 'abs-dir/sub/f.txt', 'real/link-file', 'rel-dir/link-file', 'real/sub/up']) {
    assert.equal((await readFileCapped(ws, p, 1000)).data.toString(), 'inside\n', p)
  }
  // A link into a read root reads (read-only), and never writes.
  assert.equal((await readFileCapped(ws, 'to-ro', 1000)).data.toString(), 'skill\n')
  await refused(writeFileAtomic(ws, 'to-ro', 'x'), /symbolic link/)

  for (const p of ['out-abs/secret', 'out-rel/secret', 'way-up/etc/passwd']) {
    await refused(readFileCapped(ws, p, 1000), /escapes workspace root/)
    await refused(writeFileAtomic(ws, `${p}-new`, 'x'), /escapes workspace root/)
  }
  await refused(readFileCapped(ws, 'loop-a', 1000), /symbolic links/)
  // The final component of a write is never followed.
  await refused(writeFileAtomic(ws, 'real/link-file', 'x'), /symbolic link/)
  assert.equal(await readFile(path.join(root, 'real/sub/f.txt'), 'utf8'), 'inside\n')
  assert.deepEqual(await readdir(outside), ['secret'])
})

test('writes create parents beneath the root, refuse protected and read-only paths, and clean up on failure', async (t) => {
  const { root, ro, ws } = await setup(t)
  const r = await writeFileAtomic(ws, 'a/b/c.txt', 'hello')
  assert.deepEqual(r, { created: true, bytesWritten: 5, rel: 'a/b/c.txt' })
  assert.equal(await readFile(path.join(root, 'a/b/c.txt'), 'utf8'), 'hello')
  await refused(writeFileAtomic(ws, '.git/hooks/pre-commit', 'x'), /protected/)
  await refused(writeFileAtomic(ws, 'x/.SSH/id', 'x'), /protected/)
  await refused(writeFileAtomic(ws, path.join(ro, 'new.md'), 'x'), /read-only/)
  // A link whose target is a protected folder: the resolved chain is checked too.
  await mkdir(path.join(root, '.git/hooks'), { recursive: true })
  await symlink('.git/hooks', path.join(root, 'hooks'))
  await refused(writeFileAtomic(ws, 'hooks/post-merge', 'x'), /protected/)
  // `a/b/c.txt/d` fails (c.txt is a file) and leaves no folder behind.
  await refused(writeFileAtomic(ws, 'n1/n2/x', Buffer.alloc(0), { exclusive: true }).then(async () => await writeFileAtomic(ws, 'n1/n2/x/y/z', 'x')), /Not a directory|exist/)
  assert.equal(await readFile(path.join(root, 'n1/n2/x'), 'utf8'), '')
  assert.deepEqual((await readdir(path.join(root, 'n1/n2'))).sort(), ['x'])
  await refused(writeFileAtomic(ws, 'a/b/c.txt', 'again', { exclusive: true }), /already exists/)
  await refused(removeFile(ws, 'a/b'), /directory/)
  await removeFile(ws, 'a/b/c.txt')
  await refused(removeFile(ws, 'a/b/c.txt'), /does not exist/)
})

test('locate of the root itself, and walk never enters a symlink', async (t) => {
  const { root, outside, ws } = await setup(t)
  await mkdir(path.join(root, 'd/e'), { recursive: true })
  await writeFile(path.join(root, 'd/e/f'), 'f')
  await symlink(outside, path.join(root, 'd/out'))
  const loc = await locate(ws, '.', 'read')
  assert.equal(loc.name, '')
  await loc.close()
  const base = await openForRead(ws, '.', { allowDirectory: true })
  const seen: string[] = []
  try {
    for await (const e of walk(base.fh)) seen.push(`${e.kind}:${e.rel}`)
  } finally {
    await base.fh.close()
  }
  assert.deepEqual(seen, ['dir:d', 'dir:d/e', 'file:d/e/f', 'symlink:d/out'])
})

const NO_PERL = !HAS_PERL && process.env.CI !== 'true'

test('a symlink-swap loop beside the calls never lets a read, write, delete or walk out of the tree', { skip: NO_PERL }, async (t) => {
  const { root, outside, ws } = await setup(t)
  await mkdir(path.join(root, 'e/d'), { recursive: true })
  await writeFile(path.join(root, 'e/secret'), 'inside\n')
  await writeFile(path.join(root, 'e/x'), 'inside x\n')
  await writeFile(path.join(outside, 'x'), 'OUTSIDE X\n')
  await mkdir(path.join(outside, 'd'))
  await symlink(outside, path.join(root, 'swap'))
  // Exchanges the directory `e` and the link `swap` (to the outside folder) as fast as it can.
  // The names go through variables: perl's syscall() dies on literal strings ("Modification of a
  // read-only value"), which would leave a loop that never swaps and a test that proves nothing.
  const loop = spawn('perl', ['-e', `chdir $ARGV[0] or die; my ($a, $b) = ("e", "swap"); while (1) { syscall(${RENAMEAT2}, -100, $a, -100, $b, 2) }`, root], { stdio: 'ignore' })
  // Killed and gone before the tree is removed (setup's after hook): a loop still renaming made rm fail (ENOTEMPTY).
  const exited = new Promise<void>((resolve) => { loop.once('exit', () => resolve()) })
  const stop = async (): Promise<void> => {
    if (loop.exitCode === null && loop.signalCode === null) loop.kill('SIGKILL')
    await exited
  }
  t.after(stop)

  let escapes = 0
  let successes = 0
  // Bounded by count and by time (the machine is shared): 200 rounds of 4 calls, or 20 s.
  const until = Date.now() + 20_000
  for (let i = 0; i < 200 && (i < 20 || Date.now() < until); i++) {
    const ops: Array<Promise<unknown>> = [
      readFileCapped(ws, 'e/secret', 1000).then((r) => { successes++; if (r.data.toString().includes('OUTSIDE')) escapes++ }),
      writeFileAtomic(ws, `e/d/w${i}`, 'w').then(() => { successes++ }),
      removeFile(ws, 'e/x').then(async () => { successes++; await writeFileAtomic(ws, 'e/x', 'inside x\n').catch(() => {}) }),
      (async () => {
        const base = await openForRead(ws, 'e', { allowDirectory: true })
        try {
          for await (const entry of walk(base.fh)) {
            if (entry.kind !== 'file') continue
            const f = await readFileCapped(ws, `e/${entry.rel}`, 1000).catch(() => undefined)
            if (f?.data.toString().includes('OUTSIDE') === true) escapes++
          }
          successes++
        } finally {
          await base.fh.close()
        }
      })()
    ]
    await Promise.allSettled(ops)
  }
  assert.equal(loop.exitCode, null, 'the swap loop exited early: nothing was swapped')
  await stop()
  assert.equal(escapes, 0)
  assert.ok(successes > 0, 'the calls must sometimes win the race, or the test proves nothing')
  assert.equal(await readFile(path.join(outside, 'x'), 'utf8'), 'OUTSIDE X\n', 'the outside file was deleted or changed')
  assert.deepEqual((await readdir(path.join(outside, 'd'))), [], 'something was written outside')
  assert.deepEqual((await readdir(outside)).sort(), ['d', 'secret', 'x'])
})
