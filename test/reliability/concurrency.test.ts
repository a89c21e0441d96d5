/**
 * Concurrency through the HTTP API, end to end through the gateway's routes (the
 * store, the pool and the built-in source have their own lower-level tests):
 * - 50 concurrent PUTs of one tenant server (plus 20 of other servers of that tenant): every
 *   write gets its own version, the versions are consecutive, the one with the highest version is
 *   what stays, and another tenant whose userId extends this one is untouched;
 * - 100 concurrent first calls to a cold streamable-HTTP server (through /invoke and
 *   /invoke/batch): one MCP session, every call answered; two tenants registering the same URL at
 *   once get one session each (clients are keyed by tenant and server, never shared);
 * - concurrent edit, apply_patch, write_file append and bash writes to one file, in batches and
 *   single invokes at once: serialised per workspace, no lost update, no reader ever sees a
 *   partial file; two tenants editing the same relative path do not interfere.
 * The registry tests run on both backends (memory, and Redis when reachable; under CI=true a
 * missing Redis fails). Counts and contents are asserted, never durations.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { Redis } from 'ioredis'
import { startStreamableHttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'
import type { HttpFixture } from '../../scripts/lib/mcp-fixtures/index.js'
import { buildTestApp } from '../helpers/app.js'
import { REDIS_URL, redisForTest } from '../helpers/redis.js'

const TIMEOUT = { timeout: 60_000 }
const BACKENDS = ['memory', 'redis'] as const
type Backend = typeof BACKENDS[number]

/**
 * Limits opened wide (the bursts below are the point, not the rate limiter), loopback allowed
 * for tenant servers, generous MCP deadlines so a loaded machine never turns a slow first
 * listing into a failure. Secrets encrypted, as in production.
 */
const ENV = {
  LOAD_EXAMPLES: 'false',
  EGRESS_ALLOW: '127.0.0.1/32',
  RATE_LIMIT_PER_MINUTE: '100000',
  MAX_CONCURRENT_PER_TENANT: '1000',
  MCP_CONNECT_TIMEOUT_MS: '20000',
  MCP_LIST_TIMEOUT_MS: '20000',
  MCP_CALL_TIMEOUT_MS: '20000',
  SECRETS_KEY: Buffer.alloc(32, 7).toString('base64')
}

interface Gateway {
  app: FastifyInstance
  /** The Redis client and key prefix of the Redis backend (undefined for memory). */
  redis?: { client: Redis, prefix: string }
}

/** The app on the given registry backend; undefined when the test was skipped (no Redis outside CI). */
async function gateway (t: TestContext, backend: Backend, env: Record<string, string> = {}): Promise<Gateway | undefined> {
  if (backend === 'memory') return { app: await buildTestApp(t, { env: { ...ENV, ...env } }) }
  const r = await redisForTest(t)
  if (r === undefined) return undefined
  const app = await buildTestApp(t, { env: { ...ENV, REDIS_URL, REDIS_KEY_PREFIX: r.prefix, ...env } })
  return { app, redis: { client: r.redis, prefix: r.prefix } }
}

async function fixture (t: TestContext, marker: string): Promise<HttpFixture> {
  const fx = await startStreamableHttpFixture({ marker })
  t.after(async () => await fx.close())
  return fx
}

function putServer (app: FastifyInstance, userId: string, serverId: string, config: Record<string, unknown>): Promise<LightMyRequestResponse> {
  return app.inject({ method: 'PUT', url: `/users/${userId}/mcp/servers/${serverId}`, payload: config })
}

async function listServers (app: FastifyInstance, userId: string): Promise<Array<{ serverId: string, config: Record<string, unknown> }>> {
  const res = await app.inject({ method: 'GET', url: `/users/${userId}/mcp/servers` })
  assert.equal(res.statusCode, 200, res.body)
  return res.json().servers
}

/** A distinct config per write: the URL and description name the write, the header is a secret. */
function config (tag: string, i: number): { type: string, url: string, description: string, headers: Record<string, string> } {
  return { type: 'http', url: `http://127.0.0.1:9/${tag}/w${i}`, description: `${tag} write ${i}`, headers: { 'x-write': `secret-${tag}-${i}` } }
}

for (const backend of BACKENDS) {
  test(`${backend}: 50 concurrent PUTs of one tenant server: one version per write, consecutive, the highest wins, the other tenant untouched`, TIMEOUT, async (t) => {
    const gw = await gateway(t, backend)
    if (gw === undefined) return
    const { app } = gw
    // `u-2` extends `u`: a prefix-matched key would mix the two.
    for (const [serverId, version] of [['same', 1], ['keep', 2]] as const) {
      const res = await putServer(app, 'u-2', serverId, config(`u-2-${serverId}`, 0))
      assert.equal(res.statusCode, 201, res.body)
      assert.equal(res.json().version, version)
    }

    // Interleaved, so the writes to the other servers race with the ones to `same`.
    const writes: Array<{ serverId: string, config: ReturnType<typeof config> }> = []
    let others = 0
    for (let i = 0; i < 50; i++) {
      writes.push({ serverId: 'same', config: config('same', i) })
      if (i % 5 < 2) writes.push({ serverId: `s${others++}`, config: config('other', i) })
    }
    assert.equal(others, 20)
    const responses = await Promise.all(writes.map(async (w) => await putServer(app, 'u', w.serverId, w.config)))

    const results = responses.map((res, i) => {
      assert.ok(res.statusCode === 200 || res.statusCode === 201, `PUT ${i}: ${res.statusCode} ${res.body}`)
      const body = res.json()
      assert.ok(Number.isInteger(body.version), res.body)
      assert.equal(body.created, res.statusCode === 201)
      return { ...(writes[i] as typeof writes[number]), version: body.version as number, created: body.created as boolean }
    })
    assert.deepEqual(results.map((r) => r.version).sort((a, b) => a - b), Array.from({ length: 70 }, (_, i) => i + 1),
      'the 70 writes got exactly the versions 1..70')
    const same = results.filter((r) => r.serverId === 'same')
    assert.equal(same.filter((r) => r.created).length, 1, 'exactly one write to `same` created it')
    assert.ok(results.filter((r) => r.serverId !== 'same').every((r) => r.created), 'each other server was created by its only write')
    const winner = same.reduce((a, b) => (b.version > a.version ? b : a))

    const servers = await listServers(app, 'u')
    assert.deepEqual(servers.map((s) => s.serverId), ['same', ...Array.from({ length: 20 }, (_, i) => `s${i}`)].sort())
    const stored = servers.find((s) => s.serverId === 'same')
    // The URL and the description of one and the same write (headers are masked on read).
    assert.equal(stored?.config.url, winner.config.url, `the stored config is the write with the highest version (${winner.version})`)
    assert.equal(stored?.config.description, winner.config.description)
    assert.ok(!JSON.stringify(servers).includes('secret-'), 'header values are masked')
    for (const r of results.filter((x) => x.serverId !== 'same')) {
      assert.equal(servers.find((s) => s.serverId === r.serverId)?.config.url, r.config.url)
    }

    // The scope's counter counted every write: the next change is number 71.
    const del = await app.inject({ method: 'DELETE', url: '/users/u/mcp/servers/s0' })
    assert.equal(del.statusCode, 200, del.body)
    assert.equal(del.json().version, 71)

    // The other tenant: same servers, same configs, its counter still at 2.
    const other = await listServers(app, 'u-2')
    assert.deepEqual(other.map((s) => [s.serverId, s.config.url, s.config.description]), [
      ['keep', config('u-2-keep', 0).url, config('u-2-keep', 0).description],
      ['same', config('u-2-same', 0).url, config('u-2-same', 0).description]
    ])
    const probe = await putServer(app, 'u-2', 'probe', config('probe', 0))
    assert.equal(probe.json().version, 3)

    if (gw.redis !== undefined) {
      const { client, prefix } = gw.redis
      assert.equal(await client.get(`${prefix}{reg:u:u}:ver`), '71')
      assert.equal(await client.get(`${prefix}{reg:u:u-2}:ver`), '3')
      assert.equal(await client.hlen(`${prefix}{reg:u:u}:srv`), 20)
    }
  })

  test(`${backend}: 100 concurrent first calls to a cold tenant server (invoke and batch) share one connect`, TIMEOUT, async (t) => {
    const fx = await fixture(t, 'cold')
    const gw = await gateway(t, backend, { BATCH_CONCURRENCY: '10' })
    if (gw === undefined) return
    const { app } = gw
    const reg = await putServer(app, 'u', 'cold', { type: 'http', url: fx.url })
    assert.equal(reg.statusCode, 201, reg.body)
    assert.equal(fx.stats.sessions, 0, 'registering does not connect: the server is cold')

    const call = (text: string): Record<string, unknown> => ({ name: 'user_u_tool_echo', userId: 'u', callId: text, arguments: { text } })
    const singles = Array.from({ length: 60 }, (_, i) => `single-${i}`)
    const batches = Array.from({ length: 4 }, (_, b) => Array.from({ length: 10 }, (_, k) => `batch-${b}-${k}`))
    const [singleRes, batchRes] = await Promise.all([
      Promise.all(singles.map(async (text) => await app.inject({ method: 'POST', url: '/invoke', payload: call(text) }))),
      Promise.all(batches.map(async (texts) => await app.inject({ method: 'POST', url: '/invoke/batch', payload: { calls: texts.map(call) } })))
    ])

    const answered: Array<{ text: string, r: any }> = []
    singleRes.forEach((res, i) => {
      assert.equal(res.statusCode, 200, res.body)
      answered.push({ text: singles[i] as string, r: res.json() })
    })
    batchRes.forEach((res, b) => {
      assert.equal(res.statusCode, 200, res.body)
      const { results } = res.json()
      assert.equal(results.length, 10)
      results.forEach((r: unknown, k: number) => answered.push({ text: batches[b]?.[k] as string, r }))
    })
    assert.equal(answered.length, 100)
    for (const { text, r } of answered) {
      assert.equal(r.isError, false, JSON.stringify(r))
      assert.equal(r.route, 'user_mcp')
      assert.equal(r.callId, text)
      assert.equal(r.output, `cold:${text}`)
    }
    assert.equal(fx.stats.sessions, 1, 'exactly one MCP session was initialised for 100 first calls')
    assert.equal(fx.stats.toolCalls, 100)

    const status = (await app.inject({ method: 'GET', url: '/status' })).json()
    assert.equal(status.userClients, 1)
    assert.deepEqual(Object.keys(status.clients), ['user_u_service_cold'])
    assert.equal(status.clients.user_u_service_cold.connected, true)
  })

  test(`${backend}: two tenants registering the same URL at once get a client each, never a shared one`, TIMEOUT, async (t) => {
    const fx = await fixture(t, 'shared')
    const gw = await gateway(t, backend)
    if (gw === undefined) return
    const { app } = gw
    const tenants = ['u', 'u-2']
    const regs = await Promise.all(tenants.map(async (u) => await putServer(app, u, 'shared', { type: 'http', url: fx.url })))
    for (const res of regs) assert.equal(res.statusCode, 201, res.body)

    const calls = Array.from({ length: 100 }, (_, i) => ({ userId: tenants[i % 2] as string, text: `call-${i}` }))
    const responses = await Promise.all(calls.map(async ({ userId, text }) => await app.inject({
      method: 'POST', url: '/invoke', payload: { name: `user_${userId}_tool_echo`, userId, arguments: { text: `${userId}/${text}` } }
    })))
    responses.forEach((res, i) => {
      const { userId, text } = calls[i] as typeof calls[number]
      assert.equal(res.statusCode, 200, res.body)
      assert.equal(res.json().output, `shared:${userId}/${text}`)
    })
    assert.equal(fx.stats.sessions, 2, 'one session per tenant: same URL, same serverId, still two clients')
    assert.equal(fx.stats.toolCalls, 100)
    const status = (await app.inject({ method: 'GET', url: '/status' })).json()
    assert.equal(status.userClients, 2)
    assert.deepEqual(Object.keys(status.clients).sort(), ['user_u-2_service_shared', 'user_u_service_shared'])

    // And neither tenant can call through the other's name.
    const cross = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'user_u-2_tool_echo', userId: 'u', arguments: { text: 'x' } } })
    assert.equal(cross.statusCode, 403, cross.body)
    assert.equal(fx.stats.toolCalls, 100)
  })
}

// ---------------------------------------------------------------------------------------------
// Built-in tools: concurrent writers of one file. The registry backend plays no part here.

interface Invoke {
  name: string
  userId: string
  callId: string
  arguments: Record<string, unknown>
}

async function invokeOne (app: FastifyInstance, body: Invoke): Promise<any> {
  const res = await app.inject({ method: 'POST', url: '/invoke', payload: body })
  assert.equal(res.statusCode, 200, res.body)
  return res.json()
}

async function invokeBatch (app: FastifyInstance, calls: Invoke[]): Promise<any[]> {
  const res = await app.inject({ method: 'POST', url: '/invoke/batch', payload: { calls } })
  assert.equal(res.statusCode, 200, res.body)
  const { results } = res.json()
  assert.equal(results.length, calls.length)
  return results
}

async function readLines (app: FastifyInstance, userId: string, path: string): Promise<string[]> {
  const r = await invokeOne(app, { name: 'read_file', userId, callId: 'read', arguments: { path } })
  assert.equal(r.isError, false, r.output)
  const { content, truncated } = JSON.parse(r.output)
  assert.equal(truncated, false)
  return (content as string).split('\n').filter((l) => l !== '')
}

function updatePatch (path: string, from: string, to: string): string {
  return ['*** Begin Patch', `*** Update File: ${path}`, '@@', `-${from}`, `+${to}`, '*** End Patch'].join('\n')
}

function appendPatch (path: string, line: string): string {
  return ['*** Begin Patch', `*** Update File: ${path}`, '@@', `+${line}`, '*** End Patch'].join('\n')
}

test('concurrent edit, apply_patch, write_file append and bash writes to one file (batches and single invokes at once): ' +
  'no lost update, no partial read', TIMEOUT, async (t) => {
  const { app } = await gateway(t, 'memory', { BATCH_CONCURRENCY: '32' }) as Gateway
  const userId = 'ed'
  const F = 'shared.txt'
  const slots = {
    edit: Array.from({ length: 40 }, (_, i) => [`edit slot ${i}: TODO-${i}`, `edit slot ${i}: DONE-${i}`]),
    patch: Array.from({ length: 15 }, (_, i) => [`patch slot ${i}: old`, `patch slot ${i}: new`]),
    solo: Array.from({ length: 20 }, (_, i) => [`solo slot ${i}: SOLO-${i}`, `solo slot ${i}: solo-done-${i}`]),
    bash: Array.from({ length: 5 }, (_, i) => [`bash slot ${i}: BASH-${i}`, `bash slot ${i}: bash-done-${i}`])
  }
  const body = (state: 0 | 1): string[] => ['# shared file', ...Object.values(slots).flatMap((s) => s.map((pair) => pair[state] as string)), '# end of body']
  const created = await invokeOne(app, { name: 'write_file', userId, callId: 'init', arguments: { path: F, content: body(0).join('\n') + '\n' } })
  assert.equal(created.isError, false, created.output)

  const appendsA = Array.from({ length: 10 }, (_, i) => `append batch-a ${i}`)
  const appendsSingle = Array.from({ length: 10 }, (_, i) => `append single ${i}`)
  const appendsPatch = Array.from({ length: 5 }, (_, i) => `append patch ${i}`)
  const edit = (from: string, to: string, callId: string): Invoke => ({
    name: 'edit',
    userId,
    callId,
    arguments: { path: F, old_string: from, new_string: to }
  })
  const append = (line: string): Invoke => ({ name: 'write_file', userId, callId: line, arguments: { path: F, content: `${line}\n`, mode: 'append' } })
  const patch = (text: string, callId: string): Invoke => ({ name: 'apply_patch', userId, callId, arguments: { patch: text } })
  const read = (i: number): Invoke => ({ name: 'read_file', userId, callId: `read-${i}`, arguments: { path: F } })

  // Batch A: 40 edits, 10 in-place patches, 10 appends, interleaved. Batch B: 5 in-place
  // patches, 5 patches appending at the end, 5 `sed -i` rewrites (a temp file and a rename of
  // the whole file, like edit: an unserialised one would drop the others' changes), 10 reads.
  const batchA: Invoke[] = []
  slots.edit.forEach(([from, to], i) => {
    batchA.push(edit(from as string, to as string, `edit-${i}`))
    if (i % 4 === 0) batchA.push(patch(updatePatch(F, slots.patch[i / 4]?.[0] as string, slots.patch[i / 4]?.[1] as string), `patch-${i / 4}`))
    if (i % 4 === 2) batchA.push(append(appendsA[(i - 2) / 4] as string))
  })
  const batchB: Invoke[] = []
  for (let i = 0; i < 5; i++) {
    batchB.push(patch(updatePatch(F, slots.patch[10 + i]?.[0] as string, slots.patch[10 + i]?.[1] as string), `patch-${10 + i}`))
    batchB.push(patch(appendPatch(F, appendsPatch[i] as string), `patch-append-${i}`))
    batchB.push({ name: 'bash', userId, callId: `bash-${i}`, arguments: { action: 'exec', command: `sed -i 's/BASH-${i}$/bash-done-${i}/' ${F}` } })
    batchB.push(read(2 * i), read(2 * i + 1))
  }
  const singles = [
    ...slots.solo.map(([from, to], i) => edit(from as string, to as string, `solo-${i}`)),
    ...appendsSingle.map(append)
  ]

  const [resultsA, resultsB, singleResults] = await Promise.all([
    invokeBatch(app, batchA),
    invokeBatch(app, batchB),
    Promise.all(singles.map(async (call) => await invokeOne(app, call)))
  ])
  for (const r of [...resultsA, ...resultsB, ...singleResults]) {
    assert.equal(r.isError, false, `${r.callId}: ${r.output}`)
  }
  for (const r of resultsB.filter((x) => x.name === 'bash')) assert.equal(JSON.parse(r.output).exitCode, 0, r.output)

  // Every read saw a whole file: each body line in exactly one of its two states, appends whole.
  const bodyLines = new Set([...body(0), ...body(1)])
  const appended = new Set([...appendsA, ...appendsSingle, ...appendsPatch])
  for (const r of resultsB.filter((x) => x.name === 'read_file')) {
    const lines = (JSON.parse(r.output).content as string).split('\n').filter((l: string) => l !== '')
    assert.equal(lines.filter((l: string) => bodyLines.has(l)).length, body(0).length, `a read saw a partial body:\n${lines.join('\n')}`)
    assert.ok(lines.every((l: string) => bodyLines.has(l) || appended.has(l)), `a read saw a line no writer wrote:\n${lines.join('\n')}`)
  }

  // The final file: the body with every change applied, then every appended line once.
  const final = await readLines(app, userId, F)
  assert.deepEqual(final.slice(0, body(1).length), body(1))
  assert.deepEqual(final.slice(body(1).length).sort(), [...appended].sort())
})

test('two tenants batch-editing the same relative path at once: each workspace gets exactly its own changes', TIMEOUT, async (t) => {
  const { app } = await gateway(t, 'memory', { BATCH_CONCURRENCY: '32' }) as Gateway
  const tenants = ['x', 'x-2']
  const F = 'notes/same.txt'
  // The same tokens in both files: if the workspaces were one, half the edits would find nothing.
  const lines = Array.from({ length: 30 }, (_, i) => `line ${i}: TODO-${i}`)
  for (const userId of tenants) {
    const r = await invokeOne(app, { name: 'write_file', userId, callId: 'init', arguments: { path: F, content: lines.join('\n') + '\n' } })
    assert.equal(r.isError, false, r.output)
  }
  const batchFor = (userId: string): Invoke[] => lines.map((_, i) => i % 3 === 0
    ? { name: 'apply_patch', userId, callId: `${userId}-${i}`, arguments: { patch: updatePatch(F, `line ${i}: TODO-${i}`, `line ${i}: ${userId}-done-${i}`) } }
    : { name: 'edit', userId, callId: `${userId}-${i}`, arguments: { path: F, old_string: `line ${i}: TODO-${i}`, new_string: `line ${i}: ${userId}-done-${i}` } })
  const results = await Promise.all(tenants.map(async (u) => await invokeBatch(app, batchFor(u))))
  for (const r of results.flat()) assert.equal(r.isError, false, `${r.callId}: ${r.output}`)
  for (const userId of tenants) {
    assert.deepEqual(await readLines(app, userId, F), lines.map((_, i) => `line ${i}: ${userId}-done-${i}`))
  }
})
