import type { JSX } from 'preact'
import { useEffect, useRef, useState } from 'preact/hooks'
import type { Api, Cluster, Status } from '../api.js'
import { ErrorBox, Json, Loading, Section, formatTime, useLoad } from '../ui.js'
import type { ViewProps } from '../view.js'

const SAMPLE_MS = 5000
const KEEP = 37

/** The sum of every gateway_invocations_total series in a Prometheus text exposition. */
function invocationsTotal (text: string): number | undefined {
  let sum: number | undefined
  for (const line of text.split('\n')) {
    const m = /^gateway_invocations_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)/.exec(line)
    if (m !== null) sum = (sum ?? 0) + Number(m[1])
  }
  return sum
}

interface Point { label: string, value: number }

/** A bar chart as inline SVG (no chart library). */
function BarChart ({ points, unit, title }: { points: Point[], unit: string, title: string }): JSX.Element {
  const width = 600
  const height = 140
  const max = Math.max(1, ...points.map((p) => p.value))
  const step = points.length > 0 ? width / points.length : 0
  return (
    <figure class='chart'>
      <div class='chart-max'>{max.toFixed(max < 10 ? 1 : 0)} {unit}</div>
      <svg viewBox={`0 0 ${width} ${height}`} role='img' aria-label={title} preserveAspectRatio='none'>
        <line x1={0} y1={height - 1} x2={width} y2={height - 1} class='axis' />
        {points.map((p, i) => {
          const h = (p.value / max) * (height - 4)
          return (
            <rect key={i} x={i * step + 1} y={height - 1 - h} width={Math.max(1, step - 2)} height={h} class='bar-rect'>
              <title>{`${p.label}: ${p.value.toFixed(1)} ${unit}`}</title>
            </rect>
          )
        })}
      </svg>
      <div class='chart-axis'><span>{points[0]?.label ?? ''}</span><span>{points.at(-1)?.label ?? ''}</span></div>
      <figcaption>{title}</figcaption>
    </figure>
  )
}

/** Calls per minute from /metrics, sampled while the page is open. */
function MetricsRate ({ api }: { api: Api }): JSX.Element {
  const samples = useRef<Array<{ at: number, total: number }>>([])
  const [points, setPoints] = useState<Point[]>([])
  const [error, setError] = useState<unknown>(undefined)
  useEffect(() => {
    let stopped = false
    const sample = async (): Promise<void> => {
      try {
        const total = invocationsTotal(await api.metrics())
        if (stopped) return
        setError(undefined)
        if (total === undefined) return
        const list = [...samples.current, { at: Date.now(), total }].slice(-KEEP)
        samples.current = list
        const rates: Point[] = []
        for (let i = 1; i < list.length; i++) {
          const a = list[i - 1]
          const b = list[i]
          if (a === undefined || b === undefined) continue
          rates.push({ label: new Date(b.at).toLocaleTimeString(), value: Math.max(0, b.total - a.total) * 60_000 / Math.max(1, b.at - a.at) })
        }
        setPoints(rates)
      } catch (err) {
        if (!stopped) setError(err)
      }
    }
    sample()
    const timer = setInterval(() => { sample() }, SAMPLE_MS)
    return () => { stopped = true; clearInterval(timer) }
  }, [api])
  return (
    <div>
      <ErrorBox error={error} />
      {points.length === 0 && error === undefined && <p class='muted'>Sampling /metrics every {SAMPLE_MS / 1000} s…</p>}
      {points.length > 0 && <BarChart points={points} unit='calls/min' title={`Invocations per minute, all tenants (gateway_invocations_total, sampled every ${SAMPLE_MS / 1000} s)`} />}
    </div>
  )
}

/** Calls per minute over the last 30 minutes from a tenant's journal (its newest 500 entries). */
function JournalRate ({ api, userId }: { api: Api, userId: string }): JSX.Element {
  const since = useRef(new Date(Date.now() - 30 * 60_000).toISOString())
  const page = useLoad(() => api.invocations(userId, { since: since.current, limit: 500 }), [api, userId])
  const now = Date.now()
  const points: Point[] = []
  for (let i = 29; i >= 0; i--) {
    const start = now - (i + 1) * 60_000
    points.push({ label: new Date(start + 60_000).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' }), value: 0 })
  }
  for (const e of page.data?.invocations ?? []) {
    const age = Math.floor((now - Date.parse(e.ts)) / 60_000)
    const p = points[29 - age]
    if (p !== undefined) p.value++
  }
  return (
    <div>
      <ErrorBox error={page.error} />
      {page.data !== undefined && <BarChart points={points} unit='calls' title={`Calls per minute of ${userId}, last 30 minutes (journal)`} />}
    </div>
  )
}

function isolationOf (i: NonNullable<Status['sandbox']['isolation']>): string {
  const yes = (b: boolean): string => b ? 'yes' : 'no'
  return `uid per tenant ${yes(i.uidPerTenant)}, cgroup ${i.cgroup}, rlimits ${yes(i.rlimits)}, seccomp ${yes(i.seccomp)}`
}

function InstanceRow ({ i, self }: { i: Cluster['instances'][number], self: string | null }): JSX.Element {
  return (
    <tr class={i.id === self ? 'self' : ''}>
      <td>{i.id}{i.id === self ? ' (this one)' : ''}</td><td>{i.url}</td><td>{new Date(i.startedAt).toLocaleString()}</td>
      <td>{new Date(i.lastSeenAt).toLocaleTimeString()}</td><td>{i.processes}</td>
    </tr>
  )
}

export function StatusView ({ api, role, tenant }: ViewProps): JSX.Element {
  const ready = useLoad(() => api.readiness(), [api])
  const status = useLoad(role === 'admin' ? () => api.status() : undefined, [api, role])
  const cluster = useLoad(role === 'admin' ? () => api.cluster() : undefined, [api, role])
  const s = status.data
  const journalUser = tenant !== '' ? tenant : role === 'admin' ? '_global' : ''
  return (
    <div class='stack'>
      <Section title='Readiness' actions={<><Loading when={ready.loading} /><button type='button' onClick={() => ready.reload()}>Refresh</button></>}>
        <ErrorBox error={ready.error} />
        {ready.data !== undefined && (
          <dl class='facts' id='readiness'>
            <div><dt>ready</dt><dd class={ready.data.ready ? 'good' : 'bad'}>{String(ready.data.ready)}</dd></div>
            <div><dt>registry</dt><dd>{ready.data.registry.backend} ({ready.data.registry.reachable ? 'reachable' : 'unreachable'})</dd></div>
            <div><dt>sandbox</dt><dd>{ready.data.sandbox.mode} {ready.data.sandbox.ok ? 'ok' : `not ok: ${ready.data.sandbox.reason}`}</dd></div>
            <div>
              <dt>sources</dt>
              <dd>{ready.data.sources.builtin} built-in, {ready.data.sources.functions} functions, {ready.data.sources.localMcpTools} local MCP tools</dd>
            </div>
            {ready.data.reasons.length > 0 && <div><dt>reasons</dt><dd>{ready.data.reasons.join('; ')}</dd></div>}
            {ready.data.sandbox.warning !== null && <div><dt>warning</dt><dd class='warn'>{ready.data.sandbox.warning}</dd></div>}
          </dl>
        )}
      </Section>
      <Section title='Invocation rate'>
        {role !== 'approver' && <MetricsRate api={api} />}
        {journalUser !== '' && <JournalRate api={api} userId={journalUser} />}
      </Section>
      {role === 'admin' && (
        <Section
          title='Pool and sandbox'
          actions={<><Loading when={status.loading} /><button type='button' onClick={() => status.reload()}>Refresh</button></>}
        >
          <ErrorBox error={status.error} />
          {s !== undefined && (
            <div class='stack'>
              <dl class='facts' id='status'>
                <div><dt>clients</dt><dd>{s.connectedClients} connected of {s.totalClients} ({s.globalClients} global, {s.userClients} tenant)</dd></div>
                <div><dt>remote tools</dt><dd>{s.totalTools}</dd></div>
                <div><dt>registry</dt><dd>{s.registry.backend}{s.registry.secretsEncrypted ? ', secrets encrypted' : ''}</dd></div>
                <div><dt>sandbox</dt><dd>{s.sandbox.mode}</dd></div>
                {s.sandbox.isolation !== null && (
                  <div><dt>isolation</dt><dd>{isolationOf(s.sandbox.isolation)}</dd></div>
                )}
                <div><dt>retries</dt><dd>{s.remoteMcp.retries}</dd></div>
                <div><dt>open breakers</dt><dd>{s.remoteMcp.openBreakers}</dd></div>
              </dl>
              {s.remoteMcp.breakers.length > 0 && (
                <div class='scroll'>
                  <table>
                    <caption>Circuit breakers</caption>
                    <thead><tr><th>Server</th><th>Pool</th><th>State</th><th>Failures</th><th>Retry at</th><th>Last error</th></tr></thead>
                    <tbody>
                      {s.remoteMcp.breakers.map((b) => (
                        <tr key={b.server}>
                          <td>{b.server}</td><td>{b.pool}</td><td>{b.state}</td>
                          <td>{b.consecutiveFailures}</td><td>{formatTime(b.retryAt)}</td><td>{b.lastError ?? ''}</td>
                        </tr>
                      ))}
                    </tbody>
                  </table>
                </div>
              )}
              <details><summary>Clients</summary><Json value={s.clients} label='clients' /></details>
            </div>
          )}
        </Section>
      )}
      {role === 'admin' && (
        <Section title='Instances'>
          <ErrorBox error={cluster.error} />
          {cluster.data !== undefined && cluster.data.instances.length === 0 && <p class='muted'>One instance, no cluster membership (no Redis).</p>}
          {cluster.data !== undefined && cluster.data.instances.length > 0 && (
            <div class='scroll'>
              <table id='instances'>
                <thead><tr><th>Instance</th><th>URL</th><th>Started</th><th>Last seen</th><th>Processes</th></tr></thead>
                <tbody>{cluster.data.instances.map((i) => <InstanceRow key={i.id} i={i} self={cluster.data?.self ?? null} />)}</tbody>
              </table>
            </div>
          )}
        </Section>
      )}
    </div>
  )
}
