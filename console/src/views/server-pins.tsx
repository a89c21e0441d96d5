// A server's definition pins in the Servers view (SPEC 18, README "Definition pinning"): a badge in its
// row when a tool's definition changed since it was pinned, and a panel with each tool's status, the
// diff of a changed one, and Accept. Definitions are the third-party server's text: rendered as text
// (Preact escapes it), never as HTML.
import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { describeError } from '../api.js'
import type { Api, PinnedTool, Pins, Server } from '../api.js'
import { diffTokens, lines, shown, words } from '../diff.js'
import { ErrorBox, Loading, Section, formatTime, useAction, useLoad } from '../ui.js'

/** Whose pins: a tenant's (userId), or those of calls without a tenant (undefined, admin). */
export interface PinsTarget { userId: string | undefined, serverId: string }

const changedOf = (pins: Pins): PinnedTool[] => pins.tools.filter((t) => t.status === 'changed')

/** The Pins cell of a server's row: how many tools changed (and the policy), and the button that opens the panel. */
export function PinsCell ({ api, userId, server, refreshed, onOpen }: {
  api: Api
  userId: string | undefined
  server: Server
  /** Changes when the list is refreshed or pins were accepted: asked again. */
  refreshed: number
  onOpen: () => void
}): JSX.Element {
  const serverId = server.serverId
  const oauth = server.config.auth !== undefined
  // Reading pins reads the server's tools: a disabled server, or an OAuth one not connected, is not
  // contacted for a badge nobody asked for (the panel, opened, still reads them).
  const load = async (): Promise<Pins | undefined> => {
    if (!server.config.enabled) return undefined
    if (oauth && (await api.oauthStatus(userId, serverId)).status !== 'connected') return undefined
    return await api.pins(userId, serverId)
  }
  const pins = useLoad(load, [api, userId, serverId, server.updatedAt, refreshed])
  const changed = pins.data === undefined ? 0 : changedOf(pins.data).length
  return (
    <div class='pins-summary' data-pins={serverId}>
      {pins.data !== undefined && changed > 0 && (
        <span class={`badge pins-changed pins-${pins.data.pinning}`} data-pins-changed={changed} title={`pinning: ${pins.data.pinning}`}>
          {changed} changed · {pins.data.pinning === 'hold' ? 'held' : 'warn'}
        </span>
      )}
      {pins.data !== undefined && changed === 0 && (
        <span class='muted'>{pins.data.tools.filter((t) => t.status === 'pinned').length} pinned</span>
      )}
      {pins.error !== undefined && <span class='warn' title={describeError(pins.error).message}>{describeError(pins.error).code}</span>}
      {' '}<button type='button' onClick={onOpen}>Pins</button>
    </div>
  )
}

/** One changed field: a text's word diff inline, a schema's (pretty-printed JSON) line diff. */
function FieldDiff ({ field, before, after }: { field: string, before: unknown, after: unknown }): JSX.Element {
  const a = shown(before)
  const b = shown(after)
  const text = typeof before === 'string' || typeof after === 'string'
  const parts = text ? diffTokens(words(a), words(b)) : diffTokens(lines(a), lines(b))
  return (
    <div class='pin-field' data-field={field}>
      <h4>{field}{before === undefined ? ' (added)' : after === undefined ? ' (removed)' : ''}</h4>
      {text
        ? (
          <p class='diff diff-words'>
            {parts.map((p, i) => p.op === 'same' ? <span key={i}>{p.text}</span> : p.op === 'del' ? <del key={i}>{p.text}</del> : <ins key={i}>{p.text}</ins>)}
          </p>
          )
        : (
          <pre class='diff diff-lines'>
            {parts.flatMap((p, i) => lines(p.text).map((line, k) => (
              <span key={`${i}.${k}`} class={`diff-${p.op}`}>{p.op === 'del' ? '- ' : p.op === 'add' ? '+ ' : '  '}{line.replace(/\n$/, '')}</span>
            )))}
          </pre>
          )}
    </div>
  )
}

function ToolDiff ({ tool }: { tool: PinnedTool }): JSX.Element {
  const { pinned, current } = tool
  if (pinned === null || current === null) {
    return <p class='muted'>No diff: a definition over 16 KiB is pinned by its digest alone ({tool.fields.join(', ')} changed).</p>
  }
  return (
    <div class='stack pin-diff'>
      {tool.fields.map((f) => (
        <FieldDiff key={f} field={f} before={(pinned as Record<string, unknown>)[f]} after={(current as Record<string, unknown>)[f]} />
      ))}
    </div>
  )
}

/** The panel: every tool's status; for a changed one the diff and Accept; Accept all changed. */
export function PinsPanel ({ api, target, onClose, onAccepted }: {
  api: Api
  target: PinsTarget
  onClose: () => void
  onAccepted: () => void
}): JSX.Element {
  const pins = useLoad(() => api.pins(target.userId, target.serverId), [api, target.userId, target.serverId])
  const action = useAction()
  const [note, setNote] = useState<string | undefined>(undefined)

  const accept = async (tools: PinnedTool[]): Promise<void> => {
    setNote(undefined)
    const digests: Record<string, string> = {}
    for (const t of tools) if (t.currentDigest !== null) digests[t.name] = t.currentDigest
    let stale = false
    const done = await action.run(async () => {
      try {
        return await api.acceptPins(target.userId, target.serverId, { tools: tools.map((t) => t.name), digests })
      } catch (err) {
        // The server offers yet another definition than the one shown: nothing was pinned; show the new one.
        if (describeError(err).code !== 'GW_DEFINITION_CHANGED') throw err
        stale = true
        return undefined
      }
    })
    if (stale) {
      setNote('The server changed these definitions again since they were shown: nothing was accepted. Reloaded: review the diff again.')
      pins.reload()
      return
    }
    if (done !== undefined) {
      setNote(`Accepted: ${done.accepted.join(', ')}.`)
      pins.reload()
      onAccepted()
    }
  }

  const data = pins.data
  const changed = data === undefined ? [] : changedOf(data)
  const scope = target.userId === undefined ? 'calls without a tenant' : `tenant ${target.userId}`
  return (
    <div class='pins-panel' data-pins-panel={target.serverId}>
      <Section
        title={`Pins of ${target.serverId}`}
        actions={
          <>
            <Loading when={pins.loading} />
            <button type='button' onClick={() => { setNote(undefined); pins.reload() }}>Reload</button>
            {changed.length > 0 && (
              <button type='button' class='primary' disabled={action.busy} onClick={() => { accept(changed) }}>Accept all changed ({changed.length})</button>
            )}
            <button type='button' onClick={onClose}>Close</button>
          </>
      }
      >
        <div class='stack'>
          <p class='muted'>
            The tool definitions pinned for {scope}, against what <code>{target.serverId}</code> offers now. Under the policy's{' '}
            <code>pinning</code>{data !== undefined && <> (<strong class='pins-policy'>{data.pinning}</strong>)</>}, a changed tool is{' '}
            {data?.pinning === 'hold' ? 'withheld from listings and calls' : 'reported'} until its new definition is accepted.
          </p>
          {note !== undefined && <p class='pins-note' role='status'>{note}</p>}
          <ErrorBox error={pins.error ?? action.error} />
          {data?.unavailable !== null && data?.unavailable !== undefined && <p class='warn'>Not read from the server now: {data.unavailable}</p>}
          {data !== undefined && data.tools.length === 0 && <p class='muted'>No tools.</p>}
          {data !== undefined && data.tools.length > 0 && (
            <ul class='pins'>
              {data.tools.map((t) => (
                <li key={t.name} data-tool={t.name} class={`pin pin-${t.status}`}>
                  <div class='row'>
                    <code>{t.name}</code>
                    <span class={`badge pin-status-${t.status}`} data-status={t.status}>{t.status}</span>
                    {t.pinnedAt !== null && <span class='muted'>pinned {formatTime(t.pinnedAt)}</span>}
                    {t.status === 'changed' && <span class='muted'>changed: {t.fields.join(', ')}</span>}
                    {t.status === 'changed' && (
                      <button type='button' class='primary' disabled={action.busy || t.currentDigest === null} onClick={() => { accept([t]) }}>Accept</button>
                    )}
                  </div>
                  {t.status === 'changed' && <ToolDiff tool={t} />}
                </li>
              ))}
            </ul>
          )}
        </div>
      </Section>
    </div>
  )
}
