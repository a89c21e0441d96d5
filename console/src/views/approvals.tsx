import type { JSX } from 'preact'
import { useEffect, useState } from 'preact/hooks'
import type { ApprovalT } from '../api.js'
import { ErrorBox, Json, Loading, Section, formatTime, useAction, useLoad } from '../ui.js'
import type { ViewProps } from '../view.js'

const REFRESH_MS = 3000

function Pending ({ approval, canDecide, onDecide }: {
  approval: ApprovalT
  canDecide: boolean
  onDecide: (decision: 'approve' | 'deny', reason: string) => void
}): JSX.Element {
  const [reason, setReason] = useState('')
  return (
    <li class='approval card' data-approval={approval.approvalId}>
      <div class='row'>
        <strong><code>{approval.name}</code></strong>
        <span class='muted'>rule <code>{approval.rule}</code></span>
        <span class='muted'>call <code>{approval.callId}</code></span>
        {approval.userId !== null && <span class='badge'>{approval.userId}</span>}
      </div>
      <div class='muted'>held {formatTime(approval.createdAt)}, expires {formatTime(approval.expiresAt)}</div>
      <Json value={approval.arguments} label='arguments' />
      {canDecide && (
        <div class='row'>
          <label class='grow'>Reason
            <input
              name='reason'
              value={reason}
              maxLength={2000}
              onInput={(e) => setReason(e.currentTarget.value)}
              placeholder='told to the model when denied'
            />
          </label>
          <button type='button' class='primary' onClick={() => onDecide('approve', reason)}>Approve</button>
          <button type='button' class='danger' onClick={() => onDecide('deny', reason)}>Deny</button>
        </div>
      )}
    </li>
  )
}

export function ApprovalsView ({ api, role, tenant }: ViewProps): JSX.Element {
  const [auto, setAuto] = useState(true)
  const [decided, setDecided] = useState<ApprovalT[]>([])
  const userId = role === 'admin' && tenant !== '' ? tenant : undefined
  const list = useLoad(() => api.approvals(userId), [api, userId])
  const action = useAction()
  const canDecide = role !== 'tenant'

  useEffect(() => {
    if (!auto) return
    const timer = setInterval(list.reload, REFRESH_MS)
    return () => clearInterval(timer)
  }, [auto, list.reload])

  const decide = async (approvalId: string, decision: 'approve' | 'deny', reason: string): Promise<void> => {
    const result = await action.run(() => api.decide(approvalId, { decision, ...(reason !== '' ? { reason } : {}) }))
    if (result !== undefined) setDecided([result, ...decided].slice(0, 20))
    list.reload()
  }

  const pending = list.data?.approvals ?? []
  const actions = (
    <>
      <Loading when={list.loading} />
      <label class='check'><input type='checkbox' checked={auto} onChange={(e) => setAuto(e.currentTarget.checked)} /> auto-refresh</label>
      <button type='button' onClick={() => list.reload()}>Refresh</button>
    </>
  )
  return (
    <div class='stack'>
      <Section title='Pending' actions={actions}>
        <p class='muted'>
          {role === 'admin' ? (userId === undefined ? 'Calls that named no tenant; pick a tenant above for its calls.' : `Calls of ${userId}.`) : `Calls of ${tenant}.`}
          {!canDecide && ' A tenant key reads approvals; an approver or admin key decides them.'}
        </p>
        <ErrorBox error={list.error ?? action.error} />
        {list.data !== undefined && pending.length === 0 && <p class='muted' id='no-approvals'>Nothing awaits approval.</p>}
        <ul class='approvals'>
          {pending.map((a) => <Pending key={a.approvalId} approval={a} canDecide={canDecide} onDecide={(d, r) => { decide(a.approvalId, d, r) }} />)}
        </ul>
      </Section>
      {decided.length > 0 && (
        <Section title='Decided here'>
          <ul class='approvals'>
            {decided.map((a) => (
              <li key={a.approvalId} class='approval card decided' data-approval={a.approvalId}>
                <div class='row'>
                  <strong><code>{a.name}</code></strong>
                  <span class={a.status === 'approved' ? 'good' : 'bad'}>{a.status}</span>
                  {a.reason !== null && <span class='muted'>“{a.reason}”</span>}
                </div>
                {a.result !== null && <pre class='json output'>{a.result.output}</pre>}
              </li>
            ))}
          </ul>
        </Section>
      )}
    </div>
  )
}
