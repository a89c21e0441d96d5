import { useCallback, useEffect, useRef, useState } from 'preact/hooks'
import type { ComponentChildren, JSX } from 'preact'
import { describeError } from './api.js'
import { clearSession, loadSession } from './session.js'

export interface Loaded<T> {
  data: T | undefined
  error: unknown
  loading: boolean
  reload: () => void
}

/** Runs `load` now and whenever `deps` change; a later run's answer replaces an earlier one's, never the reverse. */
export function useLoad<T> (load: (() => Promise<T>) | undefined, deps: unknown[]): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined)
  const [error, setError] = useState<unknown>(undefined)
  const [loading, setLoading] = useState(false)
  const [tick, setTick] = useState(0)
  const run = useRef(0)
  useEffect(() => {
    if (load === undefined) {
      setData(undefined)
      setError(undefined)
      return
    }
    const mine = ++run.current
    setLoading(true)
    load().then((value) => {
      if (mine !== run.current) return
      setData(value)
      setError(undefined)
    }, (err: unknown) => {
      if (mine !== run.current) return
      setError(err)
    }).finally(() => { if (mine === run.current) setLoading(false) })
  }, [...deps, tick])
  const reload = useCallback(() => setTick((t) => t + 1), [])
  return { data, error, loading, reload }
}

/** Runs an action (a button's), keeping its error and whether it runs. */
export function useAction (): { busy: boolean, error: unknown, run: <T>(fn: () => Promise<T>) => Promise<T | undefined>, clear: () => void } {
  const [busy, setBusy] = useState(false)
  const [error, setError] = useState<unknown>(undefined)
  const run = useCallback(async <T, >(fn: () => Promise<T>): Promise<T | undefined> => {
    setBusy(true)
    setError(undefined)
    try {
      return await fn()
    } catch (err) {
      setError(err)
      return undefined
    } finally {
      setBusy(false)
    }
  }, [])
  return { busy, error, run, clear: () => setError(undefined) }
}

/** An error as the API said it: its code and its message. */
export function ErrorBox ({ error }: { error: unknown }): JSX.Element | null {
  if (error === undefined || error === null) return null
  const { code, message } = describeError(error)
  return (
    <div class='error' role='alert'>
      <span class='error-code'>{code}</span> <span class='error-message'>{message}</span>
      {code === 'GW_UNAUTHORIZED' && loadSession() !== undefined && (
        // The key stopped working (revoked, rotated, or the gateway restarted with other keys).
        <button type='button' class='relogin' onClick={() => { clearSession(); location.reload() }}>Log in again</button>
      )}
    </div>
  )
}

export function Json ({ value, label }: { value: unknown, label?: string }): JSX.Element {
  const text = typeof value === 'string' ? value : JSON.stringify(value, null, 2)
  return <pre class='json' aria-label={label}>{text}</pre>
}

export function Section ({ title, actions, children }: { title: string, actions?: ComponentChildren, children: ComponentChildren }): JSX.Element {
  return (
    <section class='card'>
      <header class='card-head'><h2>{title}</h2><div class='card-actions'>{actions}</div></header>
      {children}
    </section>
  )
}

export function Loading ({ when }: { when: boolean }): JSX.Element | null {
  return when ? <span class='loading' aria-live='polite'>Loading…</span> : null
}

/** A destructive button that asks for a second click instead of a browser dialog. */
export function ConfirmButton ({ label, confirm, onConfirm, disabled }: {
  label: string
  confirm: string
  onConfirm: () => void
  disabled?: boolean
}): JSX.Element {
  const [asking, setAsking] = useState(false)
  if (!asking) return <button type='button' class='danger' disabled={disabled} onClick={() => setAsking(true)}>{label}</button>
  return (
    <span class='confirm'>
      <span>{confirm}</span>
      <button type='button' class='danger' onClick={() => { setAsking(false); onConfirm() }}>Yes, {label.toLowerCase()}</button>
      <button type='button' onClick={() => setAsking(false)}>Cancel</button>
    </span>
  )
}

export function formatBytes (n: number): string {
  if (n < 1024) return `${n} B`
  const units = ['KiB', 'MiB', 'GiB', 'TiB']
  let v = n / 1024
  let i = 0
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i++ }
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i] ?? ''}`
}

export function formatTime (iso: string | null | undefined): string {
  if (iso === null || iso === undefined) return '—'
  const d = new Date(iso)
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleString()
}

/** Copies text; where the clipboard is refused (no secure context) the text stays selectable on the page. */
export async function copyText (text: string): Promise<boolean> {
  try {
    await navigator.clipboard.writeText(text)
    return true
  } catch {
    return false
  }
}

/** Single-quotes a string for a POSIX shell. */
export function shellQuote (s: string): string {
  return `'${s.replace(/'/g, "'\\''")}'`
}
