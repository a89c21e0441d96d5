import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import { urlOf } from '../api.js'
import type { Invocation } from '../api.js'
import { ErrorBox, Json, Loading, Section, copyText, formatTime, shellQuote, useAction, useLoad } from '../ui.js'
import type { ViewProps } from '../view.js'

interface Filters { tool: string, isError: '' | 'true' | 'false', since: string, until: string, limit: string }
const NO_FILTERS: Filters = { tool: '', isError: '', since: '', until: '', limit: '20' }

/** The call again, as curl: the key is a variable, never the one of this session. */
function curlOf (entry: Invocation, origin: string): string {
  const body: Record<string, unknown> = { name: entry.name }
  const args = entry.arguments
  if (args !== null && typeof args === 'object' && !('$capped' in args)) body.arguments = args
  if (entry.userId !== null) body.userId = entry.userId
  return [
    `curl -sS -X POST ${shellQuote(`${origin}${urlOf('invokeTool')}`)}`,
    '  -H "Authorization: Bearer $TOOL_GATEWAY_KEY"',
    "  -H 'content-type: application/json'",
    `  -d ${shellQuote(JSON.stringify(body))}`
  ].join(' \\\n')
}

/**
 * A page of entries as a tree: a code-mode script's inner calls (their parentCallId) right under the
 * script's entry, oldest first; an inner call whose script is on another page stays where it is.
 */
function journalTree (entries: readonly Invocation[]): Array<{ entry: Invocation, depth: number }> {
  const onPage = new Set(entries.map((e) => e.callId))
  const children = new Map<string, Invocation[]>()
  for (const e of entries) {
    const parent = e.parentCallId ?? null
    if (parent !== null && onPage.has(parent)) children.set(parent, [...children.get(parent) ?? [], e])
  }
  const rows: Array<{ entry: Invocation, depth: number }> = []
  for (const e of entries) {
    const parent = e.parentCallId ?? null
    if (parent !== null && onPage.has(parent)) continue
    rows.push({ entry: e, depth: 0 })
    for (const child of [...children.get(e.callId) ?? []].reverse()) rows.push({ entry: child, depth: 1 })
  }
  return rows
}

function Entry ({ entry }: { entry: Invocation }): JSX.Element {
  const [copied, setCopied] = useState<boolean | undefined>(undefined)
  const curl = curlOf(entry, location.origin)
  return (
    <div class='stack' id='journal-entry'>
      <dl class='facts'>
        <div><dt>callId</dt><dd><code>{entry.callId}</code></dd></div>
        <div><dt>tool</dt><dd>{entry.name}</dd></div>
        <div><dt>route</dt><dd>{entry.route ?? '—'}{entry.serverId !== null ? ` (${entry.serverId})` : ''}</dd></div>
        <div><dt>isError</dt><dd class={entry.isError ? 'bad' : 'good'}>{String(entry.isError)}</dd></div>
        <div><dt>durationMs</dt><dd>{entry.durationMs}</dd></div>
        <div><dt>toolMs</dt><dd>{entry.toolMs}</dd></div>
        <div><dt>ended</dt><dd>{formatTime(entry.ts)}</dd></div>
        <div><dt>instance</dt><dd>{entry.instance}</dd></div>
        {entry.approvalId !== null && <div><dt>approval</dt><dd><code>{entry.approvalId}</code></dd></div>}
        {entry.checkpointId !== null && <div><dt>checkpoint</dt><dd><code>{entry.checkpointId}</code></dd></div>}
        {(entry.parentCallId ?? null) !== null && <div><dt>script</dt><dd><code>{entry.parentCallId}</code></dd></div>}
      </dl>
      {entry.error !== null && <div class='error'><span class='error-code'>{entry.error.code}</span> {entry.error.message}</div>}
      <h3>Arguments</h3><Json value={entry.arguments} label='arguments' />
      <h3>Output</h3><Json value={entry.output ?? '—'} label='output' />
      <details><summary>Trace</summary><Json value={entry.trace} label='trace' /></details>
      <h3>As curl</h3>
      <pre class='json' id='curl'>{curl}</pre>
      <div class='row'>
        <button type='button' onClick={() => { copyText(curl).then(setCopied) }}>Copy as curl</button>
        {copied === true && <span class='good'>Copied.</span>}
        {copied === false && <span class='muted'>The browser refused the clipboard: select the text above.</span>}
      </div>
    </div>
  )
}

export function JournalView ({ api, role, tenant }: ViewProps): JSX.Element {
  const [draft, setDraft] = useState<Filters>(NO_FILTERS)
  const [filters, setFilters] = useState<Filters>(NO_FILTERS)
  // The cursors of the pages before this one, to go back; undefined is the first page.
  const [cursors, setCursors] = useState<Array<string | undefined>>([undefined])
  const [open, setOpen] = useState<Invocation | undefined>(undefined)
  const opening = useAction()
  const userId = tenant !== '' ? tenant : role === 'admin' ? '_global' : ''
  const cursor = cursors.at(-1)
  const page = useLoad(userId === ''
    ? undefined
    : () => api.invocations(userId, {
        tool: filters.tool,
        isError: filters.isError,
        since: filters.since,
        until: filters.until,
        limit: filters.limit,
        cursor
      }), [api, userId, filters, cursor])

  const apply = (e: Event): void => {
    e.preventDefault()
    setFilters(draft)
    setCursors([undefined])
  }
  const openEntry = async (callId: string): Promise<void> => {
    const entry = await opening.run(() => api.invocation(userId, callId))
    if (entry !== undefined) setOpen(entry)
  }

  if (userId === '') return <p class='muted'>Pick a tenant.</p>
  return (
    <div class='stack'>
      <Section title={userId === '_global' ? 'Calls that named no tenant (_global)' : `Journal of ${userId}`} actions={<><Loading when={page.loading} /><button type='button' onClick={() => page.reload()}>Refresh</button></>}>
        <form class='row filters' onSubmit={apply}>
          <label>Tool<input name='tool' value={draft.tool} onInput={(e) => setDraft({ ...draft, tool: e.currentTarget.value })} /></label>
          <label>Outcome
            <select name='isError' value={draft.isError} onChange={(e) => setDraft({ ...draft, isError: e.currentTarget.value as Filters['isError'] })}>
              <option value=''>any</option><option value='false'>succeeded</option><option value='true'>failed</option>
            </select>
          </label>
          <label>Since
            <input name='since' value={draft.since} placeholder='2026-01-31T12:00:00Z' onInput={(e) => setDraft({ ...draft, since: e.currentTarget.value })} />
          </label>
          <label>Until<input name='until' value={draft.until} onInput={(e) => setDraft({ ...draft, until: e.currentTarget.value })} /></label>
          <label>Per page
            <input name='limit' inputMode='numeric' value={draft.limit} onInput={(e) => setDraft({ ...draft, limit: e.currentTarget.value })} />
          </label>
          <button type='submit' class='primary'>Filter</button>
        </form>
        <ErrorBox error={page.error} />
        {page.data !== undefined && (
          <>
            <div class='scroll'>
              <table id='journal'>
                <thead><tr><th>Ended</th><th>Tool</th><th>Route</th><th>Outcome</th><th>ms</th><th>callId</th></tr></thead>
                <tbody>
                  {journalTree(page.data.invocations).map(({ entry: e, depth }) => (
                    <tr
                      key={`${e.callId}:${e.ts}`} class={depth > 0 ? 'clickable inner-call' : 'clickable'} tabIndex={0}
                      onClick={() => { openEntry(e.callId) }} onKeyDown={(k) => { if (k.key === 'Enter') openEntry(e.callId) }}
                    >
                      <td>{formatTime(e.ts)}</td><td>{depth > 0 ? '↳ ' : ''}<code>{e.name}</code></td><td>{e.route ?? '—'}</td>
                      <td class={e.isError ? 'bad' : 'good'}>{e.isError ? (e.error?.code ?? 'error') : 'ok'}</td>
                      <td>{Math.round(e.durationMs)}</td><td><code>{e.callId}</code></td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            {page.data.invocations.length === 0 && <p class='muted'>No entries on this page.</p>}
            <div class='row pager'>
              <button type='button' disabled={cursors.length <= 1} onClick={() => setCursors(cursors.slice(0, -1))}>Newer</button>
              <span class='muted'>page {cursors.length}</span>
              <button
                type='button'
                disabled={page.data.nextCursor === null}
                onClick={() => { const next = page.data?.nextCursor; if (next) setCursors([...cursors, next]) }}
              >
                Older
              </button>
            </div>
          </>
        )}
      </Section>
      <ErrorBox error={opening.error} />
      {open !== undefined && (
        <Section title={`Entry ${open.callId}`} actions={<button type='button' onClick={() => setOpen(undefined)}>Close</button>}>
          <Entry entry={open} />
        </Section>
      )}
    </div>
  )
}
