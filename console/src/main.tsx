import { render } from 'preact'
import type { ComponentChildren, JSX } from 'preact'
import { useEffect, useErrorBoundary, useMemo, useState } from 'preact/hooks'
import { Api } from './api.js'
import { clearSession, loadAllow, loadSession, loadTenant, recentTenants, rememberTenant, saveAllow, saveSession, saveTenant } from './session.js'
import type { AllowList, Role, Session } from './session.js'
import type { ViewName, ViewProps } from './view.js'
import { ErrorBox } from './ui.js'
import { ToolsView } from './views/tools.js'
import { ServersView } from './views/servers.js'
import { PlaygroundView } from './views/playground.js'
import { JournalView } from './views/journal.js'
import { ApprovalsView } from './views/approvals.js'
import { WorkspacesView } from './views/workspaces.js'
import { StatusView } from './views/status.js'
import './styles.css'

const VIEWS = {
  tools: { title: 'Tools', roles: ['admin', 'tenant'], component: ToolsView },
  servers: { title: 'Servers', roles: ['admin', 'tenant'], component: ServersView },
  playground: { title: 'Playground', roles: ['admin', 'tenant'], component: PlaygroundView },
  journal: { title: 'Journal', roles: ['admin', 'tenant', 'approver'], component: JournalView },
  approvals: { title: 'Approvals', roles: ['admin', 'tenant', 'approver'], component: ApprovalsView },
  workspaces: { title: 'Workspaces', roles: ['admin', 'tenant'], component: WorkspacesView },
  status: { title: 'Status', roles: ['admin', 'tenant', 'approver'], component: StatusView }
} as const satisfies Record<ViewName, { title: string, roles: readonly Role[], component: (p: ViewProps) => JSX.Element }>

function viewOfHash (): ViewName | undefined {
  const name = location.hash.replace(/^#\/?/, '').split('?')[0] ?? ''
  return Object.hasOwn(VIEWS, name) ? name as ViewName : undefined
}

/** Finds out what a key may do: GET /whoami names its role and tenant (no admin-only route is tried with a tenant key). */
async function identify (key: string): Promise<Session> {
  const who = await new Api(key).whoami()
  if (who.role === 'admin') return { key, role: 'admin' }
  return { key, role: who.role, tenant: who.userId ?? '' }
}

function Login ({ onLogin }: { onLogin: (s: Session) => void }): JSX.Element {
  const [key, setKey] = useState('')
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault()
    setBusy(true)
    setError(undefined)
    try {
      onLogin(await identify(key.trim()))
    } catch (err) {
      setError(err)
    } finally {
      setBusy(false)
    }
  }
  return (
    <main class='login'>
      <form class='card login-card' onSubmit={(e) => { submit(e) }}>
        <h1>tool-gateway console</h1>
        <p class='muted'>Log in with an API key. It is kept in this tab's session storage only and sent as <code>Authorization: Bearer</code>.</p>
        <label>API key
          <input
            name='key'
            type='password'
            autoComplete='off'
            value={key}
            onInput={(e) => setKey(e.currentTarget.value)}
            placeholder='empty when the gateway runs without keys'
          />
        </label>
        <button type='submit' class='primary' disabled={busy}>{busy ? 'Checking…' : 'Log in'}</button>
        <ErrorBox error={error} />
      </form>
    </main>
  )
}

function TenantPicker ({ tenant, onChange }: { tenant: string, onChange: (t: string) => void }): JSX.Element {
  const [text, setText] = useState(tenant)
  useEffect(() => setText(tenant), [tenant])
  const recent = recentTenants()
  const apply = (e: Event): void => {
    e.preventDefault()
    onChange(text.trim())
  }
  return (
    <form class='tenant-picker' onSubmit={apply}>
      <label>Tenant
        <input name='tenant' list='recent-tenants' value={text} placeholder='none (global)' onInput={(e) => setText(e.currentTarget.value)} onChange={apply} />
      </label>
      <datalist id='recent-tenants'>{recent.map((t) => <option key={t} value={t} />)}</datalist>
    </form>
  )
}

/** A view that throws while rendering shows the error instead of a blank page. */
function Boundary ({ children }: { children: ComponentChildren }): JSX.Element {
  const [error, reset] = useErrorBoundary()
  if (error !== undefined) {
    return (
      <div class='stack'>
        <ErrorBox error={error} />
        <div class='row'><button type='button' onClick={() => reset()}>Show the view again</button></div>
      </div>
    )
  }
  return <>{children}</>
}

function App (): JSX.Element {
  const [session, setSession] = useState<Session | undefined>(loadSession)
  const [view, setView] = useState<ViewName | undefined>(viewOfHash)
  const [adminTenant, setAdminTenant] = useState(loadTenant)
  const [allow, setAllowState] = useState<AllowList>(loadAllow)
  useEffect(() => {
    const onHash = (): void => setView(viewOfHash())
    addEventListener('hashchange', onHash)
    return () => removeEventListener('hashchange', onHash)
  }, [])
  const api = useMemo(() => new Api(session?.key ?? ''), [session?.key])

  if (session === undefined) {
    return <Login onLogin={(s) => { saveSession(s); setSession(s) }} />
  }
  const allowed = (Object.keys(VIEWS) as ViewName[]).filter((v) => (VIEWS[v].roles as readonly Role[]).includes(session.role))
  const current = view !== undefined && allowed.includes(view) ? view : allowed[0] as ViewName
  const tenant = session.role === 'admin' ? adminTenant : session.tenant ?? ''
  const go = (v: ViewName): void => { location.hash = `#/${v}` }
  const setTenant = (t: string): void => {
    rememberTenant(t)
    saveTenant(t)
    setAdminTenant(t)
  }
  const setAllow = (a: AllowList): void => {
    saveAllow(a)
    setAllowState(a)
  }
  const logout = (): void => {
    clearSession()
    setSession(undefined)
  }
  const View = VIEWS[current].component
  return (
    <div class='shell'>
      <header class='top'>
        <span class='brand'>tool-gateway</span>
        <nav aria-label='Views'>
          {allowed.map((v) => <a key={v} href={`#/${v}`} class={v === current ? 'active' : ''} aria-current={v === current ? 'page' : undefined}>{VIEWS[v].title}</a>)}
        </nav>
        <div class='who'>
          {session.role === 'admin'
            ? <TenantPicker tenant={adminTenant} onChange={setTenant} />
            : <span class='badge'>tenant {session.tenant}</span>}
          <span class='badge role'>{session.role}</span>
          <button type='button' onClick={logout}>Log out</button>
        </div>
      </header>
      <main class='content' id={`view-${current}`}>
        <h1>{VIEWS[current].title}{tenant !== '' ? <span class='muted'> · {tenant}</span> : null}</h1>
        <Boundary key={`${current}:${tenant}`}>
          <View api={api} role={session.role} tenant={tenant} allow={allow} setAllow={setAllow} go={go} />
        </Boundary>
      </main>
    </div>
  )
}

const root = document.getElementById('app')
if (root !== null) {
  root.textContent = ''
  render(<App />, root)
}
