/**
 * Search mode at /mcp (SPEC 17, README "Tool search"): `/mcp?...&mode=search` lists
 * `tool_search` (and the pinned tools); what a search finds joins that client's listing and is
 * announced with notifications/tools/list_changed, in both eras: a legacy client (SDK v1) on its
 * GET stream, a 2026-07-28 client (SDK v2) on subscriptions/listen. The working set belongs to the
 * API key, tenant and URL: another key of the same tenant, or another tenant, never sees it.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { TestContext } from 'node:test'
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import { Client as LegacyClient } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport as LegacyTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { startStreamableHttpFixture } from '../../../scripts/lib/mcp-fixtures/index.js'
import { buildTestApp, listenOnLoopback } from '../../helpers/app.js'
import { MODERN } from '../../helpers/mcp-raw.js'
import { FILES, TRACKER, toolServer } from '../../helpers/search-tools.js'

const ACME = 'k-acme-mcp-search-01'
const ACME_OTHER = 'k-acme-mcp-search-02'
const GLOBEX = 'k-globex-mcp-search-1'
const QUERY = 'mcp=tracker,files&userId=acme&mode=search&pinned=search_issues'

interface Started {
  base: string
  put: (key: string, path: string, body: unknown) => Promise<number>
  legacy: (key: string, query: string, onListChanged: () => void) => Promise<LegacyClient>
  modern: (key: string, query: string) => Promise<Client>
}

async function start (t: TestContext): Promise<Started> {
  const app = await buildTestApp(t, { env: { EGRESS_ALLOW: '127.0.0.1/32', API_KEYS: `${ACME}:acme,${ACME_OTHER}:acme,${GLOBEX}:globex` } })
  // The app closes first (buildTestApp's hook came first) and ends the clients' streams; the clients close after.
  const closers: Array<() => Promise<void>> = []
  t.after(async () => { for (const close of closers.reverse()) await close() })
  const base = await listenOnLoopback(app)
  const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
  return {
    base,
    async put (key, path, body) {
      const res = await fetch(base + path, { method: 'PUT', headers: { ...auth(key), 'content-type': 'application/json' }, body: JSON.stringify(body) })
      await res.text()
      return res.status
    },
    async legacy (key, query, onListChanged) {
      const client = new LegacyClient({ name: 'search-v1', version: '1.0.0' })
      client.setNotificationHandler(ToolListChangedNotificationSchema, async () => { onListChanged() })
      await client.connect(new LegacyTransport(new URL(`${base}/mcp?${query}`), { requestInit: { headers: auth(key) } }))
      closers.push(async () => { await client.close() })
      return client
    },
    async modern (key, query) {
      const client = new Client({ name: 'search-v2', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/mcp?${query}`), { requestInit: { headers: auth(key) } }))
      closers.push(async () => { await client.close() })
      return client
    }
  }
}

async function servers (t: TestContext, gw: Started): Promise<void> {
  for (const [id, tools] of [['tracker', TRACKER], ['files', FILES]] as const) {
    const fixture = await startStreamableHttpFixture({ factory: toolServer(tools) })
    t.after(async () => await fixture.close())
    assert.equal(await gw.put(ACME, `/users/acme/mcp/servers/${id}`, { type: 'streamable_http', url: fixture.url }), 201)
    assert.equal(await gw.put(GLOBEX, `/users/globex/mcp/servers/${id}`, { type: 'streamable_http', url: fixture.url }), 201)
  }
}

/** Resolves on the next notification, or fails the test after 20 s. */
function nextChange (): { wait: () => Promise<void>, notify: () => void } {
  let settle!: () => void
  let promise = new Promise<void>((resolve) => { settle = resolve })
  return {
    notify: () => settle(),
    wait: async () => {
      let timer: NodeJS.Timeout | undefined
      const deadline = new Promise<never>((_resolve, reject) => { timer = setTimeout(() => reject(new Error('no list_changed within 20 s')), 20_000) })
      try {
        await Promise.race([promise, deadline])
      } finally {
        clearTimeout(timer)
        promise = new Promise<void>((resolve) => { settle = resolve })
      }
    }
  }
}

const textOf = (result: unknown): string => {
  const content = (result as { content: unknown }).content as Array<{ type: string, text?: string }>
  assert.equal(content[0]?.type, 'text')
  return content[0]?.text ?? ''
}
const foundName = (text: string): string => {
  const name = /^## (\S+)/m.exec(text)?.[1]
  assert.ok(name !== undefined, text)
  return name
}

test('legacy /mcp in search mode: tool_search, then the found tool joins the listing with list_changed and is called by name', async (t) => {
  const gw = await start(t)
  await servers(t, gw)
  const change = nextChange()
  const client = await gw.legacy(ACME, QUERY, change.notify)
  let listed = (await client.listTools()).tools.map((x) => x.name)
  assert.deepEqual(listed, ['tool_search', 'user_acme_tool_search_issues'])
  // The GET stream is open once the SDK client has listed (it opens it after initialize).
  await new Promise((resolve) => setTimeout(resolve, 200))

  const result = await client.callTool({ name: 'tool_search', arguments: { query: 'list the entries of a directory', limit: 1 } })
  const found = foundName(textOf(result))
  assert.equal(found, 'user_acme_tool_list_directory')
  await change.wait()
  listed = (await client.listTools()).tools.map((x) => x.name)
  assert.deepEqual(listed, ['tool_search', 'user_acme_tool_search_issues', found])
  const call = await client.callTool({ name: found, arguments: { path: '/srv' } })
  assert.equal(textOf(call), 'ran list_directory {"path":"/srv"}')

  // Another key of the same tenant, and another tenant, list only what they found themselves.
  const other = await gw.legacy(ACME_OTHER, QUERY, () => {})
  assert.deepEqual((await other.listTools()).tools.map((x) => x.name), ['tool_search', 'user_acme_tool_search_issues'])
  const globex = await gw.legacy(GLOBEX, QUERY.replace('acme', 'globex'), () => {})
  assert.deepEqual((await globex.listTools()).tools.map((x) => x.name), ['tool_search', 'user_globex_tool_search_issues'])
  // Without mode=search the same URL lists everything, as always.
  const all = await gw.legacy(ACME, 'mcp=tracker,files&userId=acme', () => {})
  assert.equal((await all.listTools()).tools.length, TRACKER.length + FILES.length)
})

test('2026-07-28 /mcp in search mode: the found tool is announced on subscriptions/listen and listed', async (t) => {
  const gw = await start(t)
  await servers(t, gw)
  const client = await gw.modern(ACME, QUERY)
  const change = nextChange()
  client.setNotificationHandler('notifications/tools/list_changed', async () => { change.notify() })
  const subscription = await client.listen({ toolsListChanged: true })
  assert.deepEqual((await client.listTools()).tools.map((x) => x.name), ['tool_search', 'user_acme_tool_search_issues'])

  const result = await client.callTool({ name: 'tool_search', arguments: { query: 'move a file to another directory', limit: 1 } })
  const found = foundName(textOf(result))
  assert.equal(found, 'user_acme_tool_move_file')
  await change.wait()
  assert.deepEqual((await client.listTools()).tools.map((x) => x.name), ['tool_search', 'user_acme_tool_search_issues', found])
  const call = await client.callTool({ name: found, arguments: { source: 'a', destination: 'b' } })
  assert.equal(textOf(call), 'ran move_file {"source":"a","destination":"b"}')
  await subscription.close()

  // A search that finds nothing new changes nothing; the modern client sees the same working set on a new connection.
  const again = await gw.modern(ACME, QUERY)
  assert.deepEqual((await again.listTools()).tools.map((x) => x.name), ['tool_search', 'user_acme_tool_search_issues', found])
})
