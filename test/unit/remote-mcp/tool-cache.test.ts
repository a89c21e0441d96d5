import { test } from 'node:test'
import assert from 'node:assert/strict'
import { Client, InMemoryTransport, SdkError, SdkErrorCode } from '@modelcontextprotocol/client'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import type { ListToolsResult, Tool } from '@modelcontextprotocol/sdk/types.js'
import { listAllPages, MAX_LIST_PAGES, ToolListCache } from '../../../src/remote-mcp/tool-cache.js'
import { UpstreamError } from '../../../src/remote-mcp/errors.js'
import { ListRefusedError } from '../../../src/remote-mcp/list-bounds.js'
import { createPagedServer } from '../../../scripts/lib/mcp-fixtures/index.js'

const tool = (name: string): Tool => ({ name, inputSchema: { type: 'object' } })

/** A real SDK (v2) client, paging as the pool's do (connection.ts), over an in-memory pair to a (v1) `server`. */
async function connect (t: { after: (fn: () => Promise<void>) => void }, server: Server): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair()
  await server.connect(serverSide)
  const client = new Client({ name: 'test', version: '1.0.0' }, { listMaxPages: MAX_LIST_PAGES })
  await client.connect(clientSide)
  t.after(async () => { await client.close(); await server.close() })
  return client
}

/** A server whose tools/list answers with `page(cursor)`. */
function pagingServer (page: (cursor: string | undefined) => ListToolsResult): Server {
  const server = new Server({ name: 'pages', version: '1.0.0' }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async (request) => page(request.params?.cursor))
  return server
}

test('ToolListCache: nothing before the first refresh; fresh within the TTL; stale after it', async () => {
  const cache = new ToolListCache()
  assert.equal(cache.tools, undefined)
  assert.equal(cache.fresh(60_000), undefined)
  const list = [tool('a')]
  assert.equal(await cache.refresh(async () => list), list)
  assert.equal(cache.tools, list)
  assert.equal(cache.fresh(60_000), list)
  assert.equal(cache.fresh(0), undefined, 'a TTL of 0 is never fresh')
  assert.equal(cache.fresh(60_000, Date.now() + 60_000), undefined, 'stale once the TTL passed')
})

test('ToolListCache: list_changed makes the list stale, also when it arrives during the refresh', async () => {
  const cache = new ToolListCache()
  await cache.refresh(async () => [tool('a')])
  cache.changed()
  assert.equal(cache.fresh(60_000), undefined)
  assert.deepEqual(cache.tools?.map((x) => x.name), ['a'], 'the stale list is still there for callers that need one')
  // A change during a refresh: the list it fetched may predate the change.
  await cache.refresh(async () => { cache.changed(); return [tool('b')] })
  assert.deepEqual(cache.tools?.map((x) => x.name), ['b'])
  assert.equal(cache.fresh(60_000), undefined)
  await cache.refresh(async () => [tool('c')])
  assert.deepEqual(cache.fresh(60_000)?.map((x) => x.name), ['c'])
})

test('ToolListCache: one refresh at a time, shared by concurrent callers; the next call starts a new one', async () => {
  const cache = new ToolListCache()
  let loads = 0
  let finish: ((tools: Tool[]) => void) | undefined
  const load = async (): Promise<Tool[]> => {
    loads++
    return await new Promise<Tool[]>((resolve) => { finish = resolve })
  }
  const first = cache.refresh(load)
  const second = cache.refresh(load)
  assert.equal(first, second)
  assert.equal(loads, 1)
  finish?.([tool('a')])
  await first
  await cache.refresh(async () => { loads++; return [tool('b')] })
  assert.equal(loads, 2)
})

test('ToolListCache: a failed refresh keeps the previous list; one whose client closed meanwhile stores nothing', async () => {
  const cache = new ToolListCache()
  const good = [tool('a')]
  await cache.refresh(async () => good)
  await assert.rejects(cache.refresh(async () => { throw new Error('boom') }), /boom/)
  assert.equal(cache.tools, good)
  const late = await cache.refresh(async () => [tool('late')], () => false)
  assert.deepEqual(late.map((x) => x.name), ['late'], 'the caller still gets what was fetched')
  assert.equal(cache.tools, good)
})

test('ToolListCache: a list refused for a bound is remembered as a list is: within the TTL, until list_changed, while its reason stands', async () => {
  const cache = new ToolListCache()
  let stands = true
  const refused = new ListRefusedError('too many', () => stands)
  await assert.rejects(cache.refresh(async () => { throw refused }), /too many/)
  assert.equal(cache.refusal(60_000), refused)
  assert.equal(cache.refusal(60_000, Date.now() + 60_000), undefined, 'past the TTL it is asked again')
  stands = false
  assert.equal(cache.refusal(60_000), undefined, 'room was made: asked again')
  stands = true
  cache.changed()
  assert.equal(cache.refusal(60_000), undefined, 'the list changed: asked again')
  // Any other failure is not remembered, and a list that arrives ends the refusal.
  await assert.rejects(cache.refresh(async () => { throw refused }), /too many/)
  await assert.rejects(cache.refresh(async () => { throw new Error('boom') }), /boom/)
  assert.equal(cache.refusal(60_000), refused)
  await cache.refresh(async () => [tool('a')])
  assert.equal(cache.refusal(60_000), undefined)
  // A client closed during the refresh remembers nothing.
  await assert.rejects(cache.refresh(async () => { throw refused }, () => false), /too many/)
  assert.equal(cache.refusal(60_000), undefined)
})

test('listAllPages: every page of a real server, in order', async (t) => {
  const client = await connect(t, createPagedServer({ tools: 25, pageSize: 10 }))
  const tools = (await listAllPages(client, Date.now() + 10_000)).items
  assert.deepEqual(tools.map((x) => x.name), Array.from({ length: 25 }, (_, i) => `tool_${String(i).padStart(3, '0')}`))
})

test('listAllPages: a page that repeats its cursor and its tools ends the listing (the SDK\'s walk) instead of looping until the deadline', async (t) => {
  let served = 0
  const client = await connect(t, pagingServer((cursor) => { served++; return { tools: [tool(`t${cursor ?? 0}`)], nextCursor: 'x' } }))
  const tools = (await listAllPages(client, Date.now() + 10_000)).items
  assert.deepEqual(tools.map((x) => x.name), ['t0', 'tx'])
  assert.equal(served, 3)
})

test('listAllPages: more than MAX_LIST_PAGES pages is an error', async (t) => {
  let served = 0
  const client = await connect(t, pagingServer((cursor) => { served++; return { tools: [], nextCursor: String(Number(cursor ?? 0) + 1) } }))
  await assert.rejects(listAllPages(client, Date.now() + 60_000), (err: unknown) => {
    assert.ok(err instanceof UpstreamError)
    assert.equal(err.code, 'GW_UPSTREAM_ERROR')
    assert.match(err.message, new RegExp(`more than ${MAX_LIST_PAGES} tools/list pages`))
    return true
  })
  assert.equal(served, MAX_LIST_PAGES)
})

test('listAllPages: a deadline already past is the SDK\'s request timeout, without a request', async (t) => {
  let served = 0
  const client = await connect(t, pagingServer(() => { served++; return { tools: [] } }))
  await assert.rejects(listAllPages(client, Date.now() - 1), (err: unknown) => err instanceof SdkError && err.code === SdkErrorCode.RequestTimeout)
  assert.equal(served, 0)
})
