// A server's OAuth connection in the Servers view (SPEC 16 "Console"): its status, Connect (or
// Reconnect), and Disconnect. The console only ever sees the status route's answer: no token exists
// on this side of the API.
import type { JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import type { Api, OAuthStatus, Server } from '../api.js'
import { ConfirmButton, ErrorBox, formatTime, useAction, useLoad } from '../ui.js'

/** How often, and how long at most, the console asks whether the user finished authorizing in the other window. */
const POLL_MS = 2_000
const WAIT_MS = 10 * 60_000

const LABELS: Record<OAuthStatus['status'], string> = {
  connected: 'connected',
  authorization_required: 'authorization required',
  refresh_failed: 'refresh failed'
}

interface Waiting {
  authorizationUrl: string
  /** The status when Connect was clicked: a Reconnect is done when the connection differs from it. */
  before: OAuthStatus | undefined
  until: number
}

/**
 * Done when the status is connected and is not the connection the wait started from (a Reconnect of a
 * connected server ends with other tokens: another expiry or other scopes).
 */
function connectedSince (now: OAuthStatus, before: OAuthStatus | undefined): boolean {
  if (now.status !== 'connected') return false
  if (before?.status !== 'connected') return true
  return now.expiresAt !== before.expiresAt || (now.scopes ?? []).join(' ') !== (before.scopes ?? []).join(' ')
}

/** Asks for the status every POLL_MS until `waiting` is connected or its time is up; stops when the row goes away. */
function usePoll (api: Api, userId: string | undefined, serverId: string, waiting: Waiting | undefined, done: (timedOut: boolean) => void): unknown {
  const [error, setError] = useState<unknown>(undefined)
  useEffect(() => {
    if (waiting === undefined) return
    let stopped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const tick = async (): Promise<void> => {
      try {
        const now = await api.oauthStatus(userId, serverId)
        if (stopped) return
        setError(undefined)
        if (connectedSince(now, waiting.before)) { done(false); return }
      } catch (err) {
        // A blip (a restart, the network) while the user signs in is no reason to stop waiting: shown, and asked again.
        if (stopped) return
        setError(err)
      }
      if (Date.now() >= waiting.until) { done(true); return }
      timer = setTimeout(() => { tick() }, POLL_MS)
    }
    timer = setTimeout(() => { tick() }, POLL_MS)
    return () => {
      stopped = true
      if (timer !== undefined) clearTimeout(timer)
    }
  }, [waiting])
  return error
}

/** The OAuth part of a server's row; `refreshed` changes when the list is refreshed (the status is asked again). */
export function OAuthConnection ({ api, userId, server, refreshed }: {
  api: Api
  userId: string | undefined
  server: Server
  refreshed: number
}): JSX.Element | null {
  const auth = server.config.auth
  const serverId = server.serverId
  const status = useLoad(auth === undefined ? undefined : () => api.oauthStatus(userId, serverId), [api, userId, serverId, server.updatedAt, refreshed])
  const [waiting, setWaiting] = useState<Waiting | undefined>(undefined)
  const [timedOut, setTimedOut] = useState(false)
  const action = useAction()
  const pollError = usePoll(api, userId, serverId, waiting, (late) => {
    setWaiting(undefined)
    setTimedOut(late)
    status.reload()
  })
  if (auth === undefined) return null

  const s = status.data
  const connect = async (): Promise<void> => {
    setTimedOut(false)
    const started = await action.run(() => api.authorizeOAuth(userId, serverId))
    if (started === undefined) return
    // A new tab, not this one: the console keeps its session and waits; the gateway's callback page says "connected" there.
    window.open(started.authorizationUrl, '_blank', 'noopener,noreferrer')
    // Until the authorization URL expires (its state lives 10 min on the gateway), at most WAIT_MS.
    const expires = Date.parse(started.expiresAt)
    setWaiting({ authorizationUrl: started.authorizationUrl, before: s, until: Math.min(Date.now() + WAIT_MS, Number.isNaN(expires) ? Infinity : expires) })
  }
  const disconnect = async (): Promise<void> => {
    setWaiting(undefined)
    const done = await action.run(() => api.disconnectOAuth(userId, serverId))
    if (done !== undefined) status.reload()
  }

  const userGrant = auth.grant === 'authorization_code'
  const needsScopes = (s?.requiredScopes ?? []).length > 0
  // "Reconnect" where a connection was lost or lacks scope; a server never connected (whose 401 named
  // its scope, so requiredScopes lists it) gets "Connect". Either starts the same authorization.
  const reconnect = s !== undefined && (s.status === 'refresh_failed' || (s.status === 'connected' && needsScopes) || s.error !== undefined)
  const canConnect = s !== undefined && (s.status !== 'connected' || needsScopes)
  const hasTokens = s !== undefined && (s.status !== 'authorization_required' || s.scopes !== undefined)
  return (
    <div class='oauth stack' data-oauth={serverId}>
      {s !== undefined && (
        <div>
          <span class={`badge oauth-${s.status}`} data-oauth-status={s.status}>{LABELS[s.status]}</span>
          {!userGrant && <span class='muted'> client credentials</span>}
          {s.scopes !== undefined && s.scopes.length > 0 && <div class='oauth-scopes'>scopes: <code>{s.scopes.join(' ')}</code></div>}
          {s.expiresAt !== undefined && <div class='muted oauth-expiry'>token until {formatTime(s.expiresAt)} (refreshed before)</div>}
          {(s.requiredScopes ?? []).length > 0 && <div class='warn oauth-required'>needs scopes: <code>{(s.requiredScopes ?? []).join(' ')}</code></div>}
          {s.error !== undefined && <div class='warn oauth-error'>{s.error}</div>}
        </div>
      )}
      {userGrant && (
        <div class='row'>
          {canConnect && waiting === undefined && (
            <button type='button' class='primary' disabled={action.busy} onClick={() => { connect() }}>{reconnect ? 'Reconnect' : 'Connect'}</button>
          )}
          {hasTokens && <ConfirmButton label='Disconnect' confirm={`Disconnect ${serverId}? Its tokens are revoked and forgotten.`} onConfirm={() => { disconnect() }} />}
        </div>
      )}
      {waiting !== undefined && (
        <div class='oauth-waiting' aria-live='polite'>
          Waiting for the authorization in the other tab… (
          <a href={waiting.authorizationUrl} target='_blank' rel='noopener noreferrer'>open it again</a>)
          {' '}<button type='button' onClick={() => setWaiting(undefined)}>Stop waiting</button>
        </div>
      )}
      {timedOut && <p class='warn'>Not connected in time: Connect again to start a new authorization.</p>}
      <ErrorBox error={status.error ?? action.error ?? pollError} />
    </div>
  )
}
