// Host claims of sandbox uids and cgroup roots: each "other gateway" is a real process holding its
// claim (a claim is keyed by its owner's pid and start time), in a private claims directory.
import assert from 'node:assert/strict'
import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { StartupError } from '../../../../src/errors.js'
import { claimHost, UID_BLOCK, type ClaimRequest } from '../../../../src/builtin/sandbox/host-claim.js'

const RANGE = { first: 200000, last: 299999 }

async function claimsDir (t: { after: (fn: () => Promise<void>) => void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-claims-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  return dir
}

/** Another gateway: a process that claims and holds its claim until killed. Resolves with what it got. */
async function otherGateway (
  t: { after: (fn: () => void) => void },
  req: ClaimRequest
): Promise<{ child: ChildProcess, got: { uidRange?: { first: number, last: number }, cgroupName?: string } }> {
  const code = `import { claimHost } from './src/builtin/sandbox/host-claim.ts'
const c = await claimHost(${JSON.stringify(req)})
process.stdout.write(JSON.stringify({ uidRange: c.uidRange, cgroupName: c.cgroupName }) + '\\n')
setInterval(() => {}, 1000)`
  const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { stdio: ['ignore', 'pipe', 'pipe'] })
  t.after(() => { child.kill('SIGKILL') })
  let out = ''
  let err = ''
  child.stderr?.on('data', (d: Buffer) => { err += d.toString() })
  const got = await new Promise<string>((resolve, reject) => {
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString()
      if (out.includes('\n')) resolve(out.trim())
    })
    child.once('exit', (c) => reject(new Error(`the other gateway exited with ${c}: ${err}`)))
  })
  return { child, got: JSON.parse(got) }
}

async function killed (child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
}

test('host claim: with Redis (uids kept), another deployment\'s overlapping range stops start-up naming SANDBOX_UID_RANGE; ' +
  'the same deployment shares it', { timeout: 60_000 }, async (t) => {
  const dir = await claimsDir(t)
  await otherGateway(t, { deployment: 'redis:a', uidsPersisted: true, uidRange: RANGE, dir })
  await assert.rejects(claimHost({ deployment: 'redis:b', uidsPersisted: true, uidRange: { first: 250000, last: 250999 }, dir }),
    (err: unknown) => err instanceof StartupError && /SANDBOX_UID_RANGE 250000-250999 overlaps/.test(err.message) && /200000-299999/.test(err.message))
  // An instance of the same deployment: the same range, the same cgroup parent.
  const same = await claimHost({ deployment: 'redis:a', uidsPersisted: true, uidRange: RANGE, dir })
  assert.deepEqual(same.uidRange, RANGE)
  assert.equal(same.cgroupName, 'tool-gateway-200000-299999')
  same.release()
  // A disjoint range is fine.
  const other = await claimHost({ deployment: 'redis:b', uidsPersisted: true, uidRange: { first: 300000, last: 300999 }, dir })
  assert.equal(other.cgroupName, 'tool-gateway-300000-300999')
  other.release()
  assert.deepEqual(readdirSync(dir).filter((n) => n === `${process.pid}.json`), [], 'released')
})

test('host claim: without Redis, each gateway takes its own block of the range (distinct uids and cgroup parents); ' +
  'none left is a clear error', { timeout: 60_000 }, async (t) => {
  const dir = await claimsDir(t)
  const a = await otherGateway(t, { deployment: 'process:a', uidsPersisted: false, uidRange: RANGE, dir })
  const b = await otherGateway(t, { deployment: 'process:b', uidsPersisted: false, uidRange: RANGE, dir })
  const mine = await claimHost({ deployment: 'process:c', uidsPersisted: false, uidRange: RANGE, dir })
  t.after(() => { mine.release() })
  const ranges = [a.got.uidRange, b.got.uidRange, mine.uidRange]
  for (const r of ranges) {
    assert.ok(r !== undefined && r.first >= RANGE.first && r.last <= RANGE.last && r.last - r.first + 1 === UID_BLOCK, JSON.stringify(r))
  }
  assert.equal(new Set(ranges.map((r) => r?.first)).size, 3, `disjoint blocks: ${JSON.stringify(ranges)}`)
  assert.equal(new Set([a.got.cgroupName, b.got.cgroupName, mine.cgroupName]).size, 3)
  // A range of two blocks, both held by live gateways of other deployments: nothing left.
  const two = { first: a.got.uidRange?.first ?? 0, last: (a.got.uidRange?.first ?? 0) + 2 * UID_BLOCK - 1 }
  const small = await claimsDir(t)
  await otherGateway(t, { deployment: 'process:d', uidsPersisted: false, uidRange: two, dir: small })
  await otherGateway(t, { deployment: 'process:e', uidsPersisted: false, uidRange: two, dir: small })
  await assert.rejects(claimHost({ deployment: 'process:f', uidsPersisted: false, uidRange: two, dir: small }),
    (err: unknown) => err instanceof StartupError && /no free block/.test(err.message) && /SANDBOX_UID_RANGE/.test(err.message))
})

test('host claim: the claim of a gateway that is gone (SIGKILL) does not count and is removed', { timeout: 60_000 }, async (t) => {
  const dir = await claimsDir(t)
  const gone = await otherGateway(t, { deployment: 'redis:a', uidsPersisted: true, uidRange: RANGE, dir })
  await assert.rejects(claimHost({ deployment: 'redis:b', uidsPersisted: true, uidRange: RANGE, dir }), StartupError)
  await killed(gone.child)
  assert.equal(existsSync(join(dir, `${gone.child.pid ?? 0}.json`)), true, 'SIGKILL left the claim')
  const c = await claimHost({ deployment: 'redis:b', uidsPersisted: true, uidRange: RANGE, dir })
  assert.equal(existsSync(join(dir, `${gone.child.pid ?? 0}.json`)), false)
  c.release()
})

test('host claim: an explicit SANDBOX_CGROUP_ROOT of another deployment stops start-up naming it', { timeout: 60_000 }, async (t) => {
  const dir = await claimsDir(t)
  await otherGateway(t, { deployment: 'redis:a', uidsPersisted: true, uidRange: { first: 300000, last: 300999 }, cgroupRoot: '/tg/shared', dir })
  await assert.rejects(claimHost({ deployment: 'redis:b', uidsPersisted: true, uidRange: RANGE, cgroupRoot: '/tg/shared/', dir }),
    (err: unknown) => err instanceof StartupError && /SANDBOX_CGROUP_ROOT \/tg\/shared\/ is used by another gateway/.test(err.message))
  const same = await claimHost({ deployment: 'redis:a', uidsPersisted: true, uidRange: { first: 300000, last: 300999 }, cgroupRoot: '/tg/shared', dir })
  same.release()
})
