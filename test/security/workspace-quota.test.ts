/**
 * A hostile tenant against the workspace quota: parallel and sequential
 * `fallocate`, and a fast file creator, through the real gateway's bash (SANDBOX=bwrap). With the
 * quota enforced by the file system (a loop-mounted ext4 image per workspace,
 * docs/ARCHITECTURE.md#workspace-quota), the workspace never holds more than the quota plus
 * 64 MiB, the host's disk takes no more than the image, and the entries stay within
 * WORKSPACE_MAX_FILES. A tenant's workspaces are limited in number (TENANT_MAX_WORKSPACES).
 *
 * Needs root, bwrap and mkfs.ext4: skipped without them, a failure under CI=true.
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { lstatSync, readdirSync, readFileSync } from 'node:fs'
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { test } from 'node:test'
import { startGateway, type GatewayProcess } from '../../scripts/lib/gateway-process.js'

const MiB = 1024 * 1024
const QUOTA = 128 * MiB
const MAX_FILES = 2000
const OVERSHOOT = 64 * MiB

function has (cmd: string): boolean {
  try {
    execFileSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' })
    return true
  } catch {
    return false
  }
}
const missing = [
  ...(process.getuid?.() === 0 ? [] : ['root']),
  ...['bwrap', 'mkfs.ext4', 'fallocate'].filter((c) => !has(c))
]
// Outside CI a machine without them skips; under CI=true the suite must run them.
const skip = missing.length > 0 && process.env.CI !== 'true' ? `needs ${missing.join(', ')}` : false
if (missing.length > 0 && process.env.CI === 'true') throw new Error(`CI=true: the workspace quota attacks need ${missing.join(', ')}`)

interface InvokeResult { isError: boolean, output: string, error: { code: string, message: string } | null }

async function invoke (gw: GatewayProcess, userId: string, workspaceId: string, name: string, args: Record<string, unknown>): Promise<InvokeResult> {
  const res = await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, userId, arguments: args, context: { workspaceId } }),
    signal: AbortSignal.timeout(120_000)
  })
  assert.equal(res.status, 200, await res.clone().text())
  return await res.json() as InvokeResult
}

async function bash (
  gw: GatewayProcess,
  userId: string,
  workspaceId: string,
  command: string
): Promise<{ stdout: string, stderr: string, exitCode: number, quotaExceeded?: boolean }> {
  const r = await invoke(gw, userId, workspaceId, 'bash', { action: 'exec', command, timeoutMs: 100_000 })
  assert.equal(r.isError, false, r.output)
  return JSON.parse(r.output)
}

/** Apparent bytes and entries below a directory, counted from scratch by the test itself. */
function count (dir: string): { bytes: number, files: number } {
  let bytes = 0
  let files = 0
  for (const name of readdirSync(dir)) {
    files++
    const p = join(dir, name)
    const st = lstatSync(p)
    if (st.isDirectory()) {
      const sub = count(p)
      bytes += sub.bytes
      files += sub.files
    } else if (st.isFile()) bytes += st.size
  }
  return { bytes, files }
}

/** Bytes the host's file system gives to `dir` (allocated blocks, not crossing into mounted images). */
function hostBytes (dir: string): number {
  return Number(execFileSync('du', ['-sxB1', dir], { encoding: 'utf8' }).split('\t')[0])
}

/** Lazily unmounts whatever is still mounted below `dir` (a gateway that did not stop cleanly). */
function unmountBelow (dir: string): void {
  const targets = readFileSync('/proc/self/mountinfo', 'utf8').split('\n')
    .map((l) => l.split(' ')[4] ?? '')
    .filter((t) => t.startsWith(dir + '/'))
    .sort((a, b) => b.length - a.length)
  for (const t of targets) {
    try { execFileSync('umount', ['-l', t], { stdio: 'ignore' }) } catch {}
  }
}

async function gateway (t: { after: (fn: () => unknown) => void }, env: Record<string, string> = {}): Promise<{ gw: GatewayProcess, dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), 'tg-wsq-'))
  // The sandbox uids must traverse it down to their workspaces.
  await chmod(dir, 0o711)
  const holder: { gw?: GatewayProcess } = {}
  // Registered before startGateway's own clean-up (hooks run in order): stop it gracefully (it
  // unmounts its images), then remove what is left.
  t.after(async () => {
    await holder.gw?.stop()
    unmountBelow(dir)
    await rm(dir, { recursive: true, force: true })
  })
  holder.gw = await startGateway(t, {
    SANDBOX: 'bwrap',
    WORKSPACES_DIR: join(dir, 'workspaces'),
    WORKSPACE_QUOTA_MODE: 'loop',
    WORKSPACE_QUOTA_BYTES: String(QUOTA),
    WORKSPACE_MAX_FILES: String(MAX_FILES),
    ...env
  })
  return { gw: holder.gw, dir }
}

test('8 parallel fallocate: the workspace stays within the quota + 64 MiB and the host disk takes no more than that', { skip, timeout: 180_000 }, async (t) => {
  const { gw, dir } = await gateway(t)
  const root = join(dir, 'workspaces', 'mallory', 'par')
  const r = await bash(gw, 'mallory', 'par', 'for i in 1 2 3 4 5 6 7 8; do fallocate -l 100M p$i & done; wait; echo done')
  const used = count(root)
  t.diagnostic(`8 x fallocate 100M against ${QUOTA / MiB} MiB: ${(used.bytes / MiB).toFixed(1)} MiB in the workspace, host ${(hostBytes(dir) / MiB).toFixed(1)} MiB`)
  assert.ok(used.bytes <= QUOTA + OVERSHOOT, `${(used.bytes / MiB).toFixed(1)} MiB in the workspace`)
  assert.ok(hostBytes(dir) <= QUOTA + OVERSHOOT, `${(hostBytes(dir) / MiB).toFixed(1)} MiB on the host disk`)
  assert.equal(r.quotaExceeded, true, r.stderr)
  assert.match(r.stderr, /WORKSPACE_QUOTA_EXCEEDED/)
  // The mode is said where operators look.
  const status = await (await fetch(`${gw.url}/status`)).json() as { workspaceQuota: { mode: string } }
  assert.equal(status.workspaceQuota.mode, 'loop')
  assert.match(gw.logs(), /workspace quota: enforced by the file system/)
  // The tenant can clean up and write again.
  const again = await bash(gw, 'mallory', 'par', 'rm -f p*; fallocate -l 10M ok && echo ok')
  assert.equal(again.stdout, 'ok\n', again.stderr)
})

test('three sequential fallocate in one command: within the quota + 64 MiB', { skip, timeout: 180_000 }, async (t) => {
  const { gw, dir } = await gateway(t)
  const root = join(dir, 'workspaces', 'mallory', 'seq')
  await bash(gw, 'mallory', 'seq', 'fallocate -l 100M a; fallocate -l 100M b; fallocate -l 100M c; echo done')
  const used = count(root)
  t.diagnostic(`3 x fallocate 100M against ${QUOTA / MiB} MiB: ${(used.bytes / MiB).toFixed(1)} MiB`)
  assert.ok(used.bytes <= QUOTA + OVERSHOOT, `${(used.bytes / MiB).toFixed(1)} MiB in the workspace`)
  assert.ok(hostBytes(dir) <= QUOTA + OVERSHOOT, `${(hostBytes(dir) / MiB).toFixed(1)} MiB on the host disk`)
})

test('a fast file creator: the entries stay within WORKSPACE_MAX_FILES', { skip, timeout: 180_000 }, async (t) => {
  const { gw, dir } = await gateway(t)
  const root = join(dir, 'workspaces', 'mallory', 'many')
  // Four creators at once, 2,500 entries each (files and directories), as fast as the shell goes.
  const r = await bash(gw, 'mallory', 'many', 'for j in 1 2 3 4; do (mkdir d$j; cd d$j && seq 1 2500 | xargs touch) & done; wait; echo done')
  const used = count(root)
  t.diagnostic(`10,000 entries tried against ${MAX_FILES}: ${used.files} made`)
  assert.ok(used.files <= MAX_FILES, `${used.files} entries for a limit of ${MAX_FILES}`)
  assert.ok(used.files >= MAX_FILES - 10, `the limit is usable: ${used.files} entries`)
  assert.equal(r.quotaExceeded, true, r.stderr)
  const more = await bash(gw, 'mallory', 'many', 'touch extra1 extra2 extra3; echo rc=$?')
  assert.ok(count(root).files <= MAX_FILES, more.stderr)
  // A file tool's write into the full workspace is the documented quota error.
  const write = await invoke(gw, 'mallory', 'many', 'write_file', { path: 'one-more.txt', content: 'x' })
  assert.equal(write.isError, true)
  assert.equal(write.error?.code, 'WORKSPACE_QUOTA_EXCEEDED', write.output)
})

test('a tenant\'s workspaces are limited in number (TENANT_MAX_WORKSPACES): ' +
  'the next one is refused, others are not affected', { skip, timeout: 120_000 }, async (t) => {
  const { gw } = await gateway(t, { TENANT_MAX_WORKSPACES: '3' })
  for (const id of ['w1', 'w2', 'w3']) assert.equal((await bash(gw, 'mallory', id, 'echo hi')).stdout, 'hi\n')
  const refused = await invoke(gw, 'mallory', 'w4', 'bash', { action: 'exec', command: 'echo hi' })
  assert.equal(refused.isError, true)
  assert.equal(refused.error?.code, 'GW_TENANT_QUOTA_EXCEEDED', refused.output)
  const src = await mkdtemp(join(tmpdir(), 'tg-wsq-src-'))
  t.after(async () => await rm(src, { recursive: true, force: true }))
  await writeFile(join(src, 'a.txt'), 'a')
  const tar = execFileSync('tar', ['-c', '-C', src, 'a.txt'])
  const upload = await fetch(`${gw.url}/users/mallory/workspaces/w5`, { method: 'PUT', headers: { 'content-type': 'application/x-tar' }, body: tar })
  assert.equal(upload.status, 403)
  assert.equal((await upload.json() as { code: string }).code, 'GW_TENANT_QUOTA_EXCEEDED')
  // An existing workspace still works, and so does another tenant.
  assert.equal((await bash(gw, 'mallory', 'w2', 'echo again')).stdout, 'again\n')
  assert.equal((await bash(gw, 'alice', 'w4', 'echo hi')).stdout, 'hi\n')
  // Deleting one makes room.
  assert.equal((await fetch(`${gw.url}/users/mallory/workspaces/w1`, { method: 'DELETE' })).status, 204)
  assert.equal((await bash(gw, 'mallory', 'w4', 'echo now')).stdout, 'now\n')
})

test('TENANT_QUOTA_BYTES counts workspaces and checkpoints: ' +
  'a checkpoint or a new workspace past it is refused, nothing kept', { skip, timeout: 120_000 }, async (t) => {
  const { gw } = await gateway(t, { TENANT_QUOTA_BYTES: String(8 * MiB) })
  assert.equal((await bash(gw, 'mallory', 'w1', 'head -c 5M /dev/urandom > data && echo ok')).stdout, 'ok\n')
  // The checkpoint would store another 5 MiB: 10 MiB for the tenant, over its 8.
  const cp = await fetch(`${gw.url}/users/mallory/workspaces/w1/checkpoints`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  assert.equal(cp.status, 403, await cp.clone().text())
  assert.equal((await cp.json() as { code: string }).code, 'GW_TENANT_QUOTA_EXCEEDED')
  const list = await (await fetch(`${gw.url}/users/mallory/workspaces/w1/checkpoints`)).json() as { checkpoints: unknown[] }
  assert.deepEqual(list.checkpoints, [], 'the refused checkpoint is not kept')
  assert.equal((await bash(gw, 'mallory', 'w1', 'head -c 4M /dev/urandom > more && echo ok')).stdout, 'ok\n')
  // 9 MiB held: no new workspace.
  const refused = await invoke(gw, 'mallory', 'w2', 'bash', { action: 'exec', command: 'echo hi' })
  assert.equal(refused.error?.code, 'GW_TENANT_QUOTA_EXCEEDED', refused.output)
  // Freed: both work again.
  assert.equal((await bash(gw, 'mallory', 'w1', 'rm more data && echo ok')).stdout, 'ok\n')
  assert.equal((await bash(gw, 'mallory', 'w2', 'echo hi')).stdout, 'hi\n')
  const again = await fetch(`${gw.url}/users/mallory/workspaces/w1/checkpoints`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })
  assert.equal(again.status, 201, await again.text())
})
