/**
 * A remote server's own tool-list change reaches the gateway's /mcp clients in both eras: the
 * upstream speaks only 2026-07-28, so the gateway hears of it on the `subscriptions/listen`
 * stream it keeps per connection; a 2026-07-28 client on /mcp hears it on its own listen
 * stream, a legacy client on its GET stream, and both then list the new tool. An announcement
 * that changes nothing the listing shows is carried too (the periodic comparison of listings
 * would never send it): the server said so, its clients re-list. The gateway listens upstream only
 * while an /mcp stream watches a listing that names the server (a listen costs the server a
 * request held open): a plain listing opens none.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { buildApp } from '../../../src/app.js'
import { loadConfig } from '../../../src/config.js'
import { startModernFixture } from '../../../scripts/lib/mcp-fixtures/modern-server.js'
import { TEST_QUOTA } from '../../helpers/app.js'

/** Resolves when `ready` does, or fails after `ms` (a bound against a hang, not a timing assertion). */
async function within<T> (ready: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error(`no ${what} within ${ms} ms`)), ms) })
  try {
    return await Promise.race([ready, timeout])
  } finally {
    clearTimeout(timer)
  }
}

test('an upstream 2026-07-28 server\'s list change reaches /mcp clients of both eras; the gateway keeps one listen stream upstream', async (t) => {
  const upstream = await startModernFixture({ marker: 'up' })
  const dir = await mkdtemp(join(tmpdir(), 'tg-list-changed-'))
  const config = loadConfig({ SANDBOX: 'none', ...TEST_QUOTA, LOG_LEVEL: 'silent', WORKSPACES_DIR: dir, EGRESS_ALLOW: '127.0.0.1/32' })
  const app = await buildApp(config, { logger: false })
  const clients: Array<{ close: () => Promise<void> }> = []
  t.after(async () => {
    for (const c of clients) await c.close()
    await app.close()
    await upstream.close()
    await rm(dir, { recursive: true, force: true })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  assert.ok(address !== null && typeof address === 'object')
  const url = new URL(`http://127.0.0.1:${address.port}/mcp?mcp=up`)
  assert.equal((await app.inject({ method: 'PUT', url: '/mcp/servers/up', payload: { type: 'streamable_http', url: upstream.url } })).statusCode, 201)

  // A listing alone connects to the server but does not listen.
  assert.equal((await app.inject({ method: 'GET', url: '/tools?mcp=up' })).statusCode, 200)
  assert.equal(upstream.requests.get('tools/list'), 1)
  assert.equal(upstream.requests.get('subscriptions/listen'), undefined, 'no listen without a watcher')

  const modern = new Client({ name: 'v2', version: '1' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } })
  await modern.connect(new StreamableHTTPClientTransport(url))
  clients.push(modern)
  const heard = { modern: 0, legacy: 0 }
  let modernHeard!: () => void
  let modernNotified = new Promise<void>((resolve) => { modernHeard = resolve })
  modern.setNotificationHandler('notifications/tools/list_changed', async () => { heard.modern++; modernHeard() })
  await modern.listen({ toolsListChanged: true })

  const legacy = new LegacyClient({ name: 'v1', version: '1' })
  let legacyHeard!: () => void
  let legacyNotified = new Promise<void>((resolve) => { legacyHeard = resolve })
  legacy.setNotificationHandler(ToolListChangedNotificationSchema, async () => { heard.legacy++; legacyHeard() })
  let streamOpen!: () => void
  const opened = new Promise<void>((resolve) => { streamOpen = resolve })
  await legacy.connect(new LegacyTransport(url, {
    fetch: async (u, init) => {
      const res = await fetch(u, init)
      if (init?.method === 'GET' && res.status === 200) streamOpen()
      return res
    }
  }))
  clients.push(legacy)
  await within(opened, 10_000, 'GET notification stream')

  const before = (await modern.listTools()).tools.map((x) => x.name)
  assert.deepEqual(before, ['echo'])
  // Two /mcp streams watch the listing: the upstream connection listens once.
  const listened = async (): Promise<void> => {
    while (upstream.requests.get('subscriptions/listen') === undefined) await new Promise((resolve) => setTimeout(resolve, 20))
  }
  await within(listened(), 10_000, 'an upstream subscriptions/listen once the listing is watched')
  assert.equal(upstream.requests.get('subscriptions/listen'), 1, 'the gateway listens upstream once per connection')

  const name = upstream.addTool()
  await within(modernNotified, 10_000, 'list_changed on the 2026-07-28 listen stream')
  await within(legacyNotified, 10_000, 'list_changed on the legacy GET stream')
  assert.deepEqual((await modern.listTools()).tools.map((x) => x.name), ['echo', name])
  assert.deepEqual((await legacy.listTools()).tools.map((x) => x.name), ['echo', name])
  assert.equal(upstream.requests.get('subscriptions/listen'), 1)

  // Nothing changes, the server says it did: carried all the same.
  const seen = { ...heard }
  modernNotified = new Promise<void>((resolve) => { modernHeard = resolve })
  legacyNotified = new Promise<void>((resolve) => { legacyHeard = resolve })
  upstream.announce()
  await within(modernNotified, 10_000, 'a second list_changed on the listen stream')
  await within(legacyNotified, 10_000, 'a second list_changed on the GET stream')
  assert.ok(heard.modern > seen.modern && heard.legacy > seen.legacy)
  assert.deepEqual((await modern.listTools()).tools.map((x) => x.name), ['echo', name])
})
