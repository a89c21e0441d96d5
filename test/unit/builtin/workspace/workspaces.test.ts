import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, mkdir, rm, stat, symlink, realpath, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { WorkspaceManager } from '../../../../src/builtin/workspace/workspaces.js'
import { ToolError } from '../../../../src/builtin/types.js'
import type { WorkspaceLimits } from '../../../../src/routing/types.js'

const MAX: WorkspaceLimits = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }
const user = (userId: string | undefined) => ({ userId, isAdmin: false })
const admin = { userId: undefined, isAdmin: true }

async function setup (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-ws-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  await mkdir(path.join(dir, 'skills'))
  await mkdir(path.join(dir, 'bases', 'b1', 'proj'), { recursive: true })
  await mkdir(path.join(dir, 'elsewhere'))
  const mgr = new WorkspaceManager({
    workspacesDir: path.join(dir, 'ws'),
    workspaceBases: [path.join(dir, 'bases', 'b1')],
    readRoots: { skills: path.join(dir, 'skills') },
    maxLimits: MAX
  })
  return { dir, mgr }
}

async function rejects (p: Promise<unknown>, reason: string, re: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ToolError, String(err))
    assert.equal(err.reason, reason)
    assert.match(err.message, re)
    return true
  })
}

test('default workspace is created per tenant with mode 0700', async (t) => {
  const { dir, mgr } = await setup(t)
  const ws = await mgr.resolve({}, user('acme'))
  assert.equal(ws.root, path.join(dir, 'ws', 'acme', 'default'))
  assert.equal(ws.tenant, 'acme')
  assert.equal(ws.workspaceId, 'default')
  assert.equal((await stat(ws.root)).mode & 0o777, 0o700)
  assert.equal((await stat(path.dirname(ws.root))).mode & 0o777, 0o700)
  assert.deepEqual(ws.limits, MAX)
  assert.deepEqual(ws.readRoots, [])
  const anon = await mgr.resolve({ workspaceId: 'ws-1' }, user(undefined))
  assert.equal(anon.root, path.join(dir, 'ws', '_', 'ws-1'))
  // Same tenant + id resolves to the same directory again.
  assert.equal((await mgr.resolve({}, user('acme'))).root, ws.root)
})

test('workspaceId is validated', async (t) => {
  const { mgr } = await setup(t)
  for (const id of ['..', '.', '../x', 'a/b', '', '-x', 'a'.repeat(65), 'a\0b']) {
    await rejects(mgr.resolve({ workspaceId: id }, user('acme')), 'invalid-arguments', /workspaceId/)
  }
  await mgr.resolve({ workspaceId: 'a.b_c-1' }, user('acme'))
})

test('tenant is asserted even though it is validated upstream', async (t) => {
  const { mgr } = await setup(t)
  for (const id of ['../x', 'a_b', '', 'x/y']) await rejects(mgr.resolve({}, user(id)), 'invalid-arguments', /tenant/)
})

test('readRoots: configured names only, host paths never echoed', async (t) => {
  const { dir, mgr } = await setup(t)
  const ws = await mgr.resolve({ readRoots: ['skills', 'skills'] }, user('acme'))
  assert.deepEqual(ws.readRoots, [{ name: 'skills', path: path.join(dir, 'skills') }])
  await assert.rejects(mgr.resolve({ readRoots: ['secrets'] }, user('acme')), (err: unknown) => {
    assert.ok(err instanceof ToolError)
    assert.equal(err.reason, 'forbidden')
    assert.match(err.message, /"secrets" is not configured/)
    assert.ok(!err.message.includes(dir))
    return true
  })
  await rejects(mgr.resolve({ readRoots: ['__proto__'] }, user('acme')), 'forbidden', /not configured/)
})

test('read roots are checked at construction', async (t) => {
  const { dir } = await setup(t)
  assert.throws(() => new WorkspaceManager({ workspacesDir: path.join(dir, 'w2'), workspaceBases: [], readRoots: { x: path.join(dir, 'nope') }, maxLimits: MAX }), /READ_ROOTS entry x/)
})

test('limits can only be lowered', async (t) => {
  const { mgr } = await setup(t)
  const ws = await mgr.resolve({ limits: { readMaxChars: 100, commandTimeoutMs: 10_000_000 } }, user('acme'))
  assert.equal(ws.limits.readMaxChars, 100)
  assert.equal(ws.limits.commandTimeoutMs, MAX.commandTimeoutMs)
  for (const bad of [0, -1, Number.NaN, 0.5]) {
    await rejects(mgr.resolve({ limits: { readMaxChars: bad } }, user('acme')), 'invalid-arguments', /readMaxChars/)
  }
  await rejects(mgr.resolve({ limits: { bashLogChars: '5' as unknown as number } }, user('acme')), 'invalid-arguments', /bashLogChars/)
})

test('workspaceRoot: admin only, and only under WORKSPACE_BASES', async (t) => {
  const { dir, mgr } = await setup(t)
  const proj = path.join(dir, 'bases', 'b1', 'proj')
  await rejects(mgr.resolve({ workspaceRoot: proj }, user('acme')), 'forbidden', /admin/)
  assert.equal((await mgr.resolve({ workspaceRoot: proj }, admin)).root, proj)
  await rejects(mgr.resolve({ workspaceRoot: path.join(dir, 'elsewhere') }, admin), 'forbidden', /WORKSPACE_BASES/)
  await rejects(mgr.resolve({ workspaceRoot: path.join(proj, '..', '..', '..', 'elsewhere') }, admin), 'forbidden', /WORKSPACE_BASES/)
  // A symlink under a base that points outside is judged by its real path.
  await symlink(path.join(dir, 'elsewhere'), path.join(dir, 'bases', 'b1', 'link'))
  await rejects(mgr.resolve({ workspaceRoot: path.join(dir, 'bases', 'b1', 'link') }, admin), 'forbidden', /WORKSPACE_BASES/)
  await rejects(mgr.resolve({ workspaceRoot: 'relative/path' }, admin), 'invalid-arguments', /absolute/)
})

test('a symlink planted as a tenant directory is refused', async (t) => {
  const { dir, mgr } = await setup(t)
  await mkdir(path.join(dir, 'ws'), { recursive: true })
  await symlink(path.join(dir, 'elsewhere'), path.join(dir, 'ws', 'evil'))
  await rejects(mgr.resolve({}, user('evil')), 'forbidden', /plain directory/)
})

test('a workspace directory swapped for a symlink or a file after its first use is refused, and made anew once removed', async (t) => {
  const { dir, mgr } = await setup(t)
  const first = await mgr.resolve({ workspaceId: 'w1' }, user('acme'))
  assert.equal(first.root, path.join(dir, 'ws', 'acme', 'w1'))
  await mkdir(path.join(dir, 'elsewhere'), { recursive: true })
  await rm(first.root, { recursive: true })
  await symlink(path.join(dir, 'elsewhere'), first.root)
  await rejects(mgr.resolve({ workspaceId: 'w1' }, user('acme')), 'forbidden', /plain directory/)
  await rm(first.root)
  await writeFile(first.root, 'not a directory')
  await rejects(mgr.resolve({ workspaceId: 'w1' }, user('acme')), 'forbidden', /plain directory/)
  await rm(first.root)
  const again = await mgr.resolve({ workspaceId: 'w1' }, user('acme'))
  assert.ok((await stat(again.root)).isDirectory())
})

test('TENANT_MAX_WORKSPACES: a tenant\'s next new workspace is refused (tenant-quota), existing ones and other tenants are not', async (t) => {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-ws-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const mgr = new WorkspaceManager({ workspacesDir: path.join(dir, 'ws'), workspaceBases: [], readRoots: {}, maxLimits: MAX, maxWorkspacesPerTenant: 3 })
  // Made concurrently: the count is checked one creation at a time, so a burst cannot pass it.
  const made = await Promise.allSettled(['a', 'b', 'c', 'd', 'e', 'f'].map(async (id) => await mgr.resolve({ workspaceId: id }, user('acme'))))
  assert.equal(made.filter((r) => r.status === 'fulfilled').length, 3)
  for (const r of made) {
    if (r.status === 'rejected') {
      assert.ok(r.reason instanceof ToolError)
      assert.equal(r.reason.reason, 'tenant-quota')
      assert.match(r.reason.message, /GW_TENANT_QUOTA_EXCEEDED.*TENANT_MAX_WORKSPACES is 3/)
    }
  }
  assert.equal((await mgr.workspaceIds('acme')).length, 3)
  const kept = (await mgr.workspaceIds('acme'))[0] as string
  await mgr.resolve({ workspaceId: kept }, user('acme'))
  await mgr.resolve({ workspaceId: 'z' }, user('other'))
  // The admission hook (TENANT_QUOTA_BYTES) is asked before a new one is made, never for an existing one.
  const asked: string[] = []
  mgr.setAdmission(async (tenant) => {
    asked.push(tenant)
    throw new ToolError('over the bytes', 'tenant-quota')
  })
  await mgr.resolve({ workspaceId: kept }, user('acme'))
  await rejects(mgr.resolve({ workspaceId: 'y' }, user('other')), 'tenant-quota', /over the bytes/)
  assert.deepEqual(asked, ['other'])
  assert.deepEqual(await mgr.workspaceIds('other'), ['z'])
})
