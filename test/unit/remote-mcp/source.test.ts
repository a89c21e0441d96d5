/**
 * RemoteMcpSource's catalog token: the same object while nothing the scope offers changed, also
 * after the name index's reuse window (INDEX_TTL_MS) when the pool answers with the same lists,
 * with and without disabled tools; a new one when a server's list or its disabled names change.
 * Listings (GET /tools, /mcp) are cached against it: a new token re-polices and re-serialises them.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import { RemoteMcpSource } from '../../../src/remote-mcp/source.js'
import type { McpConnector, RemoteServer } from '../../../src/remote-mcp/source.js'

const tool = (name: string): Tool => ({ name, inputSchema: { type: 'object' } })

test('the catalog token stays the same across index rebuilds while the lists and the disabled names do not change', async (t) => {
  t.mock.timers.enable({ apis: ['Date'], now: 1_000_000 })
  // Like the pool: the very same array while the list is cached.
  const lists = new Map<string, Tool[]>([['a', [tool('one'), tool('two')]], ['b', [tool('three'), tool('four')]]])
  let servers: RemoteServer[] = [
    { serverId: 'a', config: {} },
    { serverId: 'b', config: { disabledTools: ['four'] } }
  ]
  const connector: McpConnector = {
    listTools: async (_key, server) => lists.get(server.serverId) ?? [],
    callTool: async () => { throw new Error('not called') }
  }
  const source = new RemoteMcpSource('global_mcp', { list: async () => servers }, connector, { listDeadlineMs: 5000, callTimeoutMs: 5000 })
  const scope = { userId: undefined, signal: new AbortController().signal }

  const first = await source.catalogToken(scope)
  assert.notEqual(first, undefined)
  const listed = await source.list('all', scope)
  assert.deepEqual(listed.tools.map((e) => e.spec.name).sort(), ['one', 'three', 'two'], 'the disabled tool is not listed')
  t.mock.timers.tick(5_000)
  assert.equal(await source.catalogToken(scope), first, 'unchanged lists after the reuse window: the same token')

  // The disabled names change (same registry snapshot object is not required: a new config is a new snapshot).
  servers = [servers[0] as RemoteServer, { serverId: 'b', config: { disabledTools: ['three'] } }]
  const second = await source.catalogToken(scope)
  assert.notEqual(second, first, 'a registry change is a new token')
  assert.deepEqual((await source.list('all', scope)).tools.map((e) => e.spec.name).sort(), ['four', 'one', 'two'])
  t.mock.timers.tick(5_000)
  assert.equal(await source.catalogToken(scope), second)

  // A server's tool list changes (the pool answers with a new array): a new token at the next rebuild.
  lists.set('a', [tool('one')])
  t.mock.timers.tick(5_000)
  const third = await source.catalogToken(scope)
  assert.notEqual(third, second)
  assert.deepEqual((await source.list('all', scope)).tools.map((e) => e.spec.name).sort(), ['four', 'one'])
})

test('a listed tool keeps its catalog entry (and spec) across listings while its list and its server are the same; a tenant\'s are its own', async () => {
  const lists = new Map<string, Tool[]>([['a', [tool('one'), tool('two')]]])
  let servers: RemoteServer[] = [{ serverId: 'a', config: {} }]
  const connector: McpConnector = {
    listTools: async (key, server) => lists.get(`${key}|${server.serverId}`) ?? lists.get(server.serverId) ?? [],
    callTool: async () => { throw new Error('not called') }
  }
  const source = new RemoteMcpSource('user_mcp', { list: async () => servers }, connector, { listDeadlineMs: 5000, callTimeoutMs: 5000 })
  const acme = { userId: 'acme', signal: new AbortController().signal }
  const first = (await source.list('all', acme)).tools
  const again = (await source.list('all', acme)).tools
  assert.equal(again.length, 2)
  again.forEach((entry, i) => { assert.equal(entry, first[i], 'the same entry object: its definition digest and renderings are kept per spec') })
  // Another tenant listing the very same tool objects (no pool does: the check holds whatever it does) gets its own entries.
  const globex = (await source.list('all', { userId: 'globex', signal: acme.signal })).tools
  assert.notEqual(globex[0], first[0])
  assert.equal(globex[0]?.name, 'user_globex_tool_one')
  assert.equal((await source.list('all', acme)).tools[0]?.name, 'user_acme_tool_one')
  // A new registry snapshot (the server's config read again) makes new entries; so does a new list.
  servers = [{ serverId: 'a', config: { priority: 3 } }]
  const moved = (await source.list('all', acme)).tools
  assert.notEqual(moved[0], first[0])
  assert.equal(moved[0]?.priority, 3)
  lists.set('a', [tool('one'), tool('two')])
  assert.notEqual((await source.list('all', acme)).tools[0], moved[0])
})
