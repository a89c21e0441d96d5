/**
 * Quota images (src/builtin/workspace/volumes.ts): each workspace a loop-mounted ext4 image whose
 * kernel limits are exactly WORKSPACE_MAX_FILES entries and WORKSPACE_QUOTA_BYTES plus the block
 * slack; mounts survive a restart (adopted) and a deleted workspace's image goes whole.
 *
 * Needs root and mkfs.ext4: skipped without them, a failure under CI=true.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs'
import { lstat, mkdir, mkdtemp, readdir, readFile, realpath, rm, statfs, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { blockSlack, probeLoopVolumes, WorkspaceVolumes } from '../../../../src/builtin/workspace/volumes.js'

const MiB = 1024 * 1024
const QUOTA = 16 * MiB
const MAX_FILES = 300

function hasMkfs (): boolean {
  try {
    execFileSync('mkfs.ext4', ['-V'], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
const missing = [...(process.getuid?.() === 0 ? [] : ['root']), ...(hasMkfs() ? [] : ['mkfs.ext4 (e2fsprogs)'])]
const skip = missing.length > 0 && process.env.CI !== 'true' ? `needs ${missing.join(', ')}` : false
if (missing.length > 0 && process.env.CI === 'true') throw new Error(`CI=true: the quota image tests need ${missing.join(', ')}`)

function mountTargets (): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => l.split(' ')[4] ?? '').filter((t) => t !== '')
}

function unmountBelow (dir: string): void {
  for (const t of mountTargets().filter((m) => m.startsWith(dir + '/')).sort((a, b) => b.length - a.length)) {
    try { execFileSync('umount', ['-l', t], { stdio: 'ignore' }) } catch {}
  }
}

async function setup (t: { after: (fn: () => Promise<void>) => void }, opts: { quotaBytes?: number, maxFiles?: number } = {}) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-vol-')))
  t.after(async () => {
    unmountBelow(dir)
    await rm(dir, { recursive: true, force: true })
  })
  const stateDir = path.join(dir, '.tg')
  await mkdir(stateDir, { mode: 0o700 })
  const make = (): WorkspaceVolumes => new WorkspaceVolumes({
    stateDir,
    workspacesDir: dir,
    quotaBytes: opts.quotaBytes ?? QUOTA,
    maxFiles: opts.maxFiles ?? MAX_FILES
  })
  const root = async (tenant: string, id: string): Promise<string> => {
    const r = path.join(dir, tenant, id)
    await mkdir(r, { recursive: true, mode: 0o700 })
    return r
  }
  return { dir, stateDir, make, root }
}

test('the probe says loop mounts work here', { skip }, async (t) => {
  const { stateDir } = await setup(t)
  assert.deepEqual(await probeLoopVolumes(stateDir), { ok: true })
})

const IMAGE_TEST = { skip, timeout: 60_000 }

test('a new workspace is a mounted image: empty (no lost+found), exactly WORKSPACE_MAX_FILES inodes and the quota + slack in blocks', IMAGE_TEST, async (t) => {
  const { make, root } = await setup(t)
  const vols = make()
  const r = await root('acme', 'w1')
  const t0 = performance.now()
  assert.equal(await vols.ensure('acme', 'w1', r, { uid: 4321, gid: 4321 }), true)
  t.diagnostic(`mkfs + mount + bind of a ${QUOTA / MiB} MiB / ${MAX_FILES}-file image: ${(performance.now() - t0).toFixed(0)} ms`)
  assert.ok(mountTargets().includes(r), 'bind-mounted at the workspace directory')
  assert.equal(vols.enforces(r), true)
  assert.deepEqual(await readdir(r), [])
  const st = await lstat(r)
  assert.equal(st.uid, 4321)
  assert.equal(st.mode & 0o777, 0o700)
  const fs = await statfs(r)
  assert.equal(Number(fs.ffree), MAX_FILES)
  assert.equal(Number(fs.bavail) * Number(fs.bsize), QUOTA + blockSlack(QUOTA))
  // A second ensure is a no-op.
  assert.equal(await vols.ensure('acme', 'w1', r, undefined), true)
  await vols.close()
})

test('the kernel holds the limits: entries stop at WORKSPACE_MAX_FILES, bytes at the quota + slack, with ENOSPC', IMAGE_TEST, async (t) => {
  const { make, root } = await setup(t)
  const vols = make()
  const r = await root('acme', 'w1')
  await vols.ensure('acme', 'w1', r, undefined)
  let made = 0
  let error: NodeJS.ErrnoException | undefined
  for (let i = 0; i < MAX_FILES + 50; i++) {
    try {
      closeSync(openSync(path.join(r, `f${i}`), 'w'))
      made++
    } catch (err) {
      error = err as NodeJS.ErrnoException
      break
    }
  }
  assert.equal(made, MAX_FILES)
  assert.equal(error?.code, 'ENOSPC')
  await rm(path.join(r, 'f0'))
  await rm(path.join(r, 'f1'))
  const fd = openSync(path.join(r, 'big'), 'w')
  const chunk = Buffer.alloc(MiB, 1)
  let written = 0
  try {
    for (;;) written += writeSync(fd, chunk)
  } catch (err) {
    assert.equal((err as NodeJS.ErrnoException).code, 'ENOSPC')
  } finally {
    closeSync(fd)
  }
  t.diagnostic(`one file filled the image at ${(written / MiB).toFixed(2)} MiB (quota ${QUOTA / MiB} MiB + slack ${blockSlack(QUOTA) / MiB} MiB)`)
  assert.ok(written <= QUOTA + blockSlack(QUOTA), `${written} bytes`)
  assert.ok(written >= QUOTA, `the quota itself is usable: ${written} bytes`)
  await vols.close()
})

test('mounts outlive the process: a new instance adopts the previous one\'s (SIGKILL) and remounts after a clean close', IMAGE_TEST, async (t) => {
  const { make, root, stateDir } = await setup(t)
  const first = make()
  const r = await root('acme', 'w1')
  await first.ensure('acme', 'w1', r, undefined)
  await writeFile(path.join(r, 'kept.txt'), 'kept')
  // As if the first gateway were SIGKILLed: its mounts stay, nothing is closed; a replace upload's
  // image it was filling is left too.
  const leftover = path.join(stateDir, 'images', 'acme', '.new-0123456789ab-w1.img')
  await writeFile(leftover, '')
  const second = make()
  assert.equal(await second.mountAll(), 1)
  await assert.rejects(lstat(leftover), { code: 'ENOENT' })
  assert.equal(await readFile(path.join(r, 'kept.txt'), 'utf8'), 'kept')
  const image = path.join(stateDir, 'images', 'acme', 'w1.img')
  const loops = execFileSync('losetup', ['-j', image], { encoding: 'utf8' }).trim().split('\n').filter((l) => l !== '')
  assert.equal(loops.length, 1, `one loop device for the image (never two file systems on it): ${loops.join('; ')}`)
  assert.equal(mountTargets().filter((m) => m === r).length, 1, 'one mount at the workspace')
  await second.close()
  assert.equal(mountTargets().includes(r), false, 'unmounted on close')
  assert.deepEqual(await readdir(r), [], 'the bare directory below')
  const third = make()
  assert.equal(await third.mountAll(), 1)
  assert.equal(await readFile(path.join(r, 'kept.txt'), 'utf8'), 'kept')
  await third.close()
})

test('remove unmounts the image and deletes it, whatever it holds, and the workspace\'s directory; ' +
  'a directory with files and no image is left to the watchdog', IMAGE_TEST, async (t) => {
  const { make, root, stateDir } = await setup(t)
  const vols = make()
  const r = await root('acme', 'w1')
  await vols.ensure('acme', 'w1', r, undefined)
  await writeFile(path.join(r, 'a'), 'x')
  await vols.remove('acme', 'w1', r)
  assert.equal(vols.enforces(r), false)
  assert.equal(mountTargets().includes(r), false)
  // In the same step (a first use waiting for the removal finds it gone and starts anew).
  await assert.rejects(lstat(r), { code: 'ENOENT' })
  await assert.rejects(lstat(path.join(stateDir, 'images', 'acme', 'w1.img')), { code: 'ENOENT' })

  const legacy = await root('acme', 'old')
  await writeFile(path.join(legacy, 'from-before.txt'), 'x')
  assert.equal(await vols.ensure('acme', 'old', legacy, undefined), false)
  assert.equal(vols.enforces(legacy), false)
  assert.deepEqual(await readdir(legacy), ['from-before.txt'])
  await vols.close()
})

test('a replace swaps in a new image filled aside; a discarded one leaves nothing', IMAGE_TEST, async (t) => {
  const { make, root, stateDir } = await setup(t)
  const vols = make()
  const r = await root('acme', 'w1')
  await vols.ensure('acme', 'w1', r, undefined)
  await writeFile(path.join(r, 'old.txt'), 'old')
  const next = await vols.prepare('acme', 'w1', undefined)
  await writeFile(path.join(next.dir, 'new.txt'), 'new')
  assert.deepEqual(await readdir(r), ['old.txt'], 'unchanged until the commit')
  await next.commit(r)
  await next.discard()
  assert.deepEqual(await readdir(r), ['new.txt'])
  assert.equal(vols.enforces(r), true)
  assert.deepEqual((await readdir(path.join(stateDir, 'images', 'acme'))).sort(), ['w1.img'])

  const dropped = await vols.prepare('acme', 'w1', undefined)
  await writeFile(path.join(dropped.dir, 'x'), 'x')
  await dropped.discard()
  assert.deepEqual((await readdir(path.join(stateDir, 'images', 'acme'))).sort(), ['w1.img'])
  assert.deepEqual(await readdir(r), ['new.txt'])
  await vols.close()
})
