/**
 * HTTP side of tenant isolation: what the request log writes, and key-guess throttling behind a NAT.
 * - `?api_key=<key>` (a common client mistake; refused) was logged in clear with the full URL.
 * - Throttling per address let one address lock out every tenant behind it: now per (address,
 *   key prefix), with a per-address ceiling ten times higher.
 * Against the real gateway process; the log is its real stdout.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'

const ADMIN = 'admin-key-0123456789'
const ACME = 'acme-key-0123456789'
const KEYS = `${ADMIN}:*,${ACME}:acme`

async function gateway (t: TestContext, env: Record<string, string> = {}): Promise<GatewayProcess> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-sec-log-'))
  t.after(() => rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { API_KEYS: KEYS, SANDBOX: 'none', WORKSPACES_DIR: workspaces, LOG_LEVEL: 'info', ...env })
  t.after(() => gw.stop())
  return gw
}

async function get (gw: GatewayProcess, path: string, key?: string, method = 'GET'): Promise<{ status: number, retryAfter: string | null }> {
  const res = await fetch(gw.url + path, { method, headers: key !== undefined ? { authorization: `Bearer ${key}` } : {}, signal: AbortSignal.timeout(30_000) })
  await res.arrayBuffer()
  return { status: res.status, retryAfter: res.headers.get('retry-after') }
}

/** The request log lines (pino JSON) whose url starts with `path`. */
function logged (gw: GatewayProcess, path: string): Array<{ req: { url: string } }> {
  return gw.logs().split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l))
    .filter((e) => typeof e.req?.url === 'string' && e.req.url.startsWith(path))
}

test('request log: credential-like query values are redacted in the logged URL, other parameters kept', async (t) => {
  const gw = await gateway(t)
  const secrets = ['kX9-api-key-in-url-4417', 'tok-abcdef-998877', 'pw-Secr3t-55', 'sess-1234567890', 'cs-client-secret-42']
  await get(gw, `/tools?api_key=${secrets[0]}`)
  await get(gw, `/tools?format=mcp&access_token=${secrets[1]}&userId=acme`, ACME)
  await get(gw, `/tools?PassWord=${secrets[2]}&X-Session-Id=${secrets[3]}`, ACME)
  await get(gw, `/nope?functions=calculate&client%5Fsecret=${secrets[4]}`, ACME)
  await get(gw, `/mcp?functions=calculate&apikey=${secrets[0]}`, ACME, 'DELETE')
  // The lines are written when each response is sent; give stdout a moment.
  for (let i = 0; i < 50 && logged(gw, '/mcp').length === 0; i++) await sleep(50)

  const log = gw.logs()
  for (const secret of secrets) assert.ok(!log.includes(secret), `the log contains ${secret}:\n${log}`)
  const urls = [...logged(gw, '/tools'), ...logged(gw, '/nope'), ...logged(gw, '/mcp')].map((e) => e.req.url)
  assert.deepEqual(urls, [
    '/tools?api_key=[redacted]',
    '/tools?format=mcp&access_token=[redacted]&userId=acme',
    '/tools?PassWord=[redacted]&X-Session-Id=[redacted]',
    '/nope?functions=calculate&client%5Fsecret=[redacted]',
    '/mcp?functions=calculate&apikey=[redacted]'
  ])
})

test('key guessing behind one address: the guessed key prefix gets 429, other keys from that address keep working; ' +
  'the per-address ceiling still holds', async (t) => {
  // 5 wrong keys per (address, key prefix) a minute; the address as a whole: 50.
  const gw = await gateway(t, { AUTH_FAILURES_PER_MINUTE: '5' })

  // One client behind the NAT guesses keys of one shape (the first 8 characters stay the same).
  for (let i = 0; i < 5; i++) assert.equal((await get(gw, '/tools', `guessing-${i}-0123456789`)).status, 401)
  const blocked = await get(gw, '/tools', 'guessing-5-0123456789')
  assert.equal(blocked.status, 429)
  assert.ok(Number(blocked.retryAfter) >= 1 && Number(blocked.retryAfter) <= 60, String(blocked.retryAfter))
  // The other tenants behind the same address are not locked out.
  assert.equal((await get(gw, '/tools', ACME)).status, 200)
  assert.equal((await get(gw, '/tools', ADMIN)).status, 200)

  // A guesser that varies the prefix is bounded by the per-address ceiling (50 a minute),
  // and then nothing from that address is served, a right key neither.
  let status = 0
  let sent = 5
  for (; sent < 200 && status !== 429; sent++) status = (await get(gw, '/tools', `${String(sent).padStart(4, '0')}-other-prefix-guess`)).status
  assert.equal(status, 429, 'the per-address ceiling never applied')
  assert.ok(sent >= 50 && sent <= 52, `the ceiling applied after ${sent} wrong keys`)
  assert.equal((await get(gw, '/tools', ACME)).status, 429)
})
