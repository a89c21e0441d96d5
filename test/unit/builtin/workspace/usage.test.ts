import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdirSync, writeFileSync } from 'node:fs'
import { link, mkdir, mkdtemp, open, realpath, rename, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { ToolError } from '../../../../src/builtin/types.js'
import { WorkspaceUsage } from '../../../../src/builtin/workspace/usage.js'
import { testWorkspace } from '../../../helpers/workspace.js'

// What a workspace's usage figure counts, how it is kept (reserve/adjust/forget), and that a
// measure is bounded in time and never holds the event loop for long.

async function tempRoot (t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-usage-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const root = path.join(dir, 'ws')
  await mkdir(root)
  return root
}

/** A tree of `dirs` directories of `per` files of `size` bytes each. */
function manyFiles (root: string, dirs: number, per: number, size: number): void {
  // Synchronous: thousands of small async writes cost seconds on a busy host.
  const body = Buffer.alloc(size, 0x61)
  for (let d = 0; d < dirs; d++) {
    mkdirSync(path.join(root, `d${d}`))
    for (let i = 0; i < per; i++) writeFileSync(path.join(root, `d${d}`, `f${i}`), body)
  }
}

test('bytes are the apparent sizes of regular files (hard links once); every entry counts as a file', async (t) => {
  const root = await tempRoot(t)
  const outside = path.join(path.dirname(root), 'outside')
  await mkdir(outside)
  await writeFile(path.join(outside, 'huge'), Buffer.alloc(5000))
  await mkdir(path.join(root, 'a', 'b'), { recursive: true })
  await mkdir(path.join(root, 'empty'))
  await writeFile(path.join(root, 'a', 'one'), Buffer.alloc(1000))
  await writeFile(path.join(root, 'a', 'b', 'two'), Buffer.alloc(234))
  await link(path.join(root, 'a', 'b', 'two'), path.join(root, 'hard'))
  await symlink('one', path.join(root, 'a', 'link'))
  // Links to outside (a file, a directory) count as entries; what they point to is never counted or walked.
  await symlink(path.join(outside, 'huge'), path.join(root, 'out-file'))
  await symlink(outside, path.join(root, 'out-dir'))
  execFileSync('mkfifo', [path.join(root, 'fifo')])
  // A sparse file counts at its length.
  const fh = await open(path.join(root, 'sparse'), 'w')
  await fh.truncate(1 << 20)
  await fh.close()

  const usage = new WorkspaceUsage({ quotaBytes: 1 << 30, maxFiles: 1000 })
  const ws = testWorkspace(root)
  assert.equal(usage.get(ws), undefined)
  // a, a/b, empty, a/one, a/b/two, hard, a/link, out-file, out-dir, fifo, sparse
  assert.deepEqual(await usage.measure(ws), { bytes: 1000 + 234 + (1 << 20), files: 11, exact: true })
  assert.deepEqual(usage.get(ws), { bytes: 1000 + 234 + (1 << 20), files: 11, exact: true })
  assert.deepEqual(await usage.remaining(ws), { bytes: (1 << 30) - 1234 - (1 << 20), files: 989 })

  // A directory swapped for a symlink to a larger tree is not entered.
  await rename(path.join(root, 'a'), path.join(path.dirname(root), 'moved'))
  await symlink(path.dirname(root), path.join(root, 'a'))
  assert.deepEqual(await usage.measure(ws), { bytes: 234 + (1 << 20), files: 7, exact: true })
})

test('reserve counts a growth within the quota at once and refuses one past it with nothing changed; shrinking always passes', async (t) => {
  const root = await tempRoot(t)
  await writeFile(path.join(root, 'f'), Buffer.alloc(600))
  const usage = new WorkspaceUsage({ quotaBytes: 1000, maxFiles: 3 })
  const ws = testWorkspace(root)
  await usage.reserve(ws, 400, 1)
  assert.deepEqual(usage.get(ws), { bytes: 1000, files: 2, exact: true })
  await assert.rejects(usage.reserve(ws, 1, 0), (err: unknown) => err instanceof ToolError && err.reason === 'quota' && /WORKSPACE_QUOTA_EXCEEDED/.test(err.message) && /1000 bytes/.test(err.message))
  await usage.reserve(ws, 0, 1)
  await assert.rejects(usage.reserve(ws, 0, 1), (err: unknown) => err instanceof ToolError && err.reason === 'quota' && /file limit/.test(err.message))
  assert.deepEqual(usage.get(ws), { bytes: 1000, files: 3, exact: true })
  // Over both limits already (the quota was lowered): a write that shrinks still goes through.
  usage.adjust(ws, 500, 5)
  await usage.reserve(ws, -100, 0)
  await assert.rejects(usage.reserve(ws, 1, -1))
  assert.deepEqual(usage.get(ws), { bytes: 1400, files: 8, exact: true })
  usage.adjust(ws, -1e9, -1e9)
  assert.deepEqual(usage.get(ws), { bytes: 0, files: 0, exact: true }, 'never negative')
  usage.forget(ws)
  assert.equal(usage.get(ws), undefined)
  // The next use measures again: the tree holds one 600-byte file.
  assert.deepEqual(await usage.remaining(ws), { bytes: 400, files: 2 })
})

test('a measure past its budget returns a partial figure marked inexact and finishes in the background', async (t) => {
  const root = await tempRoot(t)
  manyFiles(root, 20, 500, 10)
  const usage = new WorkspaceUsage({ quotaBytes: 1 << 30, maxFiles: 1 << 20, measureBudgetMs: 1 })
  const ws = testWorkspace(root)
  const partial = await usage.measure(ws)
  assert.equal(partial.exact, false)
  assert.ok(partial.files < 10_020, `partial: ${partial.files} entries`)
  assert.deepEqual(usage.get(ws), { ...partial, exact: false })
  // The same walk goes on; a caller with time gets its whole result.
  const full = await usage.measure(ws, 60_000)
  assert.deepEqual(full, { bytes: 100_000, files: 10_020, exact: true })
  assert.deepEqual(usage.get(ws), full)
})

test('a measure yields to the event loop while it walks a large tree', async (t) => {
  const root = await tempRoot(t)
  // Big enough that the walk takes several of its 8 ms slices (about 60 ms here).
  manyFiles(root, 40, 500, 1)
  const usage = new WorkspaceUsage({ quotaBytes: 1 << 30, maxFiles: 1 << 20, measureBudgetMs: 60_000 })
  // Turns of the event loop during the measure, counted by a chain of setImmediate (one per
  // turn), not by a timer: a fast walk on a fast disk still yields between its batches, and a
  // timer of 1 ms may not get its turn that often on a loaded machine.
  let turns = 0
  let stop = false
  const spin = (): void => {
    if (stop) return
    turns++
    setImmediate(spin)
  }
  setImmediate(spin)
  const started = performance.now()
  const m = await usage.measure(testWorkspace(root))
  const took = performance.now() - started
  stop = true
  assert.deepEqual(m, { bytes: 20_000, files: 20_040, exact: true })
  // A walk that never yields lets the loop turn at most once before it is done.
  assert.ok(turns >= 3, `${turns} event-loop turns during a ${took.toFixed(0)} ms measure`)
  t.diagnostic(`20,040 entries: ${took.toFixed(0)} ms, ${turns} event-loop turns`)
})

test('concurrent measures share one walk; forget drops a walk\'s result that arrives later', async (t) => {
  const root = await tempRoot(t)
  manyFiles(root, 4, 200, 5)
  const usage = new WorkspaceUsage({ quotaBytes: 1 << 30, maxFiles: 1 << 20 })
  const ws = testWorkspace(root)
  const [a, b] = await Promise.all([usage.measure(ws), usage.measure(ws)])
  assert.deepEqual(a, b)
  assert.deepEqual(a, { bytes: 4000, files: 804, exact: true })
  const pending = usage.measure(ws)
  usage.forget(ws)
  await pending
  assert.equal(usage.get(ws), undefined)
})

test('a tree deeper than the walk goes is reported inexact', async (t) => {
  const root = await tempRoot(t)
  execFileSync('sh', ['-c', 'for i in $(seq 300); do mkdir d && cd d; done; echo hi > f'], { cwd: root })
  const m = await new WorkspaceUsage({ quotaBytes: 1 << 30, maxFiles: 1 << 20 }).measure(testWorkspace(root))
  assert.equal(m.exact, false)
  assert.equal(m.bytes, 0)
  execFileSync('sh', ['-c', 'for i in $(seq 250); do mkdir e && cd e; done; echo hi > f'], { cwd: root })
  await rm(path.join(root, 'd'), { recursive: true })
  assert.deepEqual(await new WorkspaceUsage({ quotaBytes: 1 << 30, maxFiles: 1 << 20 }).measure(testWorkspace(root)), { bytes: 3, files: 251, exact: true })
})
