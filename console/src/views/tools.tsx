import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import type { Catalog, SelectedByRoute, ToolSearch, Tools } from '../api.js'
import { listOf } from '../session.js'
import type { AllowList } from '../session.js'
import { ErrorBox, Json, Loading, Section, useAction, useLoad } from '../ui.js'
import type { ViewProps } from '../view.js'

const FORMATS = ['openai', 'responses', 'anthropic', 'gemini', 'mcp'] as const

/** The allow-list fields the Tools and Playground views share. */
export function AllowListFields ({ allow, setAllow }: { allow: AllowList, setAllow: (a: AllowList) => void }): JSX.Element {
  return (
    <div class='row'>
      <label class='grow'>Functions <span class='muted'>(built-in, function and local MCP tool names; @builtin, @builtin-readonly)</span>
        <input
          name='functions'
          value={allow.functions}
          onInput={(e) => setAllow({ ...allow, functions: e.currentTarget.value })}
          placeholder='@builtin-readonly, calculate'
        />
      </label>
      <label class='grow'>MCP servers <span class='muted'>(serverIds)</span>
        <input name='mcp' value={allow.mcp} onInput={(e) => setAllow({ ...allow, mcp: e.currentTarget.value })} placeholder='github, docs' />
      </label>
    </div>
  )
}

/**
 * The allow-list field of each route (TierTraits.selectedBy). The console bundles no server code, so
 * the table is written out here and its type makes it equal to TIER_TRAITS: a new tier does not compile until it is added.
 */
const SELECTED_BY: SelectedByRoute = { builtin: 'functions', user_mcp: 'mcp', local_mcp: 'functions', function: 'functions', global_mcp: 'mcp' }

/** Adds a catalog entry to the allow-list: a tool of a server tier (remote MCP) by its server, any other by its name. */
function addToAllow (allow: AllowList, entry: Catalog['tools'][number]): AllowList {
  if (SELECTED_BY[entry.route] === 'mcp') {
    const servers = listOf(allow.mcp)
    return servers.includes(entry.source) ? allow : { ...allow, mcp: [...servers, entry.source].join(', ') }
  }
  const names = listOf(allow.functions)
  return names.includes(entry.name) ? allow : { ...allow, functions: [...names, entry.name].join(', ') }
}

function toolNameOf (tool: Record<string, unknown>): string {
  const fn = tool.function as { name?: unknown } | undefined
  const name = tool.name ?? fn?.name
  return typeof name === 'string' ? name : '(unnamed)'
}

function descriptionOf (tool: Record<string, unknown>): string {
  const fn = tool.function as { description?: unknown } | undefined
  const description = tool.description ?? fn?.description
  return typeof description === 'string' ? description : ''
}

export function ToolsView ({ api, tenant, allow, setAllow, go }: ViewProps): JSX.Element {
  const [format, setFormat] = useState<typeof FORMATS[number]>('openai')
  const [strict, setStrict] = useState(false)
  // What the model is shown (README "Tool search"): every tool, tool_search and the pinned ones, or the provider's own deferral.
  const [mode, setMode] = useState<'all' | 'search' | 'defer'>('all')
  const [pinned, setPinned] = useState('')
  const [listing, setListing] = useState<Tools | undefined>(undefined)
  const action = useAction()
  const [query, setQuery] = useState('')
  const [found, setFound] = useState<ToolSearch | undefined>(undefined)
  const searching = useAction()
  const catalog = useLoad(() => api.catalog(tenant === '' ? undefined : tenant), [api, tenant])

  const list = async (e: Event): Promise<void> => {
    e.preventDefault()
    const shape = mode === 'all' ? {} : { ...(mode === 'search' ? { mode: 'search' } : { defer: true }), ...(pinned.trim() !== '' ? { pinned } : {}) }
    const userId = tenant === '' ? undefined : tenant
    const result = await action.run(() => api.tools({ functions: allow.functions, mcp: allow.mcp, format, strict, userId, ...shape }))
    if (result !== undefined) setListing(result)
  }

  // GET /tools/search over the same allow-list and format: what tool_search would answer a model (README "Tool search").
  const search = async (e: Event): Promise<void> => {
    e.preventDefault()
    const userId = tenant === '' ? undefined : tenant
    const result = await searching.run(() => api.searchTools({ q: query, functions: allow.functions, mcp: allow.mcp, format, limit: 10, userId }))
    if (result !== undefined) setFound(result)
  }

  return (
    <div class='stack'>
      <Section title='What a model sees'>
        <form class='stack' onSubmit={(e) => { list(e) }}>
          <AllowListFields allow={allow} setAllow={setAllow} />
          <div class='row'>
            <label>Format
              <select name='format' value={format} onChange={(e) => setFormat(e.currentTarget.value as typeof FORMATS[number])}>
                {FORMATS.map((f) => <option key={f} value={f}>{f}</option>)}
              </select>
            </label>
            <label title='every tool; tool_search and the pinned tools (mode=search); the provider tool search (defer=true)'>Shown
              <select name='mode' value={mode} onChange={(e) => setMode(e.currentTarget.value as typeof mode)}>
                <option value='all'>every tool</option>
                <option value='search'>search mode</option>
                <option value='defer'>deferred</option>
              </select>
            </label>
            {mode !== 'all' && (
              <label>Pinned <input name='pinned' value={pinned} onInput={(e) => setPinned(e.currentTarget.value)} placeholder='read_file' /></label>
            )}
            <label class='check'><input type='checkbox' checked={strict} onChange={(e) => setStrict(e.currentTarget.checked)} /> strict</label>
            <button type='submit' class='primary' disabled={action.busy}>List tools</button>
          </div>
        </form>
        <ErrorBox error={action.error} />
        {listing !== undefined && (
          <div class='stack' id='tools-listing'>
            <p><strong>{listing.tools.length}</strong> tools: <span class='tool-names'>{listing.tools.map((t) => toolNameOf(t)).join(', ')}</span></p>
            {listing.unresolved.length > 0 && (
              <table><caption>Unresolved</caption><thead><tr><th>Kind</th><th>Name</th><th>Reason</th></tr></thead>
                <tbody>{listing.unresolved.map((u) => <tr key={u.name}><td>{u.kind}</td><td>{u.name}</td><td>{u.reason}</td></tr>)}</tbody>
              </table>
            )}
            {listing.unavailable.length > 0 && (
              <table><caption>Unavailable servers</caption><thead><tr><th>Server</th><th>Reason</th><th>Retry at</th></tr></thead>
                <tbody>
                  {listing.unavailable.map((u) => (
                    <tr key={u.serverId} data-unavailable={u.serverId}>
                      <td>{u.serverId}</td>
                      <td>
                        {u.reason}
                        {/* The user must connect it (SPEC 16): Connect is in the server's row. */}
                        {u.code === 'GW_OAUTH_REQUIRED' && <> <button type='button' onClick={() => go('servers')}>Connect in Servers</button></>}
                      </td>
                      <td>{u.retryAt ?? '—'}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            {listing.diagnostics.length > 0 && (
              <table><caption>Diagnostics</caption><thead><tr><th>Type</th><th>Name</th><th>Tier</th><th>Message</th></tr></thead>
                <tbody>
                  {listing.diagnostics.map((d, i) => (
                    <tr key={i} data-diagnostic={d.type}>
                      <td>{d.type}</td><td>{d.name}</td><td>{d.route}</td>
                      <td>
                        {d.message}
                        {/* A definition that differs from its pin (SPEC 18): the diff and Accept are in the Servers view's pins panel. */}
                        {d.type === 'definition_changed' && <> <a class='pins-link' href={`#/servers?pins=${encodeURIComponent(d.source)}`}>Review the change</a></>}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            <details open><summary>Schemas ({format})</summary><Json value={listing.tools} label='tool schemas' /></details>
          </div>
        )}
      </Section>
      <Section title='Search the allow-list'>
        <p class='muted'>The allow-list's tools ranked against what a model would ask for: the answer of <code>tool_search</code> in search mode.</p>
        <form class='row' onSubmit={(e) => { search(e) }}>
          <label class='grow'>Query <input name='q' value={query} onInput={(e) => setQuery(e.currentTarget.value)} placeholder='open a bug report' /></label>
          <button type='submit' class='primary' disabled={searching.busy || query.trim() === ''}>Search</button>
        </form>
        <ErrorBox error={searching.error} />
        {found !== undefined && (
          <div class='stack' id='tools-search'>
            <p><strong>{found.tools.length}</strong> of {found.total} tools match</p>
            {found.tools.length > 0 && (
              <table><thead><tr><th>Tool</th><th>Score</th><th>Description</th></tr></thead>
                <tbody>
                  {found.tools.map((t, i) => (
                    <tr key={toolNameOf(t)} data-found={toolNameOf(t)}>
                      <td><code>{toolNameOf(t)}</code></td><td>{found.scores[i]}</td><td>{descriptionOf(t)}</td>
                    </tr>
                  ))}
                </tbody>
              </table>
            )}
            {found.unresolved.map((u) => <p key={u.name} class='warn'>Unresolved {u.kind} {u.name}: {u.reason}</p>)}
          </div>
        )}
      </Section>
      <Section title='Catalog' actions={<><Loading when={catalog.loading} /><button type='button' onClick={() => catalog.reload()}>Refresh</button></>}>
        <p class='muted'>Every name each tier could offer{tenant === '' ? '' : ` tenant ${tenant}`}, with shadowing (a tier that comes first hides the same name in a later one). Add a tool to the allow-list above.</p>
        <ErrorBox error={catalog.error} />
        {catalog.data !== undefined && (
          <div class='scroll'>
            <table id='catalog'>
              <thead><tr><th>Name</th><th>Tier</th><th>Source</th><th>Shadowed by</th><th /></tr></thead>
              <tbody>
                {catalog.data.tools.map((t) => (
                  <tr key={`${t.route}:${t.source}:${t.name}`} class={t.shadowedBy !== null ? 'shadowed' : ''}>
                    <td><code>{t.name}</code></td><td>{t.route}</td><td>{t.source}</td><td>{t.shadowedBy ?? ''}</td>
                    <td><button type='button' onClick={() => setAllow(addToAllow(allow, t))}>Add</button></td>
                  </tr>
                ))}
              </tbody>
            </table>
            {catalog.data.unavailable.map((u) => <p key={u.serverId} class='warn'>Server {u.serverId} unavailable: {u.reason}</p>)}
          </div>
        )}
      </Section>
    </div>
  )
}
