import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import type { InvokeBody, InvokeHeld, InvokeOutcome, Tools } from '../api.js'
import { SchemaForm, formFits } from '../schema-form.js'
import type { JsonSchema } from '../schema-form.js'
import { listOf } from '../session.js'
import { ErrorBox, Json, Section, useAction } from '../ui.js'
import type { ViewProps } from '../view.js'
import { AllowListFields } from './tools.js'

interface McpTool { name: string, description?: string, inputSchema?: JsonSchema }

interface Ran {
  status: number
  overheadMs: string | null
  result: InvokeOutcome | InvokeHeld
}

export function PlaygroundView ({ api, tenant, allow, setAllow, go }: ViewProps): JSX.Element {
  const [tools, setTools] = useState<McpTool[] | undefined>(undefined)
  const [listing, setListing] = useState<Tools | undefined>(undefined)
  const [picked, setPicked] = useState('')
  const [args, setArgs] = useState<Record<string, unknown>>({})
  const [raw, setRaw] = useState(false)
  const [rawText, setRawText] = useState('{}')
  const [workspaceId, setWorkspaceId] = useState('')
  const [checkpoint, setCheckpoint] = useState(false)
  const [ran, setRan] = useState<Ran | undefined>(undefined)
  const loading = useAction()
  const invoking = useAction()
  const tool = tools?.find((t) => t.name === picked)
  const userId = tenant === '' ? undefined : tenant

  const load = async (e: Event): Promise<void> => {
    e.preventDefault()
    const result = await loading.run(() => api.tools({ functions: allow.functions, mcp: allow.mcp, format: 'mcp', userId }))
    if (result === undefined) return
    const list = result.tools as unknown as McpTool[]
    setListing(result)
    setTools(list)
    if (!list.some((t) => t.name === picked)) pick(list[0]?.name ?? '')
  }

  const pick = (name: string): void => {
    setPicked(name)
    setArgs({})
    setRawText('{}')
    setRan(undefined)
  }

  const switchMode = (toRaw: boolean): void => {
    if (toRaw) setRawText(JSON.stringify(args, null, 2))
    else {
      try {
        const parsed: unknown = JSON.parse(rawText)
        if (parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)) setArgs(parsed as Record<string, unknown>)
      } catch {}
    }
    setRaw(toRaw)
  }

  const invoke = async (e: Event): Promise<void> => {
    e.preventDefault()
    setRan(undefined)
    await invoking.run(async () => {
      let argumentsValue: InvokeBody['arguments'] = args
      if (raw) {
        try {
          argumentsValue = JSON.parse(rawText) as Record<string, unknown>
        } catch (err) {
          throw new Error(`The arguments are not valid JSON: ${(err as Error).message}`)
        }
      }
      const functions = listOf(allow.functions)
      const mcp = listOf(allow.mcp)
      const body: InvokeBody = {
        name: picked,
        arguments: argumentsValue,
        trace: true,
        allow: { ...(functions.length > 0 ? { functions } : {}), ...(mcp.length > 0 ? { mcp } : {}) },
        ...(userId !== undefined ? { userId } : {}),
        ...(workspaceId !== '' || checkpoint ? { context: { ...(workspaceId !== '' ? { workspaceId } : {}), ...(checkpoint ? { checkpoint } : {}) } } : {})
      }
      const answer = await api.invoke(body)
      setRan({ status: answer.status, overheadMs: answer.headers.get('x-gateway-overhead-ms'), result: answer.body })
    })
  }

  const schema = tool?.inputSchema
  return (
    <div class='stack'>
      <Section title='Tools to offer'>
        <form class='stack' onSubmit={(e) => { load(e) }}>
          <AllowListFields allow={allow} setAllow={setAllow} />
          <div class='row'><button type='submit' class='primary' disabled={loading.busy}>Load tools</button></div>
        </form>
        <ErrorBox error={loading.error} />
        {listing !== undefined && listing.unresolved.length > 0 && <p class='warn'>Unresolved: {listing.unresolved.map((u) => `${u.name} (${u.reason})`).join('; ')}</p>}
      </Section>
      {tools !== undefined && (
        <Section title='Call'>
          {tools.length === 0
            ? <p class='muted'>The allow-list lists no tools.</p>
            : (
              <form class='stack' onSubmit={(e) => { invoke(e) }}>
                <div class='row'>
                  <label class='grow'>Tool
                    <select name='tool' value={picked} onChange={(e) => pick(e.currentTarget.value)}>
                      {tools.map((t) => <option key={t.name} value={t.name}>{t.name}</option>)}
                    </select>
                  </label>
                  <label>Workspace
                    <input name='workspaceId' value={workspaceId} placeholder='default' onInput={(e) => setWorkspaceId(e.currentTarget.value)} />
                  </label>
                  <label class='check'>
                    <input type='checkbox' checked={checkpoint} onChange={(e) => setCheckpoint(e.currentTarget.checked)} /> checkpoint first
                  </label>
                </div>
                {tool?.description !== undefined && <p class='muted tool-description'>{tool.description}</p>}
                <div class='tabs' role='tablist'>
                  <button
                    type='button'
                    role='tab'
                    aria-selected={!raw}
                    class={raw ? '' : 'active'}
                    disabled={!formFits(schema)}
                    onClick={() => switchMode(false)}
                  >
                    Form
                  </button>
                  <button type='button' role='tab' aria-selected={raw} class={raw ? 'active' : ''} onClick={() => switchMode(true)}>JSON</button>
                </div>
                {raw || !formFits(schema) || schema === undefined
                  ? (
                    <label>Arguments (JSON)
                      <textarea name='arguments' class='code' rows={8} value={rawText} onInput={(e) => setRawText(e.currentTarget.value)} />
                    </label>
                    )
                  : <SchemaForm schema={schema} value={args} onChange={setArgs} />}
                <div class='row'>
                  <button type='submit' class='primary' id='invoke' disabled={invoking.busy || picked === ''}>{invoking.busy ? 'Running…' : 'Invoke'}</button>
                </div>
              </form>
              )}
          <ErrorBox error={invoking.error} />
        </Section>
      )}
      {ran !== undefined && <Result ran={ran} onApprovals={() => go('approvals')} />}
    </div>
  )
}

function Result ({ ran, onApprovals }: { ran: Ran, onApprovals: () => void }): JSX.Element {
  const r = ran.result
  if ('status' in r && r.status === 'pending') {
    return (
      <Section title='Held for approval'>
        <p id='invoke-pending'>
          The tool policy holds this call for a person's approval: <code>{r.approvalId}</code> (call <code>{r.callId}</code>). It has not run.
        </p>
        <button type='button' onClick={onApprovals}>Open approvals</button>
      </Section>
    )
  }
  const result = r as InvokeOutcome
  return (
    <Section title='Result'>
      <div class='stack' id='invoke-result'>
        <dl class='facts'>
          <div><dt>isError</dt><dd class={result.isError ? 'bad' : 'good'} id='result-is-error'>{String(result.isError)}</dd></div>
          <div><dt>durationMs</dt><dd id='result-duration'>{result.durationMs}</dd></div>
          <div><dt>x-gateway-overhead-ms</dt><dd id='result-overhead'>{ran.overheadMs ?? '—'}</dd></div>
          <div><dt>route</dt><dd>{result.route}</dd></div>
          <div><dt>callId</dt><dd><code>{result.callId}</code></dd></div>
          {result.truncated && <div><dt>truncated</dt><dd>true</dd></div>}
          {result.checkpointId !== undefined && <div><dt>checkpointId</dt><dd><code>{result.checkpointId}</code></dd></div>}
        </dl>
        {result.error !== null && <div class='error'><span class='error-code'>{result.error.code}</span> {result.error.message}</div>}
        <h3>Output</h3>
        <pre class='json output' id='result-output'>{result.output}</pre>
        <details><summary>Trace</summary><Json value={result.trace} label='trace' /></details>
      </div>
    </Section>
  )
}
