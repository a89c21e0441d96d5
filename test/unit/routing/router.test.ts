import { test } from 'node:test'
import assert from 'node:assert/strict'
import { FunctionSource } from '../../../src/functions/source.js'
import type { FunctionTool } from '../../../src/functions/define.js'
import { encodeUserToolName, qualifiedName } from '../../../src/naming/names.js'
import { ToolRouter } from '../../../src/routing/router.js'
import type { AllowList } from '../../../src/routing/allow-list.js'
import type { InvokeOutcome, InvokeResult } from '../../../src/routing/router.js'
import type { CatalogEntry, Selection, SourceListing, SourceScope, ToolSource } from '../../../src/routing/source.js'
import type { CallContext, Tier, ToolOutcome } from '../../../src/routing/types.js'

/**
 * The router on its own, without the HTTP app (test/http/priority.test.ts covers the same rules
 * through /invoke and /tools with the real sources behind them).
 *
 * ToolSource is the router's only seam: it never looks inside a source. So tiers 1, 2, 3 and 5
 * here are small hand-written sources that keep the interface's contract (natural, qualified and
 * raw tool names resolve; a tenant's tools only for that tenant; a selection's matched ids) and
 * record what they were asked, and tier 4 is the real FunctionSource with functions defined here.
 */

/** One tool of a hand-written source: `server` for the MCP tiers, `userId` for tier 2. */
interface Row { tool: string, server?: string, userId?: string }

class TableSource implements ToolSource {
  readonly resolved: string[] = []
  readonly called: string[] = []
  constructor (readonly tier: Tier, private readonly rows: Row[]) {}

  #entries (scope: SourceScope): CatalogEntry[] {
    return this.rows
      .filter((r) => r.userId === undefined || r.userId === scope.userId)
      .map((r) => ({
        route: this.tier,
        source: r.server ?? (this.tier === 'builtin' ? 'builtin' : r.tool),
        name: r.userId !== undefined ? encodeUserToolName(r.userId, r.tool) : r.tool,
        ...(r.server !== undefined ? { qualifiedName: qualifiedName(r.server, r.tool) } : {}),
        spec: { name: r.tool, description: `${this.tier} ${r.tool}`, inputSchema: { type: 'object' } }
      }))
  }

  async list (selection: Selection | 'all', scope: SourceScope): Promise<SourceListing> {
    const all = this.#entries(scope)
    if (selection === 'all') return { tools: all, matched: [], unavailable: [] }
    const names = selection.names ?? []
    const ids = selection.serverIds ?? []
    const tools = all.filter((e) => names.includes(e.name) || (e.qualifiedName !== undefined && ids.includes(e.source)))
    const matched = [...names.filter((n) => tools.some((e) => e.name === n)), ...ids.filter((id) => tools.some((e) => e.source === id))]
    return { tools, matched, unavailable: [] }
  }

  async resolve (name: string, scope: SourceScope): Promise<CatalogEntry | undefined> {
    this.resolved.push(name)
    const all = this.#entries(scope)
    return all.find((e) => e.name === name || e.qualifiedName === name) ?? all.find((e) => e.spec.name === name)
  }

  async call (entry: CatalogEntry): Promise<ToolOutcome> {
    this.called.push(entry.spec.name)
    return { ok: true, value: `${this.tier}:${entry.source}:${entry.spec.name}` }
  }
}

/** Names collide across tiers on purpose (see each test). */
function setup (): { router: ToolRouter, sources: Record<Exclude<Tier, 'function'>, TableSource>, fnCalls: string[] } {
  const fnCalls: string[] = []
  const fn = (name: string): { tool: FunctionTool, file: string } => ({
    file: `${name}.ts`,
    tool: {
      name,
      description: `function ${name}`,
      parameters: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: false },
      handler: (args) => { fnCalls.push(name); return `function:${name}:${JSON.stringify(args)}` }
    }
  })
  const sources = {
    builtin: new TableSource('builtin', [{ tool: 'read_file' }, { tool: 'grep' }]),
    user_mcp: new TableSource('user_mcp', [
      { tool: 'svc_x', server: 'main', userId: 'u1' },
      { tool: 'shared', server: 'main', userId: 'u1' },
      { tool: 'read_file', server: 'main', userId: 'u1' },
      { tool: 'only_user', server: 'main', userId: 'u1' }
    ]),
    local_mcp: new TableSource('local_mcp', [{ tool: 'svc_x' }, { tool: 'only_local' }]),
    global_mcp: new TableSource('global_mcp', [
      { tool: 'shared', server: 'gm' },
      { tool: 'fn_a', server: 'gm' },
      { tool: 'read_file', server: 'gm' },
      { tool: 'only_global', server: 'gm' },
      { tool: 'from_global_main', server: 'main' }
    ])
  }
  const router = new ToolRouter({
    sources: { ...sources, function: new FunctionSource([fn('svc_x'), fn('fn_a'), fn('only_fn')], { defaultTimeoutMs: 5000 }) },
    outputMaxChars: 10_000
  })
  return { router, sources, fnCalls }
}

const scope = (userId?: string): SourceScope => ({ userId, signal: new AbortController().signal })

async function invoke (
  router: ToolRouter,
  name: string,
  opts: { userId?: string, allow?: AllowList, args?: Record<string, unknown> | string } = {}
): Promise<InvokeOutcome> {
  const ctx: Omit<CallContext, 'callId'> = {
    caller: { userId: opts.userId, isAdmin: false },
    signal: new AbortController().signal,
    workspace: {},
    timeoutMs: 5000
  }
  return await router.invoke({
    name,
    arguments: opts.args ?? {},
    callId: 'c1',
    userId: opts.userId,
    ctx,
    includeTrace: false,
    ...(opts.allow !== undefined ? { allow: opts.allow } : {})
  })
}

function ok (outcome: InvokeOutcome): InvokeResult {
  if (!outcome.ok) assert.fail(`expected a result, got ${outcome.error.code}: ${outcome.error.message}`)
  return outcome.result
}

function errorCode (outcome: InvokeOutcome): string {
  if (outcome.ok) assert.fail(`expected an error, got route ${outcome.result.route}: ${outcome.result.output}`)
  assert.equal(outcome.toolMs, 0)
  return outcome.error.code
}

test('invoke: each tier wins over the tiers below it, and only the winner runs', async () => {
  const { router, sources, fnCalls } = setup()
  // builtin > user_mcp > global_mcp for read_file, even with the tenant's servers in play
  let r = ok(await invoke(router, 'read_file', { userId: 'u1' }))
  assert.equal(r.route, 'builtin')
  assert.equal(r.output, 'builtin:builtin:read_file')
  // user_mcp > local_mcp > function for svc_x when the call has a tenant
  r = ok(await invoke(router, 'svc_x', { userId: 'u1' }))
  assert.equal(r.route, 'user_mcp')
  assert.equal(r.output, 'user_mcp:main:svc_x')
  // without a tenant, tier 2 takes no part: local_mcp > function
  r = ok(await invoke(router, 'svc_x'))
  assert.equal(r.route, 'local_mcp')
  // function > global_mcp
  r = ok(await invoke(router, 'fn_a', { args: '{"n":1}' }))
  assert.equal(r.route, 'function')
  assert.equal(r.output, 'function:fn_a:{"n":1}')
  // user_mcp > global_mcp for the same raw name; global_mcp when no tenant
  assert.equal(ok(await invoke(router, 'shared', { userId: 'u1' })).route, 'user_mcp')
  assert.equal(ok(await invoke(router, 'shared')).output, 'global_mcp:gm:shared')
  assert.equal(ok(await invoke(router, 'only_global')).route, 'global_mcp')

  assert.deepEqual(sources.builtin.called, ['read_file'])
  assert.deepEqual(sources.user_mcp.called, ['svc_x', 'shared'])
  assert.deepEqual(sources.local_mcp.called, ['svc_x'])
  assert.deepEqual(fnCalls, ['fn_a'])
  assert.deepEqual(sources.global_mcp.called, ['shared', 'only_global'])
})

test('invoke: a qualified {serverId}__{tool} name reaches the shadowed tool', async () => {
  const { router } = setup()
  const r = ok(await invoke(router, 'gm__read_file'))
  assert.equal(r.route, 'global_mcp')
  assert.equal(r.output, 'global_mcp:gm:read_file')
})

test('invoke: an unknown name is GW_TOOL_NOT_FOUND, and nothing runs', async () => {
  const { router, sources, fnCalls } = setup()
  const outcome = await invoke(router, 'nope', { userId: 'u1' })
  assert.equal(errorCode(outcome), 'GW_TOOL_NOT_FOUND')
  assert.equal(outcome.ok ? 0 : outcome.error.statusCode, 404)
  assert.equal(outcome.ok ? '' : outcome.error.message, "No tool named 'nope'")
  // every tier was asked, in priority order
  for (const tier of ['builtin', 'user_mcp', 'local_mcp', 'global_mcp'] as const) assert.deepEqual(sources[tier].resolved, ['nope'], tier)
  assert.deepEqual([sources.builtin, sources.user_mcp, sources.local_mcp, sources.global_mcp].flatMap((s) => s.called), [])
  assert.deepEqual(fnCalls, [])
})

test('invoke: an encoded user_{u}_tool_{t} name goes to tier 2 only, and only for tenant u', async () => {
  const { router, sources } = setup()
  const r = ok(await invoke(router, 'user_u1_tool_only_user', { userId: 'u1' }))
  assert.equal(r.route, 'user_mcp')
  assert.equal(r.output, 'user_mcp:main:only_user')
  // a tool only a global server has: not found, never a fall back to tier 3, 4 or 5
  assert.equal(errorCode(await invoke(router, 'user_u1_tool_only_global', { userId: 'u1' })), 'GW_TOOL_NOT_FOUND')
  assert.deepEqual(sources.local_mcp.resolved, [])
  assert.deepEqual(sources.global_mcp.resolved, [])
  assert.deepEqual(sources.global_mcp.called, [])
  // another tenant's name, or a tenant's name without a tenant: refused before tier 2 is asked
  assert.equal(errorCode(await invoke(router, 'user_u1_tool_only_user', { userId: 'u2' })), 'GW_TENANT_MISMATCH')
  assert.equal(errorCode(await invoke(router, 'user_u1_tool_only_user')), 'GW_TENANT_MISMATCH')
  assert.deepEqual(sources.user_mcp.resolved, ['user_u1_tool_only_user', 'user_u1_tool_only_global'])
})

test('list: functions= resolves builtin > local_mcp > function; shadowed server tools are exposed under their qualified names', async () => {
  const { router } = setup()
  const listing = await router.list({ functions: ['svc_x', 'fn_a', 'read_file'], mcp: ['gm'] }, scope())
  assert.deepEqual(listing.tools.map((t) => [t.name, t.entry.route]), [
    ['svc_x', 'local_mcp'],
    ['fn_a', 'function'],
    ['read_file', 'builtin'],
    ['shared', 'global_mcp'],
    ['gm__fn_a', 'global_mcp'],
    ['gm__read_file', 'global_mcp'],
    ['only_global', 'global_mcp']
  ])
  assert.deepEqual(listing.diagnostics.map((d) => ({ type: d.type, name: d.name, route: d.route, exposedAs: d.exposedAs, shadowedBy: d.shadowedBy })), [
    { type: 'shadowed', name: 'fn_a', route: 'global_mcp', exposedAs: 'gm__fn_a', shadowedBy: 'function' },
    { type: 'shadowed', name: 'read_file', route: 'global_mcp', exposedAs: 'gm__read_file', shadowedBy: 'builtin' }
  ])
  assert.deepEqual(listing.unresolved, [])
})

test('list: a tier-3/4 tool whose raw name the tenant also has is listed, with an ambiguous diagnostic', async () => {
  const { router } = setup()
  const listing = await router.list({ functions: ['svc_x'] }, scope('u1'))
  assert.deepEqual(listing.tools.map((t) => [t.name, t.entry.route]), [['svc_x', 'local_mcp']])
  assert.deepEqual(listing.diagnostics.map((d) => [d.type, d.name, d.route, d.shadowedBy]), [['ambiguous', 'svc_x', 'local_mcp', 'user_mcp']])
})

test('list: a serverId the tenant has selects the tenant server, not the global one of the same id', async () => {
  const { router } = setup()
  const listing = await router.list({ mcp: ['main'] }, scope('u1'))
  assert.deepEqual(listing.tools.map((t) => [t.name, t.entry.route]), [
    ['user_u1_tool_svc_x', 'user_mcp'],
    ['user_u1_tool_shared', 'user_mcp'],
    ['user_u1_tool_read_file', 'user_mcp'],
    ['user_u1_tool_only_user', 'user_mcp']
  ])
  // without a tenant the same id is the global server's
  const global = await router.list({ mcp: ['main'] }, scope())
  assert.deepEqual(global.tools.map((t) => [t.name, t.entry.route, t.entry.source]), [['from_global_main', 'global_mcp', 'main']])
})

test('list: only what is named; an empty allow-list lists nothing; unknown names are unresolved', async () => {
  const { router } = setup()
  assert.deepEqual((await router.list({}, scope('u1'))).tools, [])
  assert.deepEqual((await router.list({ functions: [], mcp: [] }, scope('u1'))).tools, [])
  const listing = await router.list({ functions: ['only_fn', 'missing', '@builtin-readonly'], mcp: ['nosuch', 'bad_id'] }, scope())
  assert.deepEqual(listing.tools.map((t) => t.name), ['only_fn', 'read_file', 'grep'])
  assert.deepEqual(listing.unresolved, [
    { kind: 'function', name: 'missing', reason: 'No built-in, local MCP or function tool has this name' },
    // `glob` is in the group but this router has no such built-in
    { kind: 'function', name: 'glob', reason: 'No built-in, local MCP or function tool has this name' },
    { kind: 'mcp', name: 'bad_id', reason: 'Not a valid serverId (^[A-Za-z0-9][A-Za-z0-9-]{0,63}$)' },
    { kind: 'mcp', name: 'nosuch', reason: 'No server with this id is registered for the tenant or globally' }
  ])
})

test('invoke with allow: the name must be in the listing the allow-list gives', async () => {
  const { router, fnCalls } = setup()
  assert.equal(ok(await invoke(router, 'only_fn', { allow: { functions: ['only_fn'] } })).route, 'function')
  // exists, but not named: GW_NOT_ALLOWED (not GW_TOOL_NOT_FOUND), and it does not run
  assert.equal(errorCode(await invoke(router, 'only_fn', { allow: { functions: ['fn_a'] } })), 'GW_NOT_ALLOWED')
  assert.equal(errorCode(await invoke(router, 'only_fn', { allow: {} })), 'GW_NOT_ALLOWED')
  assert.deepEqual(fnCalls, ['only_fn'])
  // unknown everywhere: not found rather than not allowed
  assert.equal(errorCode(await invoke(router, 'nope', { allow: { functions: ['nope'] } })), 'GW_TOOL_NOT_FOUND')
  // with allow, svc_x resolves in the listing: the local MCP tool, although the tenant has one too
  assert.equal(ok(await invoke(router, 'svc_x', { userId: 'u1', allow: { functions: ['svc_x'] } })).route, 'local_mcp')
  // a server's tools under the names its listing gives them
  assert.equal(ok(await invoke(router, 'gm__read_file', { allow: { mcp: ['gm'] } })).route, 'global_mcp')
  assert.equal(ok(await invoke(router, 'user_u1_tool_shared', { userId: 'u1', allow: { mcp: ['main'] } })).route, 'user_mcp')
  assert.equal(errorCode(await invoke(router, 'only_global', { allow: { mcp: ['main'] } })), 'GW_NOT_ALLOWED')
})

test('catalog: every tier\'s tools with what shadows them; the tenant\'s servers join when there is a tenant', async () => {
  const { router } = setup()
  const rowOf = (tools: Array<{ route: Tier, name: string, shadowedBy: Tier | null }>) =>
    (route: Tier, name: string): Tier | null | undefined => tools.find((t) => t.route === route && t.name === name)?.shadowedBy
  let row = rowOf((await router.catalog(scope())).tools)
  assert.equal(row('builtin', 'read_file'), null)
  assert.equal(row('local_mcp', 'svc_x'), null)
  // a function has no qualified name: listed under its own name, shadowed by the local MCP tool
  assert.equal(row('function', 'svc_x'), 'local_mcp')
  assert.equal(row('function', 'fn_a'), null)
  assert.equal(row('global_mcp', 'gm__read_file'), 'builtin')
  assert.equal(row('global_mcp', 'gm__fn_a'), 'function')
  assert.equal(row('global_mcp', 'shared'), null)
  assert.equal(row('global_mcp', 'only_global'), null)
  assert.equal(row('user_mcp', 'user_u1_tool_svc_x'), undefined)

  row = rowOf((await router.catalog(scope('u1'))).tools)
  assert.equal(row('user_mcp', 'user_u1_tool_svc_x'), null)
  assert.equal(row('user_mcp', 'user_u1_tool_read_file'), null)
  assert.equal(row('local_mcp', 'svc_x'), 'user_mcp')
  assert.equal(row('function', 'svc_x'), 'user_mcp')
  assert.equal(row('global_mcp', 'gm__shared'), 'user_mcp')
  assert.equal(row('global_mcp', 'gm__read_file'), 'builtin')
})

test('invoke with allow: the listing is reused while the catalog token is the same, and made again when it changes', async () => {
  // A global MCP tier whose tools change at run time: its catalog token is the table it serves.
  let table = new TableSource('global_mcp', [{ tool: 'old', server: 'gm' }])
  let lists = 0
  const changing: ToolSource = {
    tier: 'global_mcp',
    list: async (selection, s) => { lists++; return await table.list(selection, s) },
    resolve: async (name, s) => await table.resolve(name, s),
    call: async (entry) => await table.call(entry),
    catalogToken: async () => table
  }
  const none = (tier: Tier): TableSource => new TableSource(tier, [])
  const router = new ToolRouter({
    sources: { builtin: none('builtin'), user_mcp: none('user_mcp'), local_mcp: none('local_mcp'), function: null, global_mcp: changing },
    outputMaxChars: 10_000
  })
  const allow = { mcp: ['gm'] }
  assert.equal(ok(await invoke(router, 'old', { allow })).output, 'global_mcp:gm:old')
  assert.equal(ok(await invoke(router, 'old', { allow })).output, 'global_mcp:gm:old')
  assert.equal(lists, 1, 'the second call resolves in the cached listing')
  // Another allow-list or another tenant is another listing.
  assert.equal(errorCode(await invoke(router, 'old', { allow: { mcp: ['other'] } })), 'GW_NOT_ALLOWED')
  assert.equal(lists, 2)
  // The server's tools change: the next call sees the new list at once.
  table = new TableSource('global_mcp', [{ tool: 'new', server: 'gm' }])
  assert.equal(ok(await invoke(router, 'new', { allow })).output, 'global_mcp:gm:new')
  assert.equal(errorCode(await invoke(router, 'old', { allow })), 'GW_TOOL_NOT_FOUND')
  assert.equal(lists, 3, 'one listing for the new catalog, reused by the call after it')
})
