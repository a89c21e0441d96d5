import { test } from 'node:test'
import type { TestContext, TestOptions } from 'node:test'
import assert from 'node:assert/strict'
import { execFile, execFileSync, spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { chmod, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'
import { gzipSync } from 'node:zlib'
import type { FastifyInstance } from 'fastify'
import { Header } from 'tar'
import { buildApp } from '../../src/app.js'
import { renameat2Number } from './race.js'
import { procInfo, waitUntil } from '../../scripts/lib/proc.js'
import { loadConfig } from '../../src/config.js'
import type { Config } from '../../src/config.js'

const run = promisify(execFile)
const KEYS = 'key-alice-0123456789:alice,key-bob-0123456789ab:bob,key-admin-0123456789:*'
const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
const ADMIN = auth('key-admin-0123456789')

/**
 * The workspace routes' tests (routes/workspaces.ts), written once and run in both quota modes
 * (docs/ARCHITECTURE.md#workspace-quota): test/http/routes/workspaces.test.ts in watchdog mode
 * (plain directories), workspaces-loop-uploads.test.ts and workspaces-loop.test.ts in loop mode
 * (each workspace a loop-mounted ext4 image, what `auto` gives a gateway running as root without
 * Redis; every replace upload makes an image), the uploads and the rest: in one file they would
 * pass the runner's time per file on a loaded machine. Loop needs root and mkfs.ext4: skipped
 * without them, a failure under CI=true.
 */
export type Mode = 'watchdog' | 'loop'
function hasMkfs (): boolean {
  for (const cmd of ['mkfs.ext4', '/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4']) {
    try {
      execFileSync(cmd, ['-V'], { stdio: 'ignore' })
      return true
    } catch {}
  }
  return false
}

interface Env {
  app: FastifyInstance
  dir: string
  config: Config
  /** Another app on the same config (a restart), closed with the first. */
  reopen: () => Promise<FastifyInstance>
}
type Setup = (t: TestContext, env?: Record<string, string>) => Promise<Env>

/** Mount points at or below `dir` (this process's mount namespace). */
function mountsBelow (dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8').split('\n').map((l) => (l.split(' ')[4] ?? '').replace(/\\040/g, ' '))
    .filter((m) => m === dir || m.startsWith(`${dir}/`))
}

/** The app on a fresh WORKSPACES_DIR in `mode`, with tenant keys for alice and bob and an admin key. */
async function setupIn (t: TestContext, mode: Mode, env: Record<string, string> = {}): Promise<Env> {
  const dir = await realpath(await mkdtemp(join(tmpdir(), 'tg-wsr-')))
  const apps: FastifyInstance[] = []
  // One hook, so the order holds: the apps close first (in loop mode that unmounts every image
  // they mounted), then the directory goes. A mount left below it is close()'s bug: it fails the
  // test (and is removed, so that the directory can go).
  t.after(async () => {
    for (const a of apps) await a.close()
    const left = mountsBelow(dir)
    for (const m of [...left].sort().reverse()) execFileSync('umount', ['-l', m])
    await rm(dir, { recursive: true, force: true })
    assert.deepEqual(left, [], 'app.close() left mounts behind')
  })
  const config = loadConfig({ SANDBOX: 'none', LOG_LEVEL: 'silent', WORKSPACES_DIR: join(dir, 'w'), API_KEYS: KEYS, WORKSPACE_QUOTA_MODE: mode, ...env })
  const open = async (): Promise<FastifyInstance> => {
    const app = await buildApp({ ...config }, { logger: false })
    apps.push(app)
    return app
  }
  return { app: await open(), dir, config, reopen: open }
}

/** The suite's parts: uploads (and downloads), then everything else. */
export type Part = 'uploads' | 'lifecycle'
interface Case { name: string, part: Part, fn: (t: TestContext, setup: Setup, mode: Mode) => Promise<void>, opts: TestOptions }
const cases: Case[] = []
let part: Part = 'uploads'

/** Declares a test of the suite (in the current part); `setup` makes the app in the mode the suite runs in. */
function both (name: string, fn: Case['fn'], opts: TestOptions = {}): void {
  cases.push({ name, part, fn, opts })
}

/** Registers the tests of the suite (of the parts named, all by default) in `mode`. */
export function workspaceRouteSuite (mode: Mode, parts: Part[] = ['uploads', 'lifecycle']): void {
  const missing = mode === 'loop' ? [...(process.getuid?.() === 0 ? [] : ['root']), ...(hasMkfs() ? [] : ['mkfs.ext4 (e2fsprogs)'])] : []
  if (missing.length > 0 && process.env.CI === 'true') throw new Error(`CI=true: the workspace routes in WORKSPACE_QUOTA_MODE=loop need ${missing.join(', ')}`)
  const modeSkip = missing.length > 0 ? `WORKSPACE_QUOTA_MODE=loop needs ${missing.join(', ')}` : false
  for (const { name, fn, opts } of cases.filter((c) => parts.includes(c.part))) {
    const skip = opts.skip !== undefined && opts.skip !== false ? opts.skip : modeSkip
    test(`${name} (WORKSPACE_QUOTA_MODE=${mode})`, { ...opts, skip }, async (t) => {
      await fn(t, async (t2, env) => await setupIn(t2, mode, env), mode)
    })
  }
}

/**
 * Nothing is left of an upload's staging: WORKSPACES_DIR/.tg/staging is empty (where watchdog
 * workspaces and their merges stage). In loop mode uploads stage on the images (a replace in a
 * new image, a merge in its workspace's image): that area is empty or absent, no image's private
 * staging or trash holds anything, and no replace upload's image (.new-...) is left.
 */
async function assertNoStaging (config: Config, mode: Mode): Promise<void> {
  const state = join(config.workspacesDir, '.tg')
  if (mode === 'watchdog') {
    assert.deepEqual(await readdir(join(state, 'staging')), [])
    return
  }
  const list = async (p: string): Promise<string[]> => await readdir(p).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return []
    throw err
  })
  assert.deepEqual(await list(join(state, 'staging')), [])
  for (const tenant of await list(join(state, 'images'))) {
    assert.deepEqual((await list(join(state, 'images', tenant))).filter((f) => f.startsWith('.new-')), [], 'a replace upload\'s image was left')
  }
  for (const tenant of await list(join(state, 'mnt'))) {
    for (const id of await list(join(state, 'mnt', tenant))) {
      assert.ok(!id.startsWith('.new-'), `a replace upload's mount point was left: ${id}`)
      for (const area of ['.staging', '.trash']) assert.deepEqual(await list(join(state, 'mnt', tenant, id, area)), [], `${tenant}/${id}/${area}`)
    }
  }
}

/** A tar.gz of `files` (path -> content; a trailing '/' makes a directory) made with the system `tar czf`. */
async function tgz (t: TestContext, files: Record<string, string>): Promise<Buffer> {
  const src = await mkdtemp(join(tmpdir(), 'tg-src-'))
  t.after(async () => await rm(src, { recursive: true, force: true }))
  for (const [p, content] of Object.entries(files)) {
    if (p.endsWith('/')) {
      await mkdir(join(src, p), { recursive: true })
      continue
    }
    await mkdir(join(src, p, '..'), { recursive: true })
    await writeFile(join(src, p), content)
  }
  const out = join(src, '..', `${src.split('/').pop() ?? 'x'}.tgz`)
  t.after(async () => await rm(out, { force: true }))
  await run('tar', ['czf', out, '-C', src, '.'])
  return await readFile(out)
}

/** The files of a tar.gz (path -> content), listed by the system tar. */
async function untgz (t: TestContext, data: Buffer): Promise<Record<string, string>> {
  const dst = await mkdtemp(join(tmpdir(), 'tg-dst-'))
  t.after(async () => await rm(dst, { recursive: true, force: true }))
  await writeFile(join(dst, '..', `${dst.split('/').pop() ?? 'x'}.tgz`), data)
  const file = join(dst, '..', `${dst.split('/').pop() ?? 'x'}.tgz`)
  t.after(async () => await rm(file, { force: true }))
  await run('tar', ['xzf', file, '-C', dst])
  return await treeOf(dst)
}

async function treeOf (dir: string, prefix = ''): Promise<Record<string, string>> {
  const out: Record<string, string> = {}
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const rel = prefix === '' ? e.name : `${prefix}/${e.name}`
    if (e.isDirectory()) Object.assign(out, await treeOf(join(dir, e.name), rel))
    else if (e.isFile()) out[rel] = await readFile(join(dir, e.name), 'utf8')
  }
  return out
}

/** A hand-made tar (node-tar's Header) with arbitrary entries, for archives `tar` would not write. */
function rawTar (
  entries: Array<{ path: string, type?: 'File' | 'Directory' | 'SymbolicLink' | 'Link', body?: string, linkpath?: string, mode?: number }>
): Buffer {
  const blocks: Buffer[] = []
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '')
    const h = new Header({
      path: e.path,
      type: e.type ?? 'File',
      size: e.type === undefined || e.type === 'File' ? body.length : 0,
      mode: e.mode ?? 0o644,
      mtime: new Date(),
      linkpath: e.linkpath,
      uid: 0,
      gid: 0
    })
    h.encode()
    blocks.push(h.block as Buffer)
    if (body.length > 0) blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512))
  }
  blocks.push(Buffer.alloc(1024))
  return Buffer.concat(blocks)
}

async function put (app: FastifyInstance, url: string, body: Buffer, type = 'application/gzip', headers = ADMIN): Promise<any> {
  return await app.inject({ method: 'PUT', url, headers: { ...headers, 'content-type': type }, payload: body })
}

async function invoke (app: FastifyInstance, payload: Record<string, unknown>, headers = ADMIN): Promise<any> {
  const res = await app.inject({ method: 'POST', url: '/invoke', headers, payload })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

const WS = '/users/alice/workspaces/proj'

both('upload a tar.gz made with tar czf, download it back, read one file, list it', async (t, setup) => {
  const { app } = await setup(t)
  const files = { 'README.md': '# hello\n', 'src/main.py': 'print(1)\n', 'src/deep/x.txt': 'x' }
  let res = await put(app, WS, await tgz(t, files))
  assert.equal(res.statusCode, 201, res.body)
  // README.md, src, src/main.py, src/deep, src/deep/x.txt
  assert.deepEqual(res.json(), { workspaceId: 'proj', bytes: 8 + 9 + 1, files: 5, skipped: [], skippedEntries: 0 })
  res = await put(app, WS, await tgz(t, files))
  assert.equal(res.statusCode, 200, 'the second upload replaces an existing workspace')

  // The tools see the upload.
  const r = await invoke(app, { name: 'read_file', userId: 'alice', arguments: { path: 'src/main.py' }, context: { workspaceId: 'proj' } })
  assert.equal(JSON.parse(r.output).content, 'print(1)')

  res = await app.inject({ method: 'GET', url: `${WS}/archive`, headers: ADMIN })
  assert.equal(res.statusCode, 200)
  assert.equal(res.headers['content-type'], 'application/gzip')
  assert.deepEqual(await untgz(t, res.rawPayload), files)
  res = await app.inject({ method: 'GET', url: `${WS}/archive?path=src`, headers: ADMIN })
  assert.deepEqual(await untgz(t, res.rawPayload), { 'src/main.py': 'print(1)\n', 'src/deep/x.txt': 'x' })
  res = await app.inject({ method: 'GET', url: `${WS}/archive?path=README.md`, headers: ADMIN })
  assert.equal(res.statusCode, 400)

  res = await app.inject({ method: 'GET', url: `${WS}/files/src/main.py`, headers: ADMIN })
  assert.equal(res.statusCode, 200)
  assert.equal(res.headers['content-type'], 'application/octet-stream')
  assert.equal(res.body, 'print(1)\n')
  res = await app.inject({ method: 'GET', url: `${WS}/files/nope.txt`, headers: ADMIN })
  assert.equal(res.statusCode, 404)
  res = await app.inject({ method: 'GET', url: `${WS}/files/..%2F..%2Fbob%2Fdefault%2Fx`, headers: ADMIN })
  assert.equal(res.statusCode, 400)
  assert.match(res.json().message, /escapes workspace root/)
  res = await app.inject({ method: 'GET', url: `${WS}/files/src`, headers: ADMIN })
  assert.equal(res.statusCode, 400)

  res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  assert.equal(res.statusCode, 200)
  const [ws] = res.json().workspaces
  assert.equal(res.json().workspaces.length, 1)
  assert.equal(ws.workspaceId, 'proj')
  assert.equal(ws.bytes, 18)
  assert.equal(ws.files, 5)
  assert.equal(ws.quotaBytes, 1024 * 1024 * 1024)
  assert.equal(ws.processes, 0)
  assert.equal(ws.expiresAt, null)
  assert.ok(Date.parse(ws.lastUsedAt) >= Date.parse(ws.createdAt) - 1000)
  assert.ok(Date.now() - Date.parse(ws.lastUsedAt) < 60_000)
})

both('a merge upload beside a symlink-swap loop in the workspace never writes outside it', async (t, setup) => {
  const { app, config } = await setup(t)
  await put(app, WS, await tgz(t, { 'e/keep.txt': 'k' }))
  const root = join(config.workspacesDir, 'alice', 'proj')
  const outside = await mkdtemp(join(tmpdir(), 'tg-merge-outside-'))
  t.after(async () => await rm(outside, { recursive: true, force: true }))
  await writeFile(join(outside, 'sentinel'), 'SENTINEL')
  await run('ln', ['-s', outside, join(root, 'swap')])
  // The tenant exchanges its directory `e` with a link to the outside folder as fast as it can
  // (names through perl variables: syscall() dies on literal strings).
  const loop = spawn('perl', ['-e', `chdir $ARGV[0] or die; my ($a, $b) = ("e", "swap"); while (1) { syscall(${renameat2Number()}, -100, $a, -100, $b, 2) }`, root], { stdio: 'ignore' })
  t.after(() => { loop.kill('SIGKILL') })
  let merged = 0
  for (let i = 0; i < 30; i++) {
    const res = await put(app, `${WS}?mode=merge`, await tgz(t, { [`e/new${i}.txt`]: 'n', [`e/sub${i}/f.txt`]: 'f' }))
    if (res.statusCode === 200) merged++
    else assert.ok(res.statusCode < 500, res.body)
  }
  assert.equal(loop.exitCode, null, 'the swap loop exited early: nothing was swapped')
  loop.kill('SIGKILL')
  assert.ok(merged > 0, 'no merge succeeded: the test proves nothing')
  assert.deepEqual((await readdir(outside)).sort(), ['sentinel'], 'something was written outside the workspace')
  assert.equal(await readFile(join(outside, 'sentinel'), 'utf8'), 'SENTINEL')
})

both('replace makes the workspace exactly the archive; merge writes over what is there', async (t, setup, mode) => {
  const { app, config } = await setup(t)
  await put(app, WS, await tgz(t, { 'a.txt': 'a1', 'keep/b.txt': 'b1' }))
  let res = await put(app, `${WS}?mode=merge`, await tgz(t, { 'a.txt': 'a2', 'keep/c.txt': 'c', 'new/d.txt': 'd' }))
  assert.equal(res.statusCode, 200, res.body)
  const root = join(config.workspacesDir, 'alice', 'proj')
  assert.deepEqual(await treeOf(root), { 'a.txt': 'a2', 'keep/b.txt': 'b1', 'keep/c.txt': 'c', 'new/d.txt': 'd' })
  assert.equal(res.json().files, 6)
  res = await put(app, WS, await tgz(t, { 'only.txt': 'o' }))
  assert.equal(res.statusCode, 200)
  assert.deepEqual(await treeOf(root), { 'only.txt': 'o' })
  // Merge onto a file where the archive has a directory, and the other way round.
  await put(app, `${WS}?mode=merge`, rawTar([{ path: 'only.txt/', type: 'Directory' }, { path: 'only.txt/in.txt', body: 'in' }]), 'application/x-tar')
  assert.deepEqual(await treeOf(root), { 'only.txt/in.txt': 'in' })
  // Nothing is left in the private staging areas.
  await assertNoStaging(config, mode)
})

both('a refused archive changes nothing, and creates nothing', async (t, setup, mode) => {
  const { app, config } = await setup(t, { WORKSPACE_MAX_FILES: '5' })
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  const root = join(config.workspacesDir, 'alice', 'proj')
  const bad: Array<[Buffer, string, number]> = [
    [rawTar([{ path: 'ok.txt', body: 'x' }, { path: '../escape.txt', body: 'x' }]), 'application/x-tar', 400],
    [rawTar([{ path: 'ok.txt', body: 'x' }, { path: '/abs.txt', body: 'x' }]), 'application/x-tar', 400],
    [rawTar([{ path: 'l', type: 'SymbolicLink', linkpath: '../..' }]), 'application/x-tar', 400],
    [
      rawTar([{ path: 'l', type: 'SymbolicLink', linkpath: 'sub' }, { path: 'sub/', type: 'Directory' }, { path: 'l/x', body: 'through the link' }]),
      'application/x-tar',
      400
    ],
    [rawTar([{ path: 'h', type: 'Link', linkpath: '/etc/passwd' }]), 'application/x-tar', 400],
    [rawTar([{ path: 'suid', body: 'x', mode: 0o4755 }]), 'application/x-tar', 400],
    [gzipSync(Buffer.from('not a tar at all, just text '.repeat(100))), 'application/gzip', 400],
    [gzipSync(rawTar([{ path: 'big.txt', body: 'x'.repeat(5000) }])).subarray(0, 60), 'application/gzip', 400],
    [Buffer.from('plain garbage'), 'application/gzip', 415],
    [rawTar(Array.from({ length: 10 }, (_, i) => ({ path: `f${i}`, body: 'x' }))), 'application/x-tar', 413]
  ]
  for (const [body, type, status] of bad) {
    const res = await put(app, WS, body, type)
    assert.equal(res.statusCode, status, res.body)
    assert.deepEqual(await treeOf(root), { 'a.txt': 'a' })
    const res2 = await put(app, '/users/alice/workspaces/fresh', body, type)
    assert.equal(res2.statusCode, status, res2.body)
    assert.equal(existsSync(join(config.workspacesDir, 'alice', 'fresh')), false)
  }
  assert.equal((await put(app, WS, rawTar([{ path: 'x', body: 'x' }]), 'application/x-tar')).json().code, undefined)
  await assertNoStaging(config, mode)
})

both('quota: a highly compressible entry past WORKSPACE_QUOTA_BYTES is a 413, merge counts what is there', async (t, setup) => {
  const { app, config } = await setup(t, { WORKSPACE_QUOTA_BYTES: String(2 * 1024 * 1024) })
  const zeros = gzipSync(rawTar([{ path: 'zeros', body: '\0'.repeat(3 * 1024 * 1024) }]))
  assert.ok(zeros.length < 50_000)
  let res = await put(app, WS, zeros)
  assert.equal(res.statusCode, 413)
  assert.equal(res.json().code, 'GW_PAYLOAD_TOO_LARGE')
  res = await put(app, WS, gzipSync(rawTar([{ path: 'half', body: 'y'.repeat(1536 * 1024) }])))
  assert.equal(res.statusCode, 201)
  res = await put(app, `${WS}?mode=merge`, gzipSync(rawTar([{ path: 'more', body: 'y'.repeat(768 * 1024) }])))
  assert.equal(res.statusCode, 413)
  assert.deepEqual(Object.keys(await treeOf(join(config.workspacesDir, 'alice', 'proj'))), ['half'])
  // Bigger than BODY_LIMIT_BYTES (2 MiB by default) is fine when the quota allows it.
  const { app: big } = await setup(t)
  res = await put(big, WS, rawTar([{ path: 'big', body: 'z'.repeat(3 * 1024 * 1024) }]), 'application/x-tar')
  assert.equal(res.statusCode, 201, res.body)
})

both('wrong content type is 415, bad ids are 400, unknown workspace and checkpoint are 404', async (t, setup) => {
  const { app } = await setup(t)
  let res = await app.inject({ method: 'PUT', url: WS, headers: { ...ADMIN, 'content-type': 'application/json' }, payload: '{"a":1}' })
  assert.equal(res.statusCode, 415)
  assert.equal(res.json().code, 'GW_UNSUPPORTED_MEDIA_TYPE')
  res = await app.inject({ method: 'PUT', url: WS, headers: { ...ADMIN, 'content-type': 'text/plain' }, payload: 'hello' })
  assert.equal(res.statusCode, 415)
  res = await app.inject({ method: 'PUT', url: WS, headers: ADMIN })
  assert.equal(res.statusCode, 415)
  for (const id of ['-x', '.hidden', 'a'.repeat(65), 'a%20b']) {
    res = await app.inject({ method: 'GET', url: `/users/alice/workspaces/${id}/checkpoints`, headers: ADMIN })
    assert.equal(res.statusCode, 400, id)
    assert.equal(res.json().code, 'GW_BAD_REQUEST')
  }
  res = await app.inject({ method: 'GET', url: '/users/al_ice/workspaces', headers: ADMIN })
  assert.equal(res.statusCode, 400)
  for (const [method, url] of [['GET', `${WS}/archive`], ['GET', `${WS}/files/a`], ['DELETE', WS], ['GET', `${WS}/checkpoints`], ['POST', `${WS}/checkpoints`]] as const) {
    res = await app.inject({ method, url, headers: ADMIN })
    assert.equal(res.statusCode, 404, `${method} ${url}`)
    assert.equal(res.json().code, 'GW_WORKSPACE_NOT_FOUND')
  }
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints/nope-1/restore`, headers: ADMIN })
  assert.equal(res.statusCode, 404)
  assert.equal(res.json().code, 'GW_CHECKPOINT_NOT_FOUND')
  res = await app.inject({ method: 'DELETE', url: `${WS}/checkpoints/nope-1`, headers: ADMIN })
  assert.equal(res.json().code, 'GW_CHECKPOINT_NOT_FOUND')
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints/-bad/restore`, headers: ADMIN })
  assert.equal(res.statusCode, 400)
  res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  assert.deepEqual(res.json().workspaces.map((w: any) => w.workspaceId), ['proj'])
})

both('an archive is recognised by its bytes, whatever content type is declared (or none)', async (t, setup) => {
  const { app, config } = await setup(t)
  const root = join(config.workspacesDir, 'alice', 'proj')
  const tar = rawTar([{ path: 'a.txt', body: 'plain tar' }])
  const gz = await tgz(t, { 'b.txt': 'tar.gz' })
  // What curl, SDKs and browsers send for a file: octet-stream, x-gzip, a form type (curl
  // --data-binary without -H), nothing at all, and a declared type that contradicts the bytes.
  for (const [body, type, want] of [
    [gz, 'application/octet-stream', { 'b.txt': 'tar.gz' }],
    [gz, 'application/x-gzip', { 'b.txt': 'tar.gz' }],
    [tar, 'application/x-gzip', { 'a.txt': 'plain tar' }],
    [gz, 'application/x-tar', { 'b.txt': 'tar.gz' }],
    [gz, 'application/x-www-form-urlencoded', { 'b.txt': 'tar.gz' }],
    [tar, 'application/json', { 'a.txt': 'plain tar' }],
    [gz, undefined, { 'b.txt': 'tar.gz' }],
    [tar, undefined, { 'a.txt': 'plain tar' }]
  ] as const) {
    const res = await app.inject({ method: 'PUT', url: WS, headers: { ...ADMIN, 'content-type': type }, payload: body })
    assert.ok(res.statusCode === 200 || res.statusCode === 201, `${type ?? 'no content type'}: ${res.statusCode} ${res.body}`)
    assert.deepEqual(await treeOf(root), want, type)
  }
})

both('a body that is not a tar or a tar.gz is a 415 saying what was expected, and changes nothing', async (t, setup, mode) => {
  const { app, config } = await setup(t)
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  const root = join(config.workspacesDir, 'alice', 'proj')
  for (const [body, type, re] of [
    [Buffer.from('hello, this is text\n'.repeat(100)), 'application/octet-stream', /tar or tar\.gz/],
    [Buffer.from('{"files":["a.txt"]}'), 'application/json', /tar or tar\.gz/],
    [Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), Buffer.alloc(600, 1)]), 'application/zstd', /zstd/],
    [Buffer.concat([Buffer.from('PK\x03\x04'), Buffer.alloc(600, 1)]), 'application/zip', /zip/],
    [Buffer.from('--X\r\ncontent-disposition: form-data; name="file"\r\n\r\n'), 'multipart/form-data; boundary=X', /--data-binary/]
  ] as const) {
    const res = await put(app, WS, body, type)
    assert.equal(res.statusCode, 415, `${type}: ${res.body}`)
    assert.equal(res.json().code, 'GW_UNSUPPORTED_MEDIA_TYPE')
    assert.match(res.json().message, re)
    assert.deepEqual(await treeOf(root), { 'a.txt': 'a' })
  }
  const res = await app.inject({ method: 'PUT', url: WS, headers: ADMIN })
  assert.equal(res.statusCode, 415)
  assert.match(res.json().message, /empty.*tar or tar\.gz/)
  await assertNoStaging(config, mode)
})

both('files counts the same entries in an upload, a checkpoint and the listing', async (t, setup) => {
  const { app } = await setup(t)
  // src (a directory), src/a.txt, link (a symlink): three entries, one regular file.
  const body = rawTar([
    { path: 'src/', type: 'Directory', mode: 0o755 },
    { path: 'src/a.txt', body: 'a' },
    { path: 'link', type: 'SymbolicLink', linkpath: 'src/a.txt' }
  ])
  let res = await put(app, WS, body, 'application/x-tar')
  assert.equal(res.statusCode, 201, res.body)
  assert.equal(res.json().files, 3)
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.equal(res.statusCode, 201, res.body)
  assert.equal(res.json().files, 3)
  assert.equal(res.json().bytes, 1)
  res = await app.inject({ method: 'GET', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.equal(res.json().checkpoints[0].files, 3)
  res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  assert.equal(res.json().workspaces[0].files, 3)
  assert.equal(res.json().workspaces[0].bytes, 1)
  res = await put(app, `${WS}?mode=merge`, rawTar([{ path: 'src/b.txt', body: 'bb' }]), 'application/x-tar')
  assert.equal(res.json().files, 4)
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.equal(res.json().files, 4)
})

both('an archive of ?path=src keeps the src/ prefix: uploaded back with merge, it lands where it came from', async (t, setup) => {
  const { app, config } = await setup(t)
  const root = join(config.workspacesDir, 'alice', 'proj')
  await put(app, WS, await tgz(t, { 'README.md': 'r', 'src/main.py': 'v1', 'src/deep/x.txt': 'x' }))
  let res = await app.inject({ method: 'GET', url: `${WS}/archive?path=src/`, headers: ADMIN })
  assert.equal(res.statusCode, 200, res.body)
  const archive = res.rawPayload
  assert.deepEqual(await untgz(t, archive), { 'src/main.py': 'v1', 'src/deep/x.txt': 'x' })
  // A symlink to the directory packs the directory by its real place.
  await run('ln', ['-s', 'src', join(root, 'code')])
  res = await app.inject({ method: 'GET', url: `${WS}/archive?path=code`, headers: ADMIN })
  assert.deepEqual(await untgz(t, res.rawPayload), { 'src/main.py': 'v1', 'src/deep/x.txt': 'x' })
  await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: 'src/main.py', content: 'v2' }, context: { workspaceId: 'proj' } })
  res = await put(app, `${WS}?mode=merge`, archive)
  assert.equal(res.statusCode, 200, res.body)
  assert.deepEqual(await treeOf(root), { 'README.md': 'r', 'src/main.py': 'v1', 'src/deep/x.txt': 'x' })
  // Into another workspace: the same layout.
  res = await put(app, '/users/alice/workspaces/copy', archive)
  assert.equal(res.statusCode, 201, res.body)
  assert.deepEqual(await treeOf(join(config.workspacesDir, 'alice', 'copy')), { 'src/main.py': 'v1', 'src/deep/x.txt': 'x' })
})

both('entries the file tools never write (.git/hooks, .ssh, .aws) are skipped and reported, in both modes', async (t, setup) => {
  const { app, config } = await setup(t)
  const root = join(config.workspacesDir, 'alice', 'proj')
  const body = rawTar([
    { path: '.git/', type: 'Directory', mode: 0o755 },
    { path: '.git/config', body: '[core]\n' },
    { path: '.git/hooks/', type: 'Directory', mode: 0o755 },
    { path: '.git/hooks/x', body: '#!/bin/sh\necho pwned\n', mode: 0o755 },
    { path: '.ssh/authorized_keys', body: 'ssh-ed25519 AAAA attacker\n' },
    { path: 'ok.txt', body: 'ok' }
  ])
  for (const url of [WS, `${WS}?mode=merge`, '/users/alice/workspaces/merged?mode=merge']) {
    const res = await put(app, url, body, 'application/x-tar')
    assert.ok(res.statusCode === 200 || res.statusCode === 201, res.body)
    assert.deepEqual(res.json().skipped, ['.git/hooks', '.ssh'], url)
    assert.equal(res.json().skippedEntries, 3)
    assert.equal(res.json().files, 3) // .git, .git/config, ok.txt
  }
  assert.deepEqual(await treeOf(root), { '.git/config': '[core]\n', 'ok.txt': 'ok' })
  assert.equal(existsSync(join(root, '.git/hooks')), false)
  assert.equal(existsSync(join(root, '.ssh')), false)
  assert.deepEqual(await treeOf(join(config.workspacesDir, 'alice', 'merged')), { '.git/config': '[core]\n', 'ok.txt': 'ok' })
})

// loop: a replace fills a new image, swapped in whole; watchdog: a directory swapped by renames.
both('a replace upload stops the workspace\'s background processes first; a merge leaves them running', async (t, setup) => {
  const { app, config } = await setup(t)
  const root = join(config.workspacesDir, 'alice', 'proj')
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  const start = async (): Promise<number> => {
    await rm(join(root, 'pid.txt'), { force: true })
    const started = await invoke(app, {
      name: 'bash',
      userId: 'alice',
      arguments: { action: 'start', command: 'echo $$ > pid.txt; exec sleep 600' },
      context: { workspaceId: 'proj' }
    })
    assert.equal(started.isError, false, started.output)
    await waitUntil('the process wrote its pid', () => existsSync(join(root, 'pid.txt')) && /^\d+\n$/.test(readFileSync(join(root, 'pid.txt'), 'utf8')))
    return Number(await readFile(join(root, 'pid.txt'), 'utf8'))
  }
  const alive = async (pid: number): Promise<boolean> => {
    const p = await procInfo(pid)
    return p !== undefined && p.state !== 'Z' && p.state !== 'X'
  }
  const pid = await start()
  assert.ok(await alive(pid))
  let res = await put(app, `${WS}?mode=merge`, await tgz(t, { 'b.txt': 'b' }))
  assert.equal(res.statusCode, 200, res.body)
  assert.ok(await alive(pid), 'a merge keeps the tree, and its processes')
  res = await put(app, WS, await tgz(t, { 'c.txt': 'c' }))
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(await alive(pid), false, 'the process of the replaced tree still runs')
  res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  assert.equal(res.json().workspaces[0].processes, 0)
  assert.deepEqual(await treeOf(root), { 'c.txt': 'c' })
})

part = 'lifecycle'

both('a tenant key reaches its own workspaces only; admin reaches any', async (t, setup) => {
  const { app } = await setup(t)
  const body = await tgz(t, { 'secret.txt': 'alice' })
  let res = await put(app, WS, body, 'application/gzip', auth('key-alice-0123456789'))
  assert.equal(res.statusCode, 201)
  for (const [method, url] of [
    ['GET', '/users/alice/workspaces'], ['GET', `${WS}/archive`], ['GET', `${WS}/files/secret.txt`], ['DELETE', WS],
    ['GET', `${WS}/checkpoints`], ['POST', `${WS}/checkpoints`], ['POST', `${WS}/checkpoints/x/restore`], ['DELETE', `${WS}/checkpoints/x`]
  ] as const) {
    res = await app.inject({ method, url, headers: auth('key-bob-0123456789ab') })
    assert.equal(res.statusCode, 403, `${method} ${url}`)
    assert.equal(res.json().code, 'GW_TENANT_MISMATCH')
  }
  res = await put(app, WS, body, 'application/gzip', auth('key-bob-0123456789ab'))
  assert.equal(res.statusCode, 403)
  res = await app.inject({ method: 'GET', url: '/users/bob/workspaces', headers: auth('key-bob-0123456789ab') })
  assert.deepEqual(res.json().workspaces, [])
  res = await app.inject({ method: 'GET', url: `${WS}/files/secret.txt`, headers: auth('key-alice-0123456789') })
  assert.equal(res.body, 'alice')
  res = await app.inject({ method: 'GET', url: `${WS}/files/secret.txt`, headers: ADMIN })
  assert.equal(res.body, 'alice')
  res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: {} })
  assert.equal(res.statusCode, 401)
})

both('checkpoints over HTTP: create, list newest first, restore exactly, delete', async (t, setup) => {
  const { app, config } = await setup(t)
  await put(app, WS, await tgz(t, { 'a.txt': 'v1', 'dir/b.txt': 'b' }))
  const root = join(config.workspacesDir, 'alice', 'proj')
  let res = await app.inject({ method: 'POST', url: `${WS}/checkpoints`, headers: ADMIN, payload: { label: 'before' } })
  assert.equal(res.statusCode, 201, res.body)
  const first = res.json()
  assert.equal(first.label, 'before')
  assert.equal(first.files, 3) // a.txt, dir, dir/b.txt: entries, as the upload counted them
  assert.equal(first.bytes, 3)
  await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: 'a.txt', content: 'v2' }, context: { workspaceId: 'proj' } })
  await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: 'added.txt', content: 'new' }, context: { workspaceId: 'proj' } })
  await rm(join(root, 'dir', 'b.txt'))
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.equal(res.statusCode, 201, res.body)
  const second = res.json()
  assert.equal(second.label, null)
  res = await app.inject({ method: 'GET', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.deepEqual(res.json().checkpoints.map((c: any) => c.checkpointId), [second.checkpointId, first.checkpointId])

  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints/${first.checkpointId}/restore`, headers: ADMIN })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { restored: true, checkpointId: first.checkpointId })
  assert.deepEqual(await treeOf(root), { 'a.txt': 'v1', 'dir/b.txt': 'b' })
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints/${second.checkpointId}/restore`, headers: ADMIN })
  assert.deepEqual(await treeOf(root), { 'a.txt': 'v2', 'added.txt': 'new' })

  res = await app.inject({ method: 'DELETE', url: `${WS}/checkpoints/${first.checkpointId}`, headers: ADMIN })
  assert.equal(res.statusCode, 204)
  res = await app.inject({ method: 'GET', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.deepEqual(res.json().checkpoints.map((c: any) => c.checkpointId), [second.checkpointId])
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints`, headers: ADMIN, payload: { label: 'x'.repeat(201) } })
  assert.equal(res.statusCode, 400)
})

both('context.checkpoint on a mutating built-in returns a checkpointId that restores the tree before the call', async (t, setup) => {
  const { app, config } = await setup(t)
  const root = join(config.workspacesDir, 'alice', 'proj')
  const ctx = { workspaceId: 'proj', checkpoint: true }
  await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: 'f.txt', content: 'good' }, context: { workspaceId: 'proj' } })
  const r = await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: 'f.txt', content: 'bad change' }, context: ctx })
  assert.equal(r.isError, false, r.output)
  assert.match(r.checkpointId, /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/)
  const b = await invoke(app, { name: 'bash', userId: 'alice', arguments: { action: 'exec', command: 'rm f.txt && echo gone > g.txt' }, context: ctx })
  assert.equal(b.isError, false, b.output)
  assert.ok(typeof b.checkpointId === 'string' && b.checkpointId !== r.checkpointId)
  // A read-only tool takes none; without the flag none either.
  const read = await invoke(app, { name: 'read_file', userId: 'alice', arguments: { path: 'g.txt' }, context: ctx })
  assert.equal(read.checkpointId, undefined)
  const plain = await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: 'h.txt', content: 'h' }, context: { workspaceId: 'proj' } })
  assert.equal(plain.checkpointId, undefined)
  // A tool that fails still reports the checkpoint it took.
  const failed = await invoke(app, { name: 'edit', userId: 'alice', arguments: { path: 'missing.txt', old_string: 'a', new_string: 'b' }, context: ctx })
  assert.equal(failed.isError, true)
  assert.equal(typeof failed.checkpointId, 'string')

  let res = await app.inject({ method: 'POST', url: `${WS}/checkpoints/${r.checkpointId}/restore`, headers: ADMIN })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(await treeOf(root), { 'f.txt': 'good' })
  res = await app.inject({ method: 'POST', url: `${WS}/checkpoints/${b.checkpointId}/restore`, headers: ADMIN })
  assert.deepEqual(await treeOf(root), { 'f.txt': 'bad change' })
  res = await app.inject({ method: 'GET', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.equal(res.json().checkpoints.length, 3)
  assert.equal(res.json().checkpoints[0].label, 'auto')
})

both('delete stops the background processes, removes the directory and its checkpoints', async (t, setup) => {
  const { app, config } = await setup(t)
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  const ctx = { workspaceId: 'proj' }
  const started = await invoke(app, {
    name: 'bash',
    userId: 'alice',
    arguments: { action: 'start', command: 'while true; do date > tick.txt; sleep 0.05; done' },
    context: ctx
  })
  assert.equal(started.isError, false, started.output)
  let res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  assert.equal(res.json().workspaces[0].processes, 1)
  await app.inject({ method: 'POST', url: `${WS}/checkpoints`, headers: ADMIN })
  const root = join(config.workspacesDir, 'alice', 'proj')
  res = await app.inject({ method: 'DELETE', url: WS, headers: ADMIN })
  assert.equal(res.statusCode, 204)
  assert.equal(existsSync(root), false)
  await sleep(300)
  assert.equal(existsSync(root), false, 'nothing writes there any more')
  res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  assert.deepEqual(res.json().workspaces, [])
  assert.equal(existsSync(join(config.workspacesDir, '.tg', 'checkpoints', 'alice', 'ws', 'proj')), false)
  res = await app.inject({ method: 'DELETE', url: WS, headers: ADMIN })
  assert.equal(res.statusCode, 404)
  // A later tool call starts from an empty workspace, without the old checkpoints.
  const r = await invoke(app, { name: 'glob', userId: 'alice', arguments: { pattern: '**' }, context: ctx })
  assert.equal(r.isError, false)
  res = await app.inject({ method: 'GET', url: `${WS}/checkpoints`, headers: ADMIN })
  assert.deepEqual(res.json().checkpoints, [])
})

both('a delete while a tool call runs waits for it, then removes everything', async (t, setup) => {
  const { app, config } = await setup(t)
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  const root = join(config.workspacesDir, 'alice', 'proj')
  const slow = invoke(app, {
    name: 'bash',
    userId: 'alice',
    arguments: { action: 'exec', command: 'echo x > started.txt; sleep 0.5; echo done > out.txt; echo ok' },
    context: { workspaceId: 'proj' }
  })
  // The call holds the workspace's write lock once its command runs.
  while (!existsSync(join(root, 'started.txt'))) await sleep(10)
  const t0 = Date.now()
  const del = await app.inject({ method: 'DELETE', url: WS, headers: ADMIN })
  assert.equal(del.statusCode, 204)
  assert.ok(Date.now() - t0 >= 300, 'the delete waited for the running call')
  const r = await slow
  assert.equal(r.isError, false, r.output)
  assert.match(JSON.parse(r.output).stdout, /ok/)
  assert.equal(existsSync(root), false, 'the directory the call wrote into is gone')
})

both('concurrent uploads to one workspace: one wins whole, nothing mixed', async (t, setup) => {
  const { app, config } = await setup(t)
  const root = join(config.workspacesDir, 'alice', 'proj')
  const a: Record<string, string> = {}
  const b: Record<string, string> = {}
  for (let i = 0; i < 200; i++) {
    a[`d${i % 7}/a${i}.txt`] = `a${i}`
    b[`d${i % 5}/b${i}.txt`] = `b${i}`
  }
  const [ta, tb] = [await tgz(t, a), await tgz(t, b)]
  for (let round = 0; round < 3; round++) {
    const results = await Promise.all([put(app, WS, ta), put(app, WS, tb), put(app, WS, ta), put(app, WS, tb)])
    for (const r of results) assert.ok(r.statusCode === 200 || r.statusCode === 201, r.body)
    const tree = await treeOf(root)
    assert.ok(JSON.stringify(tree) === JSON.stringify(await sorted(a)) || JSON.stringify(tree) === JSON.stringify(await sorted(b)), 'exactly one archive')
  }
})

async function sorted (o: Record<string, string>): Promise<Record<string, string>> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-sort-'))
  try {
    for (const [p, c] of Object.entries(o)) {
      await mkdir(join(dir, p, '..'), { recursive: true })
      await writeFile(join(dir, p), c)
    }
    return await treeOf(dir)
  } finally {
    await rm(dir, { recursive: true, force: true })
  }
}

both('a restore while a background process writes: the checkpoint files come back, no error', async (t, setup) => {
  const { app, config } = await setup(t)
  const files: Record<string, string> = {}
  for (let i = 0; i < 50; i++) files[`src/f${i}.txt`] = `original ${i}`
  await put(app, WS, await tgz(t, files))
  const root = join(config.workspacesDir, 'alice', 'proj')
  const cp = (await app.inject({ method: 'POST', url: `${WS}/checkpoints`, headers: ADMIN })).json()
  const started = await invoke(app, {
    name: 'bash',
    userId: 'alice',
    arguments: {
      action: 'start',
      command: 'i=0; while true; do i=$((i+1)); for f in src/*.txt; do echo "changed $i" > "$f"; done; echo $i > noise.txt; sleep 0.01; done'
    },
    context: { workspaceId: 'proj' }
  })
  assert.equal(started.isError, false, started.output)
  await sleep(200)
  const res = await app.inject({ method: 'POST', url: `${WS}/checkpoints/${cp.checkpointId}/restore`, headers: ADMIN })
  assert.equal(res.statusCode, 200, res.body)
  const pid = JSON.parse(started.output).processId ?? JSON.parse(started.output).process?.processId
  await invoke(app, { name: 'bash', userId: 'alice', arguments: { action: 'stop', processId: pid }, context: { workspaceId: 'proj' } })
  // The writer may have run after the restore; what the restore wrote was whole files of the checkpoint.
  for (const [p, c] of Object.entries(await treeOf(root))) {
    if (p === 'noise.txt') continue
    // (the writer's `>` truncates before it writes, so it may be caught empty)
    assert.match(c, /^(original \d+|changed \d+\n|)$/, p)
  }
  const again = await app.inject({ method: 'POST', url: `${WS}/checkpoints/${cp.checkpointId}/restore`, headers: ADMIN })
  assert.equal(again.statusCode, 200)
  assert.deepEqual(await treeOf(root), files)
})

both('WORKSPACE_IDLE_TTL: the sweeper deletes idle workspaces (processes stopped first); expiresAt shows when', async (t, setup) => {
  const { app, config } = await setup(t, { WORKSPACE_IDLE_TTL: '2s' })
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  await put(app, '/users/alice/workspaces/busy', await tgz(t, { 'b.txt': 'b' }))
  const started = await invoke(app, { name: 'bash', userId: 'alice', arguments: { action: 'start', command: 'sleep 60' }, context: { workspaceId: 'proj' } })
  assert.equal(started.isError, false, started.output)
  let res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  for (const w of res.json().workspaces) assert.equal(Date.parse(w.expiresAt) - Date.parse(w.lastUsedAt), 2000)
  // busy is used every 500 ms; proj is left alone.
  const deadline = Date.now() + 4500
  while (Date.now() < deadline) {
    await invoke(app, { name: 'glob', userId: 'alice', arguments: { pattern: '*' }, context: { workspaceId: 'busy' } })
    await sleep(500)
  }
  assert.equal(existsSync(join(config.workspacesDir, 'alice', 'proj')), false, 'idle workspace deleted')
  assert.equal(existsSync(join(config.workspacesDir, 'alice', 'busy')), true, 'used workspace kept')
  res = await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })
  assert.deepEqual(res.json().workspaces.map((w: any) => w.workspaceId), ['busy'])
  const status = await invoke(app, { name: 'bash', userId: 'alice', arguments: { action: 'list' }, context: { workspaceId: 'proj' } })
  assert.doesNotMatch(status.output, /RUNNING/)
})

both('last use survives a restart (read back from disk)', async (t, setup) => {
  const { app, config, reopen } = await setup(t)
  await put(app, WS, await tgz(t, { 'a.txt': 'a' }))
  await invoke(app, { name: 'glob', userId: 'alice', arguments: { pattern: '*' }, context: { workspaceId: 'proj' } })
  const before = (await app.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })).json().workspaces[0]
  await app.close()
  const again = await reopen()
  const after = (await again.inject({ method: 'GET', url: '/users/alice/workspaces', headers: ADMIN })).json().workspaces[0]
  // The tree is back too (in loop mode: the image mounted again at start-up).
  assert.equal(after.bytes, 1)
  const r = await invoke(again, { name: 'read_file', userId: 'alice', arguments: { path: 'a.txt' }, context: { workspaceId: 'proj' } })
  assert.equal(JSON.parse(r.output).content, 'a')
  assert.equal(after.createdAt, before.createdAt)
  assert.ok(Math.abs(Date.parse(after.lastUsedAt) - Date.parse(before.lastUsedAt)) < 60_000)
  const st = await stat(join(config.workspacesDir, '.tg'))
  assert.equal(st.mode & 0o777, 0o700)
})

both('first run: a default WORKSPACES_DIR the sandbox uid cannot reach moves somewhere it can; an explicit one still fails', async (t, _setup, mode) => {
  const { WorkspaceManager } = await import('../../src/builtin/workspace/workspaces.js')
  const base = await realpath(await mkdtemp(join(tmpdir(), 'tg-first-')))
  t.after(async () => await rm(base, { recursive: true, force: true }))
  await chmod(base, 0o755)
  const clone = join(base, 'home')
  await mkdir(join(clone, 'repo'), { recursive: true })
  await chmod(clone, 0o700)
  const limits = { readMaxChars: 1, commandTimeoutMs: 1, bashLogChars: 1, maxProcessOutputChars: 1, outputMaxChars: 1 }
  const owner = { uid: 65534, gid: 65534 }
  const wanted = join(clone, 'repo', 'data', 'workspaces')
  const fallback = join(base, 'var', 'lib', 'tg')
  const mgr = new WorkspaceManager({
    workspacesDir: wanted,
    workspaceBases: [],
    readRoots: {},
    maxLimits: limits,
    owner,
    fallbackDirs: [join(clone, 'no-good'), fallback]
  })
  assert.equal(mgr.dir, fallback)
  assert.deepEqual(mgr.usedFallback, { from: wanted })
  assert.equal((await stat(fallback)).mode & 0o777, 0o711)
  assert.equal(existsSync(wanted), false, 'nothing made in the unreachable default')
  // An explicit WORKSPACES_DIR (no fallbacks) still stops start-up with the reason.
  assert.throws(() => new WorkspaceManager({ workspacesDir: wanted, workspaceBases: [], readRoots: {}, maxLimits: limits, owner }), /the sandbox uid 65534 cannot enter .*home \(mode 700\)/)
  await rm(join(clone, 'repo', 'data'), { recursive: true, force: true })

  // The whole server, started like `npm start` from the clone, as root with the sandbox on.
  const { spawn } = await import('node:child_process')
  const repo = process.cwd()
  const server = spawn(process.execPath, ['--import', import.meta.resolve('tsx'), join(repo, 'src', 'server.ts')], {
    cwd: join(clone, 'repo'),
    env: {
      ...process.env,
      PORT: '0',
      LOG_LEVEL: 'info',
      API_KEYS: '',
      API_KEYS_FILE: '',
      REDIS_URL: '',
      WORKSPACES_DIR: '',
      SANDBOX: 'auto',
      LOAD_EXAMPLES: 'false',
      WORKSPACE_QUOTA_MODE: mode
    },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<void>((resolve) => server.on('exit', () => resolve()))
  // Filled as the server starts; the clean-up uses what is known.
  const live: { port?: number, where?: string } = {}
  const user = `firstrun-${process.pid}`
  // The test's workspace is deleted through the gateway (in loop mode: its image unmounted and
  // removed), then the gateway stops as a service manager stops it (SIGTERM: what it still has
  // mounted is unmounted); only then are the directories removed. Nothing is left mounted.
  t.after(async () => {
    const { port, where } = live
    if (port !== undefined) await fetch(`http://127.0.0.1:${port}/users/${user}/workspaces/default`, { method: 'DELETE' }).catch(() => {})
    server.kill('SIGTERM')
    await Promise.race([exited, sleep(20_000)])
    server.kill('SIGKILL')
    if (where === undefined) return
    const left = mountsBelow(join(where, user))
    for (const m of [...left].sort().reverse()) execFileSync('umount', ['-l', m])
    await rm(join(where, user), { recursive: true, force: true })
    await rm(join(where, '.tg', 'used', user), { recursive: true, force: true })
    await rm(join(where, '.tg', 'images', user), { recursive: true, force: true })
    await rm(join(where, '.tg', 'mnt', user), { recursive: true, force: true })
    assert.deepEqual(left, [], 'the first-run gateway left mounts behind')
  })
  let logs = ''
  const port = live.port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${logs}`)), 60_000)
    const onData = (chunk: Buffer): void => {
      logs += chunk.toString()
      const m = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(logs)
      if (m) { clearTimeout(timer); resolve(Number(m[1])) }
    }
    server.stdout.on('data', onData)
    server.stderr.on('data', onData)
    server.on('exit', (code) => { clearTimeout(timer); reject(new Error(`server exited ${code}:\n${logs}`)) })
  })
  const where = live.where = /workspaces live in (\/var\/lib\/tool-gateway\/workspaces|\S+\/tool-gateway-workspaces):/.exec(logs)?.[1]
  assert.ok(where !== undefined, logs)
  const res = await fetch(`http://127.0.0.1:${port}/invoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ name: 'bash', userId: user, arguments: { action: 'exec', command: 'echo hi > f && cat f' } }) })
  const r = await res.json() as any
  assert.equal(r.isError, false, r.output)
  assert.match(JSON.parse(r.output).stdout, /hi/)
  assert.equal(existsSync(join(clone, 'repo', 'data', 'workspaces')), false)
  assert.equal(await readFile(join(where, user, 'default', 'f'), 'utf8'), 'hi\n')
}, { skip: process.getuid?.() !== 0 ? 'needs root (a sandbox uid other than ours)' : false })

both('an upload that stalls mid-body is cut off with 408 after REQUEST_TIMEOUT_MS, and leaves nothing', async (t, setup, mode) => {
  const { app, config } = await setup(t, { REQUEST_TIMEOUT_MS: '400' })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const port = (app.server.address() as { port: number }).port
  const tar = rawTar([{ path: 'a.txt', body: 'x'.repeat(5000) }])
  const { connect } = await import('node:net')
  const socket = connect(port, '127.0.0.1')
  t.after(() => { socket.destroy() })
  let answer = ''
  socket.on('data', (chunk: Buffer) => { answer += chunk.toString() })
  const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()))
  socket.write(`PUT /users/alice/workspaces/slow HTTP/1.1\r\nhost: x\r\nauthorization: Bearer key-admin-0123456789\r\ncontent-type: application/x-tar\r\ncontent-length: ${tar.length}\r\n\r\n`)
  socket.write(tar.subarray(0, 1024))
  const started = Date.now()
  await Promise.race([closed, sleep(5000)])
  assert.match(answer, /^HTTP\/1\.1 408/)
  assert.match(answer, /GW_REQUEST_TIMEOUT/)
  assert.ok(Date.now() - started >= 300)
  assert.equal(existsSync(join(config.workspacesDir, 'alice', 'slow')), false)
  await assertNoStaging(config, mode)
})

both('a downloaded file is an attachment under its own name, never sniffed: nosniff and an RFC 6266 content-disposition', async (t, setup) => {
  const { app } = await setup(t)
  const name = 'résumé "x".html'
  const written = await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: `docs/${name}`, content: '<script>alert(1)</script>\n' }, context: { workspaceId: 'proj' } })
  assert.equal(written.isError, false, written.output)
  const res = await app.inject({ method: 'GET', url: `${WS}/files/docs/${encodeURIComponent(name)}`, headers: ADMIN })
  assert.equal(res.statusCode, 200, res.body)
  assert.equal(res.body, '<script>alert(1)</script>\n')
  assert.equal(res.headers['content-type'], 'application/octet-stream')
  assert.equal(res.headers['x-content-type-options'], 'nosniff')
  assert.equal(res.headers['content-disposition'], 'attachment; filename="r_sum_ _x_.html"; filename*=UTF-8\'\'r%C3%A9sum%C3%A9%20%22x%22.html')
  // An empty file too (another code path).
  await invoke(app, { name: 'write_file', userId: 'alice', arguments: { path: 'empty.txt', content: '' }, context: { workspaceId: 'proj' } })
  const empty = await app.inject({ method: 'GET', url: `${WS}/files/empty.txt`, headers: ADMIN })
  assert.equal(empty.statusCode, 200, empty.body)
  assert.equal(empty.headers['x-content-type-options'], 'nosniff')
  assert.equal(empty.headers['content-disposition'], 'attachment; filename="empty.txt"; filename*=UTF-8\'\'empty.txt')
})
