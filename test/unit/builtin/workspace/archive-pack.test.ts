/**
 * Workspace downloads (src/builtin/workspace/archive-pack.ts): the streamed tar.gz, extracted again by
 * the upload side and by the system `tar xzf`; a symlink-swap loop beside it, a consumer that stops
 * halfway, and the memory of a large tree.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, open, readdir, rm, stat, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { buffer as collect } from 'node:stream/consumers'
import { gunzipSync } from 'node:zlib'
import { HttpError } from '../../../../src/errors.js'
import { extractArchive } from '../../../../src/builtin/workspace/archive-extract.js'
import { packWorkspace } from '../../../../src/builtin/workspace/archive-pack.js'
import { extract, LIMITS, makeTree, refused, setup, snapshot } from '../../../helpers/archive.js'
import { testWorkspace } from '../../../helpers/workspace.js'

test('pack then extract gives the same tree; symlinks stay links, nothing outside is read', async (t) => {
  const c = await setup(t)
  const root = path.join(c.dir, 'ws')
  await mkdir(root)
  await makeTree(root, c.outside)
  const gz = await collect(await packWorkspace(testWorkspace(root)))
  assert.ok(!gz.includes(Buffer.from('SENTINEL')))

  // The escape link is refused by the upload checks (absolute target): the rest must match.
  await refused(c, extract(c, gz), 'GW_BAD_ARCHIVE', /"escape" has an absolute target/)
  await rm(path.join(root, 'escape'))
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  const gz2 = await collect(await packWorkspace(testWorkspace(root)))
  const res = await extract(c, gz2)
  const want = await snapshot(root)
  assert.deepEqual(await snapshot(c.staging), want)
  const files = Object.values(want)
  assert.equal(res.files, files.length)
  assert.equal(res.bytes, files.reduce((n, s) => n + (s.size ?? 0), 0))

  // And the system tar reads it the same way.
  const sys = path.join(c.dir, 'sys')
  await mkdir(sys)
  const r = spawnSync('tar', ['xzf', '-', '-C', sys], { input: gz2 })
  assert.equal(r.status, 0, r.stderr.toString())
  assert.deepEqual(await snapshot(sys), want)
  await rm(sys, { recursive: true })
  await rm(c.staging, { recursive: true })
  await mkdir(c.staging, { mode: 0o700 })
})

test('a subdirectory is packed alone, by its names in the workspace; a file or a missing path is a 400', async (t) => {
  const c = await setup(t)
  const root = path.join(c.dir, 'ws')
  await mkdir(root)
  await makeTree(root, c.outside)
  await rm(path.join(root, 'escape'))
  // Names keep the src/ prefix, so the archive extracts (or uploads) back to the same place, and
  // src/up-link -> ../README.md stays inside it.
  const want = Object.fromEntries(Object.entries(await snapshot(root)).filter(([k]) => k === 'src' || k.startsWith('src/')))
  for (const sub of ['src', './src/', 'link-to-src']) {
    if (sub === 'link-to-src') await symlink('src', path.join(root, 'link-to-src'))
    await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
    await extract(c, await collect(await packWorkspace(testWorkspace(root), sub)))
    assert.deepEqual(await snapshot(c.staging), want, sub)
  }
  await rm(path.join(root, 'link-to-src'))
  // Deeper: the parents are implied, the directory packed keeps its own mode.
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
  const lib = await collect(await packWorkspace(testWorkspace(root), 'src/lib'))
  const names = spawnSync('tar', ['tzf', '-'], { input: lib }).stdout.toString().split('\n').filter(Boolean)
  assert.deepEqual(names, ['src/lib/', 'src/lib/a.ts'])
  for (const bad of ['README.md', 'missing', '../outside', c.outside]) {
    await assert.rejects(packWorkspace(testWorkspace(root), bad), (err: unknown) => err instanceof HttpError && err.code === 'GW_BAD_REQUEST')
  }
  await rm(c.staging, { recursive: true }); await mkdir(c.staging, { mode: 0o700 })
})

// ------------------------------------------------------------------------------------------
// Streaming

const RENAMEAT2 = process.arch === 'arm64' ? 276 : 316
const HAS_PERL = spawnSync('perl', ['-e', '1']).status === 0

test('a symlink-swap loop beside a download never gets an outside file into the archive', { skip: !HAS_PERL && process.env.CI !== 'true' }, async (t) => {
  const c = await setup(t)
  const root = path.join(c.dir, 'ws')
  await mkdir(path.join(c.outside, 'sub'))
  await writeFile(path.join(c.outside, 'sub/f'), 'OUTSIDE SECRET\n')
  // Ten pairs: the directory e<i> (holding sub/f) and the link s<i> to the outside folder, which
  // holds a sub/f of its own.
  for (let i = 0; i < 10; i++) {
    await mkdir(path.join(root, `e${i}/sub`), { recursive: true })
    await writeFile(path.join(root, `e${i}/sub/f`), 'inside\n')
    await symlink(c.outside, path.join(root, `s${i}`))
  }
  // Exchanges every pair as fast as it can.
  const loop = spawn('perl', ['-e', `chdir $ARGV[0] or die; while (1) { for my $i (0..9) { syscall(${RENAMEAT2}, -100, "e$i", -100, "s$i", 2) } }`, root], { stdio: 'ignore' })
  let inside = 0
  try {
    const until = Date.now() + 3000
    for (let i = 0; i < 300 && (i < 20 || Date.now() < until); i++) {
      const tar = gunzipSync(await collect(await packWorkspace(testWorkspace(root))))
      assert.ok(!tar.includes(Buffer.from('OUTSIDE')), 'an outside file was archived')
      if (tar.includes(Buffer.from('inside'))) inside++
    }
  } finally {
    // Before the temp dir is removed (an after hook): rm racing the swaps may never finish.
    if (loop.exitCode === null && loop.signalCode === null) {
      const exited = new Promise((resolve) => loop.once('exit', resolve))
      loop.kill('SIGKILL')
      await exited
    }
  }
  assert.ok(inside > 0, 'the walk must sometimes see the directory, or the test proves nothing')
})

test('a download stopped halfway closes every fd it opened', async (t) => {
  const c = await setup(t)
  const root = path.join(c.dir, 'ws')
  for (let d = 0; d < 20; d++) {
    await mkdir(path.join(root, `d${d}`, 'sub'), { recursive: true })
    for (let f = 0; f < 20; f++) await writeFile(path.join(root, `d${d}`, 'sub', `f${f}`), randomBytes(8192))
  }
  const fds = async (): Promise<number> => (await readdir('/proc/self/fd')).length
  const before = await fds()
  const gz = await packWorkspace(testWorkspace(root))
  await new Promise<void>((resolve) => gz.once('data', () => resolve()))
  gz.destroy()
  // The worker unwinds (closing its fds), then the base directory fd is closed.
  for (let i = 0; i < 100 && await fds() > before; i++) await new Promise((resolve) => setTimeout(resolve, 20))
  assert.equal(await fds(), before)
})

test('pack + extract of a 200 MiB tree keeps RSS flat', async (t) => {
  const c = await setup(t)
  const root = path.join(c.dir, 'ws')
  await mkdir(path.join(root, 'd'), { recursive: true })
  // Incompressible for gzip (a 1 MiB random block is far wider than its 32 KiB window), written in chunks.
  const block = randomBytes(1024 * 1024)
  for (let i = 0; i < 10; i++) {
    const fh = await open(path.join(root, i % 2 === 0 ? `f${i}` : `d/f${i}`), 'w')
    for (let m = 0; m < 20; m++) await fh.write(block)
    await fh.close()
  }
  const gc = (globalThis as { gc?: () => void }).gc
  gc?.()
  const before = process.memoryUsage().rss
  let peak = before
  const timer = setInterval(() => { peak = Math.max(peak, process.memoryUsage().rss) }, 20)
  try {
    const res = await extractArchive(await packWorkspace(testWorkspace(root)), { stagingDir: c.staging, limits: LIMITS })
    assert.equal(res.bytes, 200 * 1024 * 1024)
  } finally {
    clearInterval(timer)
  }
  peak = Math.max(peak, process.memoryUsage().rss)
  const growth = (peak - before) / 1024 / 1024
  t.diagnostic(`RSS growth ${growth.toFixed(1)} MiB`)
  assert.ok(growth < 64, `RSS grew by ${growth.toFixed(1)} MiB`)
  const a = await stat(path.join(c.staging, 'd/f9'))
  assert.equal(a.size, 20 * 1024 * 1024)
})
