/**
 * Code mode's isolation (SPEC 19, docs/ARCHITECTURE.md#isolation): a script runs in its tenant's
 * sandbox and reaches the gateway only through its own call's socket. Attacks, each written as a
 * script a hostile model would send: open a network socket (to the gateway's own port, too), find
 * and connect to another tenant's running script's socket, read another call's token, and outlive
 * the deadline with detached children. Real gateway app, SANDBOX=bwrap, a uid per tenant.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { statSync } from 'node:fs'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildTestApp, listenOnLoopback } from '../helpers/app.js'
import { allProcesses, waitUntil } from '../../scripts/lib/proc.js'

const ADMIN = 'k-admin-codesec-0123'
const ACME = 'k-acme-codesec-0123'
const GLOBEX = 'k-globex-codesec-0123'
const KEYS = `${ADMIN}:*,${ACME}:acme,${GLOBEX}:globex`
const skip = process.getuid?.() !== 0 && 'needs root (the sandbox runs each tenant as its own uid)'

type Language = 'javascript' | 'python'

async function runScript (app: FastifyInstance, key: string, userId: string, language: Language, code: string, timeoutMs?: number): Promise<any> {
  const res = await app.inject({
    method: 'POST',
    url: '/invoke',
    headers: { authorization: `Bearer ${key}` },
    payload: {
      name: 'run_tools_script',
      userId,
      arguments: { language, code, ...(timeoutMs !== undefined ? { timeoutMs } : {}) },
      allow: { functions: ['@code', 'calculate'] },
      trace: true,
      context: { workspaceId: 'sec' }
    }
  })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

async function setup (t: TestContext): Promise<{ app: FastifyInstance, url: string, workspaces: string }> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-code-sec-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS, SANDBOX: 'bwrap', WORKSPACES_DIR: workspaces } })
  return { app, url: await listenOnLoopback(app), workspaces }
}

test('attack: a script cannot open a network socket, not even to the gateway\'s own port (JavaScript and Python)', { skip, timeout: 60_000 }, async (t) => {
  const { app, url } = await setup(t)
  const port = new URL(url).port
  const js = await runScript(app, ACME, 'acme', 'javascript', `
const net = await import('node:net')
const tryConnect = (host) => new Promise((resolve) => {
  const s = net.connect(${port}, host)
  s.on('connect', () => { s.destroy(); resolve('connected') })
  s.on('error', (e) => resolve(e.code))
})
return { loopback: await tryConnect('127.0.0.1'), fetch: await fetch('${url}/healthz').then(() => 'fetched', (e) => e.cause?.code ?? e.message) }
`)
  assert.equal(js.isError, false, js.output)
  assert.deepEqual(JSON.parse(js.output), { loopback: 'ECONNREFUSED', fetch: 'ECONNREFUSED' })
  const py = await runScript(app, ACME, 'acme', 'python', `
import socket
try:
    socket.create_connection(('127.0.0.1', ${port}), timeout=2)
    result = 'connected'
except OSError as e:
    result = type(e).__name__
`)
  assert.equal(py.isError, false, py.output)
  assert.equal(py.output, 'ConnectionRefusedError', 'a string result is answered as it is')
})

test('attack: a script cannot see or reach another tenant\'s running script\'s socket, nor another call\'s token', { skip, timeout: 60_000 }, async (t) => {
  const { app, workspaces } = await setup(t)
  // globex's script writes where its call directory is into its own workspace, then waits.
  const victim = runScript(app, GLOBEX, 'globex', 'javascript', `
const fs = await import('node:fs')
fs.writeFileSync('where.txt', process.argv[2])
await new Promise((resolve) => setTimeout(resolve, 4000))
return await tools.calculate({ expression: '1+1' })
`)
  const whereFile = join(workspaces, 'globex', 'sec', 'where.txt')
  await waitUntil('globex\'s script started', async () => (await readFile(whereFile, 'utf8').catch(() => '')) !== '', 20_000)
  const victimDir = await readFile(whereFile, 'utf8')
  const attack = await runScript(app, ACME, 'acme', 'javascript', `
const fs = await import('node:fs')
const path = await import('node:path')
const net = await import('node:net')
const mine = process.argv[2]
const seen = { parentListing: fs.readdirSync(path.dirname(mine)), mine: path.basename(mine) }
seen.victimDir = fs.existsSync(${JSON.stringify(victimDir)})
seen.connect = await new Promise((resolve) => {
  const s = net.connect(${JSON.stringify(join(victimDir, 'tools.sock'))})
  s.on('connect', () => { s.destroy(); resolve('connected') })
  s.on('error', (e) => resolve(e.code))
})
seen.ownToken = (() => { try { return fs.readFileSync(path.join(mine, 'token'), 'utf8').length } catch (e) { return e.code } })()
return seen
`)
  assert.equal(attack.isError, false, attack.output)
  const seen = JSON.parse(attack.output)
  assert.deepEqual(seen.parentListing, [seen.mine], 'only its own call directory')
  assert.equal(seen.victimDir, false)
  assert.equal(seen.connect, 'ENOENT')
  assert.equal(seen.ownToken, 43, 'its own token it can read (32 bytes, base64url)')
  const v = await victim
  assert.equal(v.isError, false, v.output)
  assert.equal(JSON.parse(v.output).result, 2, 'the victim\'s script was not disturbed')
})

test('attack: no process of a script outlives its deadline, detached children included', { skip, timeout: 60_000 }, async (t) => {
  const { app, workspaces } = await setup(t)
  const r = await runScript(app, ACME, 'acme', 'javascript', `
const { spawn } = await import('node:child_process')
spawn('sh', ['-c', 'sleep 300'], { detached: true, stdio: 'ignore' }).unref()
spawn('sh', ['-c', 'while :; do :; done'], { detached: true, stdio: 'ignore' }).unref()
console.log('started')
await new Promise(() => {})
`, 1500)
  assert.equal(r.isError, true)
  assert.equal(r.error.code, 'GW_TOOL_TIMEOUT')
  assert.match(r.error.message, /deadline of 1500 ms/)
  assert.match(r.error.message, /started/)
  const uid = statSync(join(workspaces, 'acme', 'sec')).uid
  assert.notEqual(uid, 0)
  await waitUntil('no process of acme\'s uid is left', async () => (await allProcesses()).every((p) => p.uid !== uid), 10_000)
})
