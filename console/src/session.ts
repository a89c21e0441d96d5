// What the console keeps between page loads of one browser tab: sessionStorage only (gone when the
// tab closes), never localStorage or a cookie. The API key is there because every call needs it.

export type Role = 'admin' | 'tenant' | 'approver'

export interface Session {
  key: string
  role: Role
  /** The tenant of a tenant or approver key. */
  tenant?: string
}

export interface AllowList { functions: string, mcp: string }

const SESSION = 'tool-gateway.console.session'
const RECENT = 'tool-gateway.console.recent-tenants'
const TENANT = 'tool-gateway.console.tenant'
const ALLOW = 'tool-gateway.console.allow'

function read<T> (name: string): T | undefined {
  try {
    const text = sessionStorage.getItem(name)
    return text === null ? undefined : JSON.parse(text) as T
  } catch {
    return undefined
  }
}

function write (name: string, value: unknown): void {
  try {
    sessionStorage.setItem(name, JSON.stringify(value))
  } catch {}
}

export function loadSession (): Session | undefined {
  const s = read<Session>(SESSION)
  return s !== undefined && typeof s.key === 'string' && ['admin', 'tenant', 'approver'].includes(s.role) ? s : undefined
}

export function saveSession (session: Session): void { write(SESSION, session) }

export function clearSession (): void {
  try {
    for (const name of [SESSION, TENANT, ALLOW]) sessionStorage.removeItem(name)
  } catch {}
}

/** Tenants an admin picked recently in this tab, most recent first (there is no "list tenants" route). */
export function recentTenants (): string[] {
  const list = read<unknown>(RECENT)
  return Array.isArray(list) ? list.filter((x): x is string => typeof x === 'string').slice(0, 20) : []
}

export function rememberTenant (tenant: string): void {
  if (tenant === '') return
  write(RECENT, [tenant, ...recentTenants().filter((t) => t !== tenant)].slice(0, 20))
}

export function loadTenant (): string { return read<string>(TENANT) ?? '' }
export function saveTenant (tenant: string): void { write(TENANT, tenant) }

export function loadAllow (): AllowList {
  const a = read<AllowList>(ALLOW)
  return { functions: typeof a?.functions === 'string' ? a.functions : '@builtin-readonly', mcp: typeof a?.mcp === 'string' ? a.mcp : '' }
}

export function saveAllow (allow: AllowList): void { write(ALLOW, allow) }

/** A comma list as the API's arrays take it. */
export function listOf (text: string): string[] {
  return text.split(',').map((s) => s.trim()).filter((s) => s !== '')
}
