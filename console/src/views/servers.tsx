import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import type { Api, LiveTools, Server, ServerInput } from '../api.js'
import { ConfirmButton, ErrorBox, Loading, Section, formatTime, useAction, useLoad } from '../ui.js'
import type { ViewProps } from '../view.js'
import { OAuthConnection } from './server-oauth.js'
import { PinsCell, PinsPanel } from './server-pins.js'
import type { PinsTarget } from './server-pins.js'

type Grant = 'authorization_code' | 'client_credentials'

interface Draft {
  serverId: string
  type: string
  url: string
  command: string
  args: string
  headers: string
  description: string
  enabled: boolean
  timeoutMs: string
  /** auth: {type: 'oauth'} (SPEC 16); the fields below only count with it. */
  oauth: boolean
  grant: Grant
  clientId: string
  /** As the API shows it (masked): sent back unchanged, the stored secret is kept. */
  clientSecret: string
  scopes: string
  authorizationServer: string
  /** What the form does not show (priority, disabledTools, protocol, a stdio server's env): sent back as it was, so an edit keeps it. */
  kept: Pick<ServerInput, 'priority' | 'disabledTools' | 'protocol' | 'env'>
}

const EMPTY: Draft = {
  serverId: '',
  type: 'streamable_http',
  url: '',
  command: '',
  args: '',
  headers: '',
  description: '',
  enabled: true,
  timeoutMs: '',
  oauth: false,
  grant: 'authorization_code',
  clientId: '',
  clientSecret: '',
  scopes: '',
  authorizationServer: '',
  kept: {}
}

function authOf (d: Draft): ServerInput['auth'] {
  const scopes = d.scopes.split(/[\s,]+/).filter((x) => x !== '')
  return {
    type: 'oauth',
    grant: d.grant,
    ...(d.clientId.trim() !== '' ? { clientId: d.clientId.trim() } : {}),
    ...(d.clientSecret !== '' ? { clientSecret: d.clientSecret } : {}),
    ...(scopes.length > 0 ? { scopes } : {}),
    ...(d.authorizationServer.trim() !== '' ? { authorizationServer: d.authorizationServer.trim() } : {})
  }
}

/** Header lines "Name: value"; a masked value sent back as is keeps the stored secret. */
function headersOf (text: string): Record<string, string> | undefined {
  const out: Record<string, string> = {}
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue
    const colon = line.indexOf(':')
    if (colon <= 0) throw new Error(`Header line without a colon: ${line}`)
    out[line.slice(0, colon).trim()] = line.slice(colon + 1).trim()
  }
  return Object.keys(out).length > 0 ? out : undefined
}

function inputOf (d: Draft): ServerInput {
  const config: ServerInput = { ...d.kept, type: d.type, enabled: d.enabled }
  // env is a stdio server's; a type changed in the form drops it.
  if (d.type !== 'stdio') delete config.env
  if (d.type === 'stdio') {
    config.command = d.command
    const args = d.args.split('\n').map((a) => a.trim()).filter((a) => a !== '')
    if (args.length > 0) config.args = args
  } else {
    config.url = d.url
    const headers = headersOf(d.headers)
    if (headers !== undefined) config.headers = headers
    if (d.oauth) config.auth = authOf(d)
  }
  if (d.description !== '') config.description = d.description
  if (d.timeoutMs !== '') config.timeoutMs = Number(d.timeoutMs)
  return config
}

function draftOf (s: Server): Draft {
  const c = s.config
  return {
    serverId: s.serverId,
    type: c.type,
    url: c.url ?? '',
    command: c.command ?? '',
    args: (c.args ?? []).join('\n'),
    headers: Object.entries(c.headers ?? {}).map(([k, v]) => `${k}: ${v}`).join('\n'),
    description: c.description ?? '',
    enabled: c.enabled,
    timeoutMs: c.timeoutMs === undefined ? '' : String(c.timeoutMs),
    oauth: c.auth !== undefined,
    grant: c.auth?.grant ?? 'authorization_code',
    clientId: c.auth?.clientId ?? '',
    clientSecret: c.auth?.clientSecret ?? '',
    scopes: (c.auth?.scopes ?? []).join(' '),
    authorizationServer: c.auth?.authorizationServer ?? '',
    // Env values come masked: sent back unchanged, the stored ones are kept.
    kept: {
      priority: c.priority,
      ...(c.disabledTools !== undefined ? { disabledTools: c.disabledTools } : {}),
      ...(c.protocol !== undefined ? { protocol: c.protocol } : {}),
      ...(c.env !== undefined ? { env: c.env } : {})
    }
  }
}

/** The OAuth part of the form: a client pre-registered with the authorization server is optional (else the gateway registers itself). */
function OAuthFields ({ d, set, allowClientCredentials }: { d: Draft, set: (patch: Partial<Draft>) => void, allowClientCredentials: boolean }): JSX.Element {
  return (
    <fieldset class='oauth-fields'>
      <legend>
        <label class='check'>
          <input type='checkbox' name='oauth' checked={d.oauth} onChange={(e) => set({ oauth: e.currentTarget.checked })} /> OAuth
          <span class='muted'>(the server asks each user to sign in; connect it from the list once saved)</span>
        </label>
      </legend>
      {d.oauth && (
        <div class='row'>
          {allowClientCredentials && (
            <label>Grant
              <select name='grant' value={d.grant} onChange={(e) => set({ grant: e.currentTarget.value as Grant })}>
                <option value='authorization_code'>authorization_code (users connect)</option>
                <option value='client_credentials'>client_credentials (the gateway itself)</option>
              </select>
            </label>
          )}
          <label class='grow'>Client id <span class='muted'>(optional: pre-registered)</span>
            <input name='clientId' autoComplete='off' value={d.clientId} onInput={(e) => set({ clientId: e.currentTarget.value })} />
          </label>
          <label class='grow'>Client secret <span class='muted'>(stored encrypted, shown masked)</span>
            <input
              name='clientSecret'
              type='password'
              autoComplete='new-password'
              value={d.clientSecret}
              onInput={(e) => set({ clientSecret: e.currentTarget.value })}
            />
          </label>
          <label class='grow'>Scopes <span class='muted'>(space-separated; default: what the server asks)</span>
            <input name='scopes' autoComplete='off' value={d.scopes} onInput={(e) => set({ scopes: e.currentTarget.value })} placeholder='read write' />
          </label>
          <label class='grow'>Authorization server <span class='muted'>(issuer URL; optional, except for client_credentials)</span>
            <input name='authorizationServer' type='url' value={d.authorizationServer} onInput={(e) => set({ authorizationServer: e.currentTarget.value })} />
          </label>
        </div>
      )}
    </fieldset>
  )
}

function ServerForm ({ initial, editing, global, onSave, onCancel }: {
  initial: Draft
  editing: boolean
  /** A global server (admin): stdio and the client_credentials grant are for these only. */
  global: boolean
  onSave: (d: Draft) => Promise<void>
  onCancel: () => void
}): JSX.Element {
  const [d, setD] = useState<Draft>(initial)
  const set = (patch: Partial<Draft>): void => setD({ ...d, ...patch })
  return (
    <form class='stack server-form' onSubmit={(e) => { e.preventDefault(); onSave(d) }}>
      <div class='row'>
        <label>Server id
          <input name='serverId' required value={d.serverId} disabled={editing} onInput={(e) => set({ serverId: e.currentTarget.value })} placeholder='docs' />
        </label>
        <label>Type
          <select name='type' value={d.type} onChange={(e) => set({ type: e.currentTarget.value })}>
            <option value='streamable_http'>streamable_http</option>
            <option value='sse'>sse</option>
            {global && <option value='stdio'>stdio</option>}
          </select>
        </label>
        <label class='check'>
          <input type='checkbox' name='enabled' checked={d.enabled} onChange={(e) => set({ enabled: e.currentTarget.checked })} /> enabled
        </label>
        <label>Timeout (ms)<input name='timeoutMs' inputMode='numeric' value={d.timeoutMs} onInput={(e) => set({ timeoutMs: e.currentTarget.value })} /></label>
      </div>
      {d.type === 'stdio'
        ? (
          <div class='row'>
            <label class='grow'>Command
              <input name='command' value={d.command} onInput={(e) => set({ command: e.currentTarget.value })} placeholder='npx' />
            </label>
            <label class='grow'>Arguments <span class='muted'>(one a line)</span>
              <textarea name='args' rows={3} value={d.args} onInput={(e) => set({ args: e.currentTarget.value })} />
            </label>
          </div>
          )
        : (
          <div class='row'>
            <label class='grow'>URL<input name='url' type='url' required value={d.url} onInput={(e) => set({ url: e.currentTarget.value })} placeholder='https://mcp.example.com/mcp' /></label>
            <label class='grow'>Headers <span class='muted'>(Name: value, one a line; values are stored encrypted and shown masked)</span>
              <textarea
                name='headers'
                rows={2}
                value={d.headers}
                onInput={(e) => set({ headers: e.currentTarget.value })}
                placeholder='Authorization: Bearer …'
              />
            </label>
          </div>
          )}
      {d.type !== 'stdio' && <OAuthFields d={d} set={set} allowClientCredentials={global} />}
      <label>Description<input name='description' value={d.description} onInput={(e) => set({ description: e.currentTarget.value })} /></label>
      <div class='row'>
        <button type='submit' class='primary'>{editing ? 'Save' : 'Add server'}</button>
        <button type='button' onClick={onCancel}>Cancel</button>
      </div>
    </form>
  )
}

function LiveToolsPanel ({ tools }: { tools: LiveTools }): JSX.Element {
  return (
    <div class='live-tools' data-server={tools.serverId}>
      <p><strong>{tools.tools.length}</strong> tools live on <code>{tools.serverId}</code>:</p>
      <ul>
        {tools.tools.map((t) => {
          const tool = t as { name?: string, description?: string }
          return <li key={tool.name}><code>{tool.name}</code> {tool.description !== undefined && <span class='muted'>{tool.description}</span>}</li>
        })}
      </ul>
    </div>
  )
}

/** One scope's servers: the global ones (userId undefined) or a tenant's. */
function ServerScope ({ api, userId, title, pinsAccepted, onPins }: {
  api: Api
  userId: string | undefined
  title: string
  /** Counts accepts in the pins panel: the rows' Pins cells ask again. */
  pinsAccepted: number
  onPins: (target: PinsTarget) => void
}): JSX.Element {
  const servers = useLoad(() => api.servers(userId), [api, userId])
  const [form, setForm] = useState<{ draft: Draft, editing: boolean } | undefined>(undefined)
  const [live, setLive] = useState<LiveTools | undefined>(undefined)
  // Refresh asks the OAuth connections again too: they change without the server's config changing.
  const [refreshed, setRefreshed] = useState(0)
  const action = useAction()
  const scope = userId === undefined ? 'global' : `tenant-${userId}`

  const save = async (d: Draft): Promise<void> => {
    const done = await action.run(async () => await api.putServer(userId, d.serverId.trim(), inputOf(d)))
    if (done !== undefined) {
      setForm(undefined)
      servers.reload()
    }
  }
  // The form starts from the server as stored now, not as this list last loaded it: a change made
  // since (another tab, the API) is kept by the Save, and a Refresh still under way cannot race it.
  const edit = async (serverId: string): Promise<void> => {
    const fresh = await action.run(async () => await api.servers(userId))
    const stored = fresh?.servers.find((x) => x.serverId === serverId)
    if (stored !== undefined) setForm({ draft: draftOf(stored), editing: true })
  }
  const test = async (serverId: string): Promise<void> => {
    setLive(undefined)
    const tools = await action.run(() => api.liveTools(userId, serverId))
    if (tools !== undefined) setLive(tools)
  }
  const remove = async (serverId: string): Promise<void> => {
    const done = await action.run(() => api.deleteServer(userId, serverId))
    if (done !== undefined) {
      if (live?.serverId === serverId) setLive(undefined)
      servers.reload()
    }
  }

  return (
    <Section
      title={title}
      actions={
        <>
          <Loading when={servers.loading} />
          <button type='button' onClick={() => { servers.reload(); setRefreshed((n) => n + 1) }}>Refresh</button>
          <button type='button' class='primary' onClick={() => setForm({ draft: EMPTY, editing: false })}>Add</button>
        </>
      }
    >
      <div class='stack' data-scope={scope}>
        {form !== undefined && (
          <ServerForm
            key={form.draft.serverId}
            initial={form.draft}
            editing={form.editing}
            global={userId === undefined}
            onSave={save}
            onCancel={() => setForm(undefined)}
          />
        )}
        <ErrorBox error={servers.error ?? action.error} />
        {servers.data !== undefined && servers.data.servers.length === 0 && <p class='muted'>No servers.</p>}
        {servers.data !== undefined && servers.data.servers.length > 0 && (
          <div class='scroll'>
            <table class='servers'>
              <thead>
                <tr><th>Server</th><th>Type</th><th>Where</th><th>Headers / env</th><th>OAuth</th><th>Pins</th><th>Enabled</th><th>Updated</th><th /></tr>
              </thead>
              <tbody>
                {servers.data.servers.map((s) => (
                  <tr key={s.serverId} data-server={s.serverId}>
                    <td><code>{s.serverId}</code>{s.config.description !== undefined && <div class='muted'>{s.config.description}</div>}</td>
                    <td>{s.config.type}</td>
                    <td class='wrap'>{s.config.url ?? [s.config.command, ...(s.config.args ?? [])].join(' ')}</td>
                    <td class='wrap'>
                      {Object.entries({ ...s.config.headers, ...s.config.env }).map(([k, v]) => (
                        <div key={k}><code>{k}</code>: <span class='masked'>{v}</span></div>
                      ))}
                    </td>
                    <td class='oauth-cell'>
                      {s.config.auth !== undefined
                        ? <OAuthConnection api={api} userId={userId} server={s} refreshed={refreshed} />
                        : <span class='muted'>—</span>}
                    </td>
                    <td class='pins-cell'>
                      <PinsCell
                        api={api}
                        userId={userId}
                        server={s}
                        refreshed={refreshed + pinsAccepted}
                        onOpen={() => onPins({ userId, serverId: s.serverId })}
                      />
                    </td>
                    <td>{s.config.enabled ? 'yes' : 'no'}</td>
                    <td>{formatTime(s.updatedAt)}</td>
                    <td class='actions'>
                      <button type='button' onClick={() => { test(s.serverId) }} disabled={action.busy}>Test</button>
                      <button type='button' onClick={() => { edit(s.serverId) }} disabled={action.busy}>Edit</button>
                      <ConfirmButton label='Remove' confirm={`Remove ${s.serverId}?`} onConfirm={() => { remove(s.serverId) }} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {live !== undefined && <LiveToolsPanel tools={live} />}
      </div>
    </Section>
  )
}

/**
 * The pins panel a link opens (the Tools view's definition_changed diagnostic): `#/servers?pins=<serverId>`.
 * The tenant's pins (of its own server or of a global one), or without a tenant those of calls without one.
 */
function pinsOfHash (tenant: string): PinsTarget | undefined {
  const serverId = new URLSearchParams(location.hash.split('?')[1] ?? '').get('pins') ?? ''
  return serverId === '' ? undefined : { userId: tenant === '' ? undefined : tenant, serverId }
}

export function ServersView ({ api, role, tenant }: ViewProps): JSX.Element {
  const [pins, setPins] = useState<PinsTarget | undefined>(() => pinsOfHash(tenant))
  const [accepted, setAccepted] = useState(0)
  const open = (target: PinsTarget): void => {
    setPins(target)
    // Scrolled to once rendered (the panel is above the lists).
    requestAnimationFrame(() => document.querySelector('[data-pins-panel]')?.scrollIntoView({ block: 'nearest' }))
  }
  return (
    <div class='stack'>
      {pins !== undefined && (
        <PinsPanel
          key={`${pins.userId ?? ''}/${pins.serverId}`}
          api={api}
          target={pins}
          onClose={() => {
            setPins(undefined)
            // A link's panel, closed, does not open again on reload.
            if (location.hash.includes('?')) history.replaceState(null, '', '#/servers')
          }}
          onAccepted={() => setAccepted((n) => n + 1)}
        />
      )}
      {tenant !== '' && <ServerScope api={api} userId={tenant} title={`Servers of ${tenant}`} pinsAccepted={accepted} onPins={open} />}
      {role === 'admin' && <ServerScope api={api} userId={undefined} title='Global servers' pinsAccepted={accepted} onPins={open} />}
      {role === 'admin' && tenant === '' && <p class='muted'>Pick a tenant above to see its own servers.</p>}
    </div>
  )
}
