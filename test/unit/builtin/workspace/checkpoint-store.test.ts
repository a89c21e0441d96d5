/**
 * The checkpoint store (src/builtin/workspace/checkpoint-store.ts) on real directories: a restore
 * makes the tree exactly the checkpoint's (files, empty directories, modes, symlinks kept as
 * symlinks), a checkpoint after a few changes reads and stores only those, retention and delete
 * collect exactly the objects nothing else references, and a symlink-swap loop beside create or
 * restore never gets content from outside into the store nor a write outside the workspace.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { spawn, spawnSync } from 'node:child_process'
import type { ChildProcess } from 'node:child_process'
import { chmod, lstat, mkdir, mkdtemp, readdir, readFile, readlink, realpath, rm, stat, symlink, writeFile } from 'node:fs/promises'
import { existsSync } from 'node:fs'
import { setTimeout as sleep } from 'node:timers/promises'
import os from 'node:os'
import path from 'node:path'
import { HttpError } from '../../../../src/errors.js'
import { CheckpointStore } from '../../../../src/builtin/workspace/checkpoint-store.js'
import { RACY_MS } from '../../../../src/builtin/workspace/checkpoint-snapshot.js'
import { testWorkspace } from '../../../helpers/workspace.js'

const RENAMEAT2 = process.arch === 'arm64' ? 276 : 316
const HAS_PERL = spawnSync('perl', ['-e', '1']).status === 0
const IS_ROOT = process.getuid?.() === 0

/**
 * Exchanges the directory `e` and the link `swap` (renameat2 RENAME_EXCHANGE) as fast as it can,
 * as a tenant's own process could. The names are perl variables: literal strings passed to
 * syscall() make perl die at once ("Modification of a read-only value"), and the test would pass
 * without any swap happening. A missing name (a restore recreating it) is retried; any other
 * failure ends it, which the tests check.
 */
function swapLoop (root: string): ChildProcess {
  return spawn('perl', ['-e', `chdir $ARGV[0] or die; my ($a, $b) = ("e", "swap"); while (1) { syscall(${RENAMEAT2}, -100, $a, -100, $b, 2) == 0 or $!{ENOENT} or die "renameat2: $!" }`, root], { stdio: ['ignore', 'ignore', 'inherit'] })
}

async function setup (t: { after: (fn: () => Promise<void>) => void }, opts: { checkpointsPerWorkspace?: number } = {}) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-ckpt-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const root = path.join(dir, 'ws')
  const outside = path.join(dir, 'outside')
  const storeDir = path.join(dir, 'store')
  await mkdir(root)
  await mkdir(outside)
  const store = new CheckpointStore({ dir: storeDir, ...opts })
  const ws = testWorkspace(root, { tenant: 'tenant-a', workspaceId: 'w1' })
  return { dir, root, outside, storeDir, tenantDir: path.join(storeDir, 'tenant-a'), store, ws }
}

const sha = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex')

function objectPath (tenantDir: string, hash: string): string {
  return path.join(tenantDir, 'objects', hash.slice(0, 2), hash.slice(2))
}

/** Every object (or tree) file of a tenant's store, with its size. */
async function objects (tenantDir: string, kind: 'objects' | 'trees' = 'objects'): Promise<Map<string, number>> {
  const out = new Map<string, number>()
  const base = path.join(tenantDir, kind)
  if (!existsSync(base)) return out
  for (const prefix of await readdir(base)) {
    for (const rest of await readdir(path.join(base, prefix))) {
      out.set(prefix + rest, (await stat(path.join(base, prefix, rest))).size)
    }
  }
  return out
}

/** The tree as data: what a restore must reproduce exactly. Plain paths: the test owns this directory. */
async function describe (root: string): Promise<string[]> {
  const out: string[] = []
  const visit = async (dir: string, rel: string): Promise<void> => {
    for (const name of (await readdir(dir)).sort()) {
      const p = path.join(dir, name)
      const r = rel === '' ? name : `${rel}/${name}`
      const st = await lstat(p)
      if (st.isSymbolicLink()) out.push(`link ${r} -> ${await readlink(p)}`)
      else if (st.isDirectory()) {
        out.push(`dir ${r} ${(st.mode & 0o7777).toString(8)}`)
        await visit(p, r)
      } else if (st.isFile()) {
        out.push(`file ${r} ${(st.mode & 0o7777).toString(8)} ${Math.round(st.mtimeMs)} ${sha(await readFile(p))}`)
      } else out.push(`other ${r}`)
    }
  }
  await visit(root, '')
  return out
}

function isCode (codeName: string, status: number) {
  return (err: unknown): boolean => {
    assert.ok(err instanceof HttpError, `expected an HttpError, got ${String(err)}`)
    assert.equal(err.code, codeName)
    assert.equal(err.statusCode, status)
    return true
  }
}

test('create then restore gives back exactly the tree: files, nested and empty dirs, modes, symlinks', async (t) => {
  const { root, outside, store, ws } = await setup(t)
  await writeFile(path.join(outside, 'target.txt'), 'outside target\n')
  await mkdir(path.join(root, 'src/lib/deep'), { recursive: true })
  await mkdir(path.join(root, 'empty/nested-empty'), { recursive: true })
  await mkdir(path.join(root, 'private'), { mode: 0o700 })
  await chmod(path.join(root, 'private'), 0o700)
  await writeFile(path.join(root, 'README.md'), '# hello\n')
  await writeFile(path.join(root, 'src/main.ts'), 'export const x = 1\n')
  await writeFile(path.join(root, 'src/lib/deep/util.ts'), 'export const y = 2\n')
  await writeFile(path.join(root, 'run.sh'), '#!/bin/sh\necho hi\n')
  await chmod(path.join(root, 'run.sh'), 0o755)
  await writeFile(path.join(root, 'private/key'), 'secret-ish\n')
  await chmod(path.join(root, 'private/key'), 0o600)
  await writeFile(path.join(root, 'zero'), '')
  await writeFile(path.join(root, 'binary.bin'), Buffer.from([0, 1, 2, 255, 254, 0]))
  await symlink('src/main.ts', path.join(root, 'link-inside'))
  await symlink('does/not/exist', path.join(root, 'link-dangling'))
  await symlink(path.join(outside, 'target.txt'), path.join(root, 'link-outside'))
  await symlink('../..', path.join(root, 'src/lib/link-up'))
  if (spawnSync('mkfifo', [path.join(root, 'fifo')]).status !== 0) t.diagnostic('mkfifo unavailable: no FIFO in this run')

  const withoutFifo = (await describe(root)).filter((l) => l !== 'other fifo')
  const cp = await store.create(ws, { label: 'before the model' })
  assert.match(cp.checkpointId, /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/)
  assert.equal(cp.label, 'before the model')
  // Entries, as an upload and the workspace listing count them: 6 directories, 7 files, 4 symlinks (not the FIFO).
  assert.equal(cp.files, 17)
  assert.equal(cp.bytes, 8 + 19 + 19 + 18 + 11 + 0 + 6)
  assert.ok(!Number.isNaN(Date.parse(cp.createdAt)))

  // Added, changed, deleted, re-moded, retyped entries.
  await writeFile(path.join(root, 'added.txt'), 'new\n')
  await mkdir(path.join(root, 'added-dir/sub'), { recursive: true })
  await writeFile(path.join(root, 'added-dir/sub/f'), 'x')
  await writeFile(path.join(root, 'src/main.ts'), 'export const x = 2 // changed\n')
  await writeFile(path.join(root, 'README.md'), '# hullo\n') // same size
  await rm(path.join(root, 'src/lib/deep/util.ts'))
  await rm(path.join(root, 'empty'), { recursive: true })
  await chmod(path.join(root, 'run.sh'), 0o644)
  await chmod(path.join(root, 'private'), 0o755)
  await rm(path.join(root, 'link-inside'))
  await mkdir(path.join(root, 'link-inside')) // a link became a directory
  await writeFile(path.join(root, 'link-inside/in'), 'in')
  await rm(path.join(root, 'zero'))
  await symlink('/etc/passwd', path.join(root, 'zero')) // a file became a link
  await rm(path.join(root, 'link-dangling'))
  await writeFile(path.join(root, 'link-dangling'), 'was a link')
  await rm(path.join(root, 'binary.bin'))
  await mkdir(path.join(root, 'binary.bin')) // a file became a directory
  assert.notDeepEqual(await describe(root), withoutFifo)

  assert.deepEqual(await store.restore(ws, cp.checkpointId), { restored: true, checkpointId: cp.checkpointId })
  assert.deepEqual(await describe(root), withoutFifo)
  // The links were recreated as links, never followed: the outside file is untouched.
  assert.equal(await readFile(path.join(outside, 'target.txt'), 'utf8'), 'outside target\n')
  assert.deepEqual(await readdir(outside), ['target.txt'])
  // Nothing left of the restore's temp files.
  assert.deepEqual((await describe(root)).filter((l) => l.includes('.tg-restore-')), [])

  // A second restore right away has nothing to do and changes nothing.
  const inoBefore = (await stat(path.join(root, 'src/main.ts'))).ino
  await store.restore(ws, cp.checkpointId)
  assert.equal((await stat(path.join(root, 'src/main.ts'))).ino, inoBefore)
  assert.deepEqual(await describe(root), withoutFifo)
})

test('a restore through a store that lost its memory (new process) still gives the exact tree', async (t) => {
  const { root, storeDir, store, ws } = await setup(t)
  await mkdir(path.join(root, 'a/b'), { recursive: true })
  await writeFile(path.join(root, 'a/b/one'), 'one')
  await writeFile(path.join(root, 'a/two'), 'two')
  await chmod(path.join(root, 'a/two'), 0o600)
  const expected = await describe(root)
  const cp = await store.create(ws)
  await writeFile(path.join(root, 'a/b/one'), 'ONE') // same size, content differs
  await chmod(path.join(root, 'a/two'), 0o644) // same content, mode differs
  await writeFile(path.join(root, 'a/three'), '3')
  const fresh = new CheckpointStore({ dir: storeDir })
  await fresh.restore(ws, cp.checkpointId)
  assert.deepEqual(await describe(root), expected)
})

test('after 10 files change in a 5,000-file tree, a checkpoint reads and stores exactly those 10; a restore rewrites only them', async (t) => {
  const { root, tenantDir, store, ws } = await setup(t)
  const all: string[] = []
  for (let d = 0; d < 50; d++) {
    const dir = path.join(root, `d${d}`)
    await mkdir(dir)
    await Promise.all(Array.from({ length: 100 }, async (_v, f) => {
      const file = path.join(dir, `f${f}.txt`)
      all.push(file)
      await writeFile(file, `file ${d}/${f}\n${'x'.repeat(f)}\n`)
    }))
  }
  // Files changed within RACY_MS of a checkpoint are read again by the next one (see there):
  // each step below waits that long so the counts are exact.
  const settle = async (): Promise<void> => { await sleep(RACY_MS + 50) }
  await settle()
  const first = await store.create(ws)
  assert.equal(first.files, 5050) // 5,000 files in 50 directories
  assert.equal(first.work.hashedFiles, 5000)
  const before = await objects(tenantDir)
  assert.equal(before.size, 5000)

  all.sort()
  const changed = all.filter((_f, i) => i % 500 === 7)
  assert.equal(changed.length, 10)
  let changedBytes = 0
  for (const f of changed) {
    const data = `changed ${f}\n`
    changedBytes += Buffer.byteLength(data)
    await writeFile(f, data)
  }
  await settle()
  const second = await store.create(ws)
  assert.equal(second.files, 5050)
  assert.equal(second.work.hashedFiles, 10)
  assert.equal(second.work.hashedBytes, changedBytes)
  assert.equal(second.work.newObjects, 10)
  const after = await objects(tenantDir)
  assert.equal(after.size, 5010)
  let added = 0
  for (const [h, size] of after) if (!before.has(h)) added += size
  assert.equal(added, changedBytes)
  for (const f of changed) assert.ok(after.has(sha(await readFile(f))))

  // Change 10 other files, then restore the second checkpoint: only those 10 get a new inode.
  const touched = all.filter((_f, i) => i % 500 === 123)
  const inodes = new Map<string, number>()
  for (const f of all) inodes.set(f, (await stat(f)).ino)
  const original = new Map<string, string>()
  for (const f of touched) original.set(f, await readFile(f, 'utf8'))
  for (const f of touched) await writeFile(f, 'scribbled over\n') // in place: same inode
  await store.restore(ws, second.checkpointId)
  for (const f of all) {
    const ino = (await stat(f)).ino
    if (touched.includes(f)) assert.notEqual(ino, inodes.get(f), `${f} was not rewritten`)
    else assert.equal(ino, inodes.get(f), `${f} was rewritten though unchanged`)
  }
  for (const f of touched) assert.equal(await readFile(f, 'utf8'), original.get(f))

  // And a checkpoint right after that restore reads only the files the restore just wrote (their
  // timestamps are racily close to the restore's own stat, so they are read once more), and stores nothing.
  const third = await store.create(ws)
  assert.ok(third.work.hashedFiles <= touched.length, `${third.work.hashedFiles} files read`)
  assert.equal(third.work.newObjects, 0)
  await settle()
  const fourth = await store.create(ws)
  assert.equal(fourth.work.hashedFiles, 0)
  assert.equal(fourth.work.newObjects, 0)
})

test('a same-size rewrite in the same clock tick as a restore is still seen by the next restore', async (t) => {
  // A writer racing the restore within one kernel timestamp tick leaves size, mtime and ctime
  // as the restore recorded them, so the stat memory alone would call the file unchanged.
  const { root, store, ws } = await setup(t)
  const f = path.join(root, 'f.txt')
  await writeFile(f, 'original 0\n')
  const cp = await store.create(ws)
  for (let round = 0; round < 100; round++) {
    await writeFile(f, 'changed 11\n') // same size
    await store.restore(ws, cp.checkpointId)
    await writeFile(f, 'changed 22\n') // right after the restore wrote it: often the same tick
    await store.restore(ws, cp.checkpointId)
    assert.equal(await readFile(f, 'utf8'), 'original 0\n', `round ${round}`)
  }
})

test('a symlink-swap loop during create never brings outside content into the store', { skip: !HAS_PERL && process.env.CI !== 'true' }, async (t) => {
  const { root, outside, tenantDir, store, ws } = await setup(t)
  const SENTINEL = `OUTSIDE-SENTINEL-${Date.now()}`
  await writeFile(path.join(outside, 'sentinel.txt'), SENTINEL)
  await mkdir(path.join(outside, 'sub'))
  await writeFile(path.join(outside, 'sub/sentinel.txt'), SENTINEL)
  await mkdir(path.join(root, 'e/sub'), { recursive: true })
  await writeFile(path.join(root, 'e/sentinel.txt'), 'inside')
  await writeFile(path.join(root, 'e/sub/sentinel.txt'), 'inside too')
  await symlink(outside, path.join(root, 'swap'))
  const loop = swapLoop(root)
  t.after(() => { loop.kill('SIGKILL') })

  let made = 0
  const until = Date.now() + 10_000
  for (let i = 0; i < 60 && (i < 10 || Date.now() < until); i++) {
    // A new inside file each round, so each create reads something again.
    await writeFile(path.join(root, `round-${i}`), `round ${i}`)
    await store.create(ws)
    made++
  }
  assert.equal(loop.exitCode, null, 'the swap loop died early')
  loop.kill('SIGKILL')
  assert.ok(made >= 10)
  for (const h of (await objects(tenantDir)).keys()) {
    const data = await readFile(objectPath(tenantDir, h), 'utf8')
    assert.ok(!data.includes(SENTINEL), 'outside content reached the store')
  }
})

test('a symlink-swap loop during restore never writes or deletes outside the workspace', { skip: !HAS_PERL && process.env.CI !== 'true' }, async (t) => {
  const { root, outside, store, ws } = await setup(t)
  await writeFile(path.join(outside, 'sentinel.txt'), 'outside, keep me\n')
  await mkdir(path.join(outside, 'sub'))
  const outsideBefore = await describe(outside)
  await mkdir(path.join(root, 'e/sub'), { recursive: true })
  await symlink(outside, path.join(root, 'swap'))
  await writeFile(path.join(root, 'e/a.txt'), 'A')
  await writeFile(path.join(root, 'e/sub/a.txt'), 'A sub')
  const a = await store.create(ws)
  await rm(path.join(root, 'e/a.txt'))
  await writeFile(path.join(root, 'e/b.txt'), 'B')
  await writeFile(path.join(root, 'e/sub/a.txt'), 'B sub')
  await writeFile(path.join(root, 'e/sentinel.txt'), 'inside sentinel\n')
  const b = await store.create(ws)

  const loop = swapLoop(root)
  t.after(() => { loop.kill('SIGKILL') })
  let restores = 0
  let failures = 0
  const until = Date.now() + 10_000
  for (let i = 0; i < 100 && (i < 10 || Date.now() < until); i++) {
    try {
      await store.restore(ws, i % 2 === 0 ? a.checkpointId : b.checkpointId)
      restores++
    } catch {
      failures++ // the tree changed under the restore: allowed, as long as nothing leaks
    }
  }
  const alive = loop.exitCode === null
  loop.kill('SIGKILL')
  t.diagnostic(`${restores} restores, ${failures} interrupted`)
  assert.ok(alive, 'the swap loop died early')
  assert.ok(restores > 0)
  assert.deepEqual(await describe(outside), outsideBefore)
})

test('the 21st checkpoint drops the oldest and its unreferenced objects; shared ones stay', async (t) => {
  const { root, tenantDir, store, ws } = await setup(t)
  await writeFile(path.join(root, 'shared.txt'), 'shared by every checkpoint\n')
  const ids: string[] = []
  for (let i = 0; i < 21; i++) {
    await writeFile(path.join(root, 'unique.txt'), `version ${i}\n`)
    ids.push((await store.create(ws, { label: `v${i}` })).checkpointId)
  }
  await store.whenIdle(ws)
  const list = await store.list(ws)
  assert.equal(list.length, 20)
  assert.deepEqual(list.map((c) => c.checkpointId), ids.slice(1).reverse())
  assert.equal(list[0]?.label, 'v20')
  assert.equal(existsSync(objectPath(tenantDir, sha('version 0\n'))), false, 'the dropped checkpoint\'s own object stays')
  assert.equal(existsSync(objectPath(tenantDir, sha('version 1\n'))), true)
  assert.equal(existsSync(objectPath(tenantDir, sha('shared by every checkpoint\n'))), true)
  assert.equal((await objects(tenantDir)).size, 21)
  await assert.rejects(store.restore(ws, ids[0] as string), isCode('GW_CHECKPOINT_NOT_FOUND', 404))
  // The oldest one kept still restores whole.
  await store.restore(ws, ids[1] as string)
  assert.equal(await readFile(path.join(root, 'unique.txt'), 'utf8'), 'version 1\n')
})

test('CHECKPOINTS_PER_WORKSPACE is a constructor option', async (t) => {
  const { root, store, ws } = await setup(t, { checkpointsPerWorkspace: 2 })
  for (let i = 0; i < 3; i++) {
    await writeFile(path.join(root, 'f'), String(i))
    await store.create(ws)
  }
  assert.equal((await store.list(ws)).length, 2)
  assert.throws(() => new CheckpointStore({ dir: path.join(root, '..', 'x'), checkpointsPerWorkspace: 0 }), /positive integer/)
})

test('delete removes one checkpoint and the objects only it used; deleteAll keeps other workspaces\' objects', async (t) => {
  const { root, dir, tenantDir, store, ws } = await setup(t)
  await writeFile(path.join(root, 'common'), 'common\n')
  await writeFile(path.join(root, 'f'), 'first\n')
  const one = await store.create(ws)
  await writeFile(path.join(root, 'f'), 'second\n')
  const two = await store.create(ws)

  await store.delete(ws, one.checkpointId)
  assert.deepEqual((await store.list(ws)).map((c) => c.checkpointId), [two.checkpointId])
  assert.equal(existsSync(objectPath(tenantDir, sha('first\n'))), false)
  assert.equal(existsSync(objectPath(tenantDir, sha('second\n'))), true)
  await assert.rejects(store.restore(ws, one.checkpointId), isCode('GW_CHECKPOINT_NOT_FOUND', 404))
  await assert.rejects(store.delete(ws, one.checkpointId), isCode('GW_CHECKPOINT_NOT_FOUND', 404))

  // A second workspace of the same tenant shares the 'common' object.
  const root2 = path.join(dir, 'ws2')
  await mkdir(root2)
  await writeFile(path.join(root2, 'common'), 'common\n')
  const ws2 = testWorkspace(root2, { tenant: 'tenant-a', workspaceId: 'w2' })
  const other = await store.create(ws2)
  await store.deleteAll(ws)
  assert.deepEqual(await store.list(ws), [])
  assert.equal(existsSync(objectPath(tenantDir, sha('second\n'))), false)
  assert.equal(existsSync(objectPath(tenantDir, sha('common\n'))), true)
  assert.deepEqual([...(await objects(tenantDir)).keys()], [sha('common\n')])
  await store.deleteAll(ws2)
  assert.equal((await objects(tenantDir)).size, 0)
  assert.equal((await objects(tenantDir, 'trees')).size, 0)
  await assert.rejects(store.restore(ws2, other.checkpointId), isCode('GW_CHECKPOINT_NOT_FOUND', 404))
})

test('unknown checkpoint ids are 404, malformed ones 400, bad labels 400', async (t) => {
  const { store, ws } = await setup(t)
  await assert.rejects(store.restore(ws, 'nope'), isCode('GW_CHECKPOINT_NOT_FOUND', 404))
  await assert.rejects(store.delete(ws, 'nope'), isCode('GW_CHECKPOINT_NOT_FOUND', 404))
  for (const bad of ['../x', '.hidden', '', 'a/b', 'x'.repeat(65)]) {
    await assert.rejects(store.restore(ws, bad), isCode('GW_BAD_REQUEST', 400), bad)
    await assert.rejects(store.delete(ws, bad), isCode('GW_BAD_REQUEST', 400), bad)
  }
  await assert.rejects(store.create(ws, { label: 'a\nb' }), isCode('GW_BAD_REQUEST', 400))
  await assert.rejects(store.create(ws, { label: 'x'.repeat(201) }), isCode('GW_BAD_REQUEST', 400))
  // Tenants do not see each other's checkpoints.
  const cp = await store.create(ws)
  const other = { ...ws, tenant: 'tenant-b' }
  await assert.rejects(store.restore(other, cp.checkpointId), isCode('GW_CHECKPOINT_NOT_FOUND', 404))
})

test('restored files, directories and links belong to the workspace owner', { skip: !IS_ROOT }, async (t) => {
  const { root, store, ws } = await setup(t)
  const owned = { ...ws, owner: { uid: 65534, gid: 65534 } }
  await mkdir(path.join(root, 'd'))
  await writeFile(path.join(root, 'd/f'), 'f')
  await symlink('d/f', path.join(root, 'l'))
  const cp = await store.create(owned)
  await rm(path.join(root, 'd'), { recursive: true })
  await rm(path.join(root, 'l'))
  await store.restore(owned, cp.checkpointId)
  for (const p of ['d', 'd/f', 'l']) {
    const st = await lstat(path.join(root, p))
    assert.equal(st.uid, 65534, p)
    assert.equal(st.gid, 65534, p)
  }
})

test('a full sweep (deleteAll) also removes what a crashed create left behind, and keeps what other workspaces use', async (t) => {
  const { root, dir, tenantDir, store, ws } = await setup(t)
  await writeFile(path.join(root, 'f'), 'kept by w2\n')
  await store.create(ws)
  const root2 = path.join(dir, 'ws2')
  await mkdir(root2)
  await writeFile(path.join(root2, 'f'), 'kept by w2\n')
  const ws2 = testWorkspace(root2, { tenant: 'tenant-a', workspaceId: 'w2' })
  const cp2 = await store.create(ws2)
  // An object and a temp file no checkpoint references, as a process killed mid-create leaves them.
  const orphan = sha('orphan\n')
  await mkdir(path.dirname(objectPath(tenantDir, orphan)), { recursive: true })
  await writeFile(objectPath(tenantDir, orphan), 'orphan\n')
  await writeFile(path.join(tenantDir, 'tmp', 'leftover'), 'partial')
  await store.deleteAll(ws)
  assert.deepEqual([...(await objects(tenantDir)).keys()], [sha('kept by w2\n')])
  assert.deepEqual(await readdir(path.join(tenantDir, 'tmp')), [])
  await rm(path.join(root2, 'f'))
  await store.restore(ws2, cp2.checkpointId)
  assert.equal(await readFile(path.join(root2, 'f'), 'utf8'), 'kept by w2\n')
})
