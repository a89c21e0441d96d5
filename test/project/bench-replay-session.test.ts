import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readFile, readdir, rm, stat } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { directExecutor, freshCopy, loadSession, REPLAY_DIR, shell } from '../../bench/fixtures/replay/direct.js'
import type { BashAnswer } from '../../bench/fixtures/replay/direct.js'

// Bench row 9 (bench/replay.ts) replays a recorded agent session on a copy of picomatch. The module
// fails on any failed call, but it only runs in `npm run bench`: this keeps the recording and the
// project it works on in step with each other in `npm test`.

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..')
const PROJECT = path.join(REPLAY_DIR, 'picomatch')

async function files (root: string, rel = ''): Promise<string[]> {
  const out: string[] = []
  for (const e of await readdir(path.join(root, rel), { withFileTypes: true })) {
    const r = rel === '' ? e.name : `${rel}/${e.name}`
    if (e.isDirectory()) out.push(...await files(root, r))
    else out.push(r)
  }
  return out.sort()
}

test('the project is picomatch as published, with its licence, under 300 KiB', async () => {
  const names = await files(PROJECT)
  assert.ok(names.includes('LICENSE'))
  assert.match(await readFile(path.join(PROJECT, 'LICENSE'), 'utf8'), /^The MIT License/)
  let bytes = 0
  for (const f of names) {
    const copy = await readFile(path.join(PROJECT, f))
    bytes += copy.length
    assert.deepEqual(copy, await readFile(path.join(REPO, 'node_modules/picomatch', f)), `${f} differs from node_modules/picomatch`)
  }
  assert.ok(bytes < 300 * 1024, `${bytes} bytes`)
})

test('the recorded session replays directly on a fresh copy: every call succeeds, each bash command exits as recorded', async (t) => {
  const session = await loadSession()
  assert.ok(session.calls.length >= 150, `${session.calls.length} calls`)
  const dir = await mkdtemp(path.join(os.tmpdir(), 'replay-test-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  const root = path.join(dir, 'ws')
  await freshCopy(session, root)
  // The setup plants the bug the session fixes.
  const planted = await readFile(path.join(root, 'lib/utils.js'), 'utf8')
  assert.notEqual(planted, await readFile(path.join(PROJECT, 'lib/utils.js'), 'utf8'))
  const env = { PATH: [path.dirname(process.execPath), '/usr/bin', '/bin'].join(':'), HOME: dir }
  const bash = async (command: string): Promise<BashAnswer> => await shell(command, root, env)

  const run = directExecutor(root, bash)
  const exits: number[] = []
  for (const call of session.calls) {
    const r = await run(call)
    if (call.name === 'bash') exits.push(Number(r.figure))
  }
  // The story: one failing test run (before the fix), every other command succeeds.
  assert.deepEqual(exits.filter((c) => c !== 0), [1])
  // The fix is upstream's code again (the session adds a comment above it).
  const fixed = await readFile(path.join(root, 'lib/utils.js'), 'utf8')
  assert.ok(fixed.includes(session.setup[0]?.find ?? '<missing setup>'))
  assert.ok((await stat(path.join(root, 'CHANGELOG.md'))).isFile())
  assert.ok((await files(root)).filter((f) => f.startsWith('test/')).length >= 5)
})
