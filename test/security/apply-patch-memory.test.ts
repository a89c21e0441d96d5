/**
 * Attack: apply_patch read every file it touched into memory, uncapped. A
 * 269-byte patch deleting five 400 MiB sparse files took the gateway from 495 MiB to 2.95 GiB
 * RSS. Now deleted files are never read (the commit renames them into a per-call trash folder and
 * a rollback renames them back), and what a patch reads is capped per file and per patch. These
 * tests run the real gateway process and talk to it over HTTP, as a tenant would.
 *
 * Peak memory is read from the kernel: VmHWM (the RSS high-water mark) is reset through
 * /proc/<pid>/clear_refs just before the call, so a peak that has come down again still counts.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import type { Stats } from 'node:fs'
import { mkdir, mkdtemp, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { rssBytes } from '../../scripts/lib/proc.js'

const MiB = 1024 * 1024
const TENANT = 'mallory'
/** The gateway may grow by this much while it deletes 2 GB of files (it used to hold them all). */
const MAX_GROWTH = 100 * MiB

interface InvokeBody { isError: boolean, output: string, error: { code: string, message: string } | null }

interface Harness {
  gw: GatewayProcess
  workspaces: string
  /** The tenant's default workspace on the host. */
  ws: string
  patch: (text: string) => Promise<InvokeBody>
}

/**
 * Starts the gateway. `mount` runs once the workspaces folder exists (to mount something on the
 * tenant's folder; it returns the folder to unmount, or false to skip). Clean-up runs in order:
 * the gateway stops, the mount goes, the folder is removed.
 */
async function setup (t: TestContext, mount?: (workspaces: string) => Promise<string | false>): Promise<Harness | undefined> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-sec-patch-'))
  const running: { gw?: GatewayProcess } = {}
  let mounted: string | false = false
  t.after(async () => {
    await running.gw?.stop(5000)
    if (mounted !== false && spawnSync('umount', [mounted]).status !== 0) spawnSync('umount', ['-l', mounted])
    await rm(workspaces, { recursive: true, force: true })
  })
  if (mount !== undefined) {
    mounted = await mount(workspaces)
    if (mounted === false) return undefined
  }
  const gw = await startGateway(t, { SANDBOX: 'none', WORKSPACES_DIR: workspaces, LOG_LEVEL: 'info' })
  running.gw = gw
  const url = gw.url
  const patch = async (text: string): Promise<InvokeBody> => {
    const res = await fetch(`${url}/invoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'apply_patch', userId: TENANT, arguments: { patch: text } }),
      signal: AbortSignal.timeout(60_000)
    })
    assert.equal(res.status, 200, await res.clone().text())
    return await res.json() as InvokeBody
  }
  // The first call creates the workspace.
  const first = await patch('*** Begin Patch\n*** Add File: README.md\n+hello\n*** End Patch\n')
  assert.equal(first.isError, false, first.output)
  return { gw, workspaces, ws: join(workspaces, TENANT, 'default'), patch }
}

async function peakKiB (pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8')
  return Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1] ?? 0)
}

/** Runs `call` and returns how far the gateway's RSS rose above where it was just before. */
async function growthDuring<T> (gw: GatewayProcess, call: () => Promise<T>): Promise<{ result: T, growth: number }> {
  const pid = gw.child.pid as number
  const before = await rssBytes(pid)
  // "5" resets the peak RSS to the current RSS (Linux >= 4.0).
  await writeFile(`/proc/${pid}/clear_refs`, '5')
  const result = await call()
  const peak = (await peakKiB(pid)) * 1024
  return { result, growth: peak - before }
}

const BIG = ['big-1.bin', 'big-2.bin', 'big-3.bin', 'big-4.bin', 'big-5.bin']

async function sparseFiles (ws: string, size: number): Promise<void> {
  for (const name of BIG) {
    await writeFile(join(ws, name), '')
    await truncate(join(ws, name), size)
  }
}

const deleteAll = BIG.map((n) => `*** Delete File: ${n}`)

test('deleting five 400 MiB sparse files with one patch does not read them: ' +
  'gateway RSS grows by less than 100 MiB, no trash left', { timeout: 120_000 }, async (t) => {
  const h = await setup(t)
  assert.ok(h !== undefined)
  await sparseFiles(h.ws, 400 * MiB)
  const text = ['*** Begin Patch', ...deleteAll, '*** End Patch', ''].join('\n')
  assert.ok(text.length < 300)
  const { result, growth } = await growthDuring(h.gw, async () => await h.patch(text))
  assert.equal(result.isError, false, result.output)
  const out = JSON.parse(result.output) as { filesChanged: number, fileChanges: Array<{ operation: string }> }
  assert.equal(out.filesChanged, 5)
  assert.deepEqual(out.fileChanges.map((c) => c.operation), ['delete', 'delete', 'delete', 'delete', 'delete'])
  t.diagnostic(`gateway RSS growth while deleting 5 x 400 MiB: ${(growth / MiB).toFixed(1)} MiB`)
  assert.ok(growth < MAX_GROWTH, `the gateway grew by ${(growth / MiB).toFixed(0)} MiB`)
  assert.deepEqual(await readdir(h.ws), ['README.md'])
  // The per-call trash next to the workspace is gone too.
  assert.deepEqual(await readdir(join(h.workspaces, TENANT)), ['default'])
})

test('updating a file over 10 MiB, or more than 64 MiB of files in one patch, ' +
  'is a clear tool error that names the file and changes nothing', { timeout: 120_000 }, async (t) => {
  const h = await setup(t)
  assert.ok(h !== undefined)
  await writeFile(join(h.ws, 'huge.txt'), 'first line\n')
  await truncate(join(h.ws, 'huge.txt'), 400 * MiB)
  const one = await growthDuring(h.gw, async () => await h.patch('*** Begin Patch\n*** Update File: huge.txt\n@@\n-first line\n+changed\n*** End Patch\n'))
  assert.equal(one.result.isError, true, one.result.output)
  assert.match(one.result.error?.message ?? '', /^File is too large to patch \(419430400 bytes, max 10485760\): huge\.txt$/)
  assert.ok(one.growth < MAX_GROWTH, `the gateway grew by ${(one.growth / MiB).toFixed(0)} MiB`)

  // Seven text files of 9.5 MiB: each under the per-file cap, together over the per-patch one.
  const line = `${'x'.repeat(99)}\n`
  const body = line.repeat(Math.floor(9.5 * MiB / line.length))
  const names = Array.from({ length: 7 }, (_, i) => `part-${i}.txt`)
  for (const name of names) await writeFile(join(h.ws, name), `head of ${name}\n${body}`)
  const hunks = names.flatMap((n) => [`*** Update File: ${n}`, '@@', `-head of ${n}`, `+new head of ${n}`])
  const many = await h.patch(['*** Begin Patch', ...hunks, '*** End Patch'].join('\n'))
  assert.equal(many.isError, true, many.output)
  assert.match(many.error?.message ?? '', /^Patch reads too much: part-6\.txt would bring the files held to \d+ bytes, max 67108864$/)
  for (const name of names) assert.ok((await readFile(join(h.ws, name), 'utf8')).startsWith(`head of ${name}\n`), name)
  assert.equal((await stat(join(h.ws, 'huge.txt'))).size, 400 * MiB)
})

test('NUL bytes: a patch carrying one and an update of a file holding one are tool errors', { timeout: 60_000 }, async (t) => {
  const h = await setup(t)
  assert.ok(h !== undefined)
  const inPatch = await h.patch('*** Begin Patch\n*** Add File: nul.txt\n+a\u0000b\n*** End Patch\n')
  assert.equal(inPatch.isError, true, inPatch.output)
  assert.match(inPatch.error?.message ?? '', /NUL byte/)
  await writeFile(join(h.ws, 'bin.txt'), 'text\n\u0000more\n')
  const inFile = await h.patch('*** Begin Patch\n*** Update File: bin.txt\n@@\n-text\n+TEXT\n*** End Patch\n')
  assert.equal(inFile.isError, true, inFile.output)
  assert.match(inFile.error?.message ?? '', /^Failed to read file to update bin\.txt: the file contains NUL bytes/)
  assert.deepEqual((await readdir(h.ws)).sort(), ['README.md', 'bin.txt'])
})

/** Mounts a `size` tmpfs on `dir`, or skips (fails under CI=true) where that is not possible. */
function mountTmpfs (t: TestContext, dir: string, size: number): boolean {
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${size},mode=0711`, 'tmpfs', dir], { encoding: 'utf8' })
  if (r.status === 0) return true
  const why = `cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): ${(r.stderr ?? r.error?.message ?? '').trim()}`
  if (process.env.CI === 'true') throw new Error(`${why}; required under CI=true`)
  t.skip(why)
  return false
}

test('a patch that fails at commit after its deletes puts the deleted files back from the trash: ' +
  'same inodes, nothing read, no trash left', { timeout: 120_000 }, async (t) => {
  // The tenant's folder is a 4 MiB tmpfs: sparse files take no room on it, a real file does.
  const h = await setup(t, async (workspaces) => {
    const tenantDir = join(workspaces, TENANT)
    await mkdir(tenantDir)
    return mountTmpfs(t, tenantDir, 4 * MiB) ? tenantDir : false
  })
  if (h === undefined) return
  await sparseFiles(h.ws, 400 * MiB)
  const inodes = await Promise.all(BIG.map(async (n) => (await stat(join(h.ws, n))).ino))
  // Fill what is left, so the Add after the deletes fails with ENOSPC during the commit.
  await writeFile(join(h.ws, 'filler'), '')
  for (;;) {
    try {
      await writeFile(join(h.ws, 'filler'), Buffer.alloc(64 * 1024), { flag: 'a' })
    } catch {
      break
    }
  }
  const text = ['*** Begin Patch', ...deleteAll, '*** Add File: new.txt', '+does not fit', '*** End Patch'].join('\n')
  const { result, growth } = await growthDuring(h.gw, async () => await h.patch(text))
  assert.equal(result.isError, true, result.output)
  assert.match(result.error?.message ?? '', /^Failed to apply patch: No space left for: new\.txt; every change already written was rolled back$/)
  t.diagnostic(`gateway RSS growth during the failed patch: ${(growth / MiB).toFixed(1)} MiB`)
  assert.ok(growth < MAX_GROWTH, `the gateway grew by ${(growth / MiB).toFixed(0)} MiB`)
  for (const [i, name] of BIG.entries()) {
    const st: Stats = await stat(join(h.ws, name))
    assert.equal(st.size, 400 * MiB, name)
    assert.equal(st.ino, inodes[i], `${name} is the same file, renamed back`)
  }
  assert.deepEqual((await readdir(h.ws)).sort(), ['README.md', ...BIG, 'filler'].sort())
  assert.deepEqual(await readdir(join(h.workspaces, TENANT)), ['default'])
})
