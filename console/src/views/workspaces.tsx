import type { JSX } from 'preact'
import { useState } from 'preact/hooks'
import type { Api, Workspace } from '../api.js'
import { ConfirmButton, ErrorBox, Loading, Section, formatBytes, formatTime, useAction, useLoad } from '../ui.js'
import type { ViewProps } from '../view.js'

/** Saves a blob as a file through a temporary object URL (no navigation, nothing fetched again). */
function saveBlob (blob: Blob, name: string): void {
  const url = URL.createObjectURL(blob)
  const a = document.createElement('a')
  a.href = url
  a.download = name
  document.body.append(a)
  a.click()
  a.remove()
  setTimeout(() => URL.revokeObjectURL(url), 10_000)
}

function Usage ({ w }: { w: Workspace }): JSX.Element {
  const share = w.quotaBytes > 0 ? Math.min(1, w.bytes / w.quotaBytes) : 0
  return (
    <div class='usage' title={`${w.bytes} of ${w.quotaBytes} bytes`}>
      <div class='bar'><div class={share > 0.9 ? 'fill full' : 'fill'} style={{ width: `${(share * 100).toFixed(1)}%` }} /></div>
      <span>{formatBytes(w.bytes)} / {formatBytes(w.quotaBytes)}</span>
    </div>
  )
}

function Checkpoints ({ api, userId, workspaceId, onChange }: { api: Api, userId: string, workspaceId: string, onChange: () => void }): JSX.Element {
  const list = useLoad(() => api.checkpoints(userId, workspaceId), [api, userId, workspaceId])
  const [label, setLabel] = useState('')
  const [restored, setRestored] = useState<string | undefined>(undefined)
  const action = useAction()
  const create = async (e: Event): Promise<void> => {
    e.preventDefault()
    const made = await action.run(() => api.checkpoint(userId, workspaceId, label.trim()))
    if (made !== undefined) { setLabel(''); list.reload() }
  }
  const restore = async (checkpointId: string): Promise<void> => {
    const done = await action.run(() => api.restore(userId, workspaceId, checkpointId))
    if (done !== undefined) { setRestored(checkpointId); onChange() }
  }
  const remove = async (checkpointId: string): Promise<void> => {
    await action.run(() => api.deleteCheckpoint(userId, workspaceId, checkpointId))
    list.reload()
  }
  return (
    <div class='stack checkpoints' data-workspace={workspaceId}>
      <form class='row' onSubmit={(e) => { create(e) }}>
        <label class='grow'>Label
          <input name='label' value={label} maxLength={200} onInput={(e) => setLabel(e.currentTarget.value)} placeholder='before the refactor' />
        </label>
        <button type='submit' class='primary' disabled={action.busy}>Create checkpoint</button>
        <Loading when={list.loading} />
      </form>
      <ErrorBox error={list.error ?? action.error} />
      {restored !== undefined && <p class='good' id='restored'>Restored checkpoint <code>{restored}</code>.</p>}
      {list.data !== undefined && list.data.checkpoints.length === 0 && <p class='muted'>No checkpoints.</p>}
      {list.data !== undefined && list.data.checkpoints.length > 0 && (
        <div class='scroll'>
          <table>
            <thead><tr><th>Checkpoint</th><th>Taken</th><th>Label</th><th>Files</th><th>Size</th><th /></tr></thead>
            <tbody>
              {list.data.checkpoints.map((c) => (
                <tr key={c.checkpointId} data-checkpoint={c.checkpointId}>
                  <td><code>{c.checkpointId}</code></td><td>{formatTime(c.createdAt)}</td><td>{c.label ?? ''}</td>
                  <td>{c.files}</td><td>{formatBytes(c.bytes)}</td>
                  <td class='actions'>
                    <ConfirmButton label='Restore' confirm='Replace the workspace with this checkpoint?' onConfirm={() => { restore(c.checkpointId) }} />
                    <ConfirmButton label='Delete' confirm='Delete this checkpoint?' onConfirm={() => { remove(c.checkpointId) }} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  )
}

function Upload ({ api, userId, onDone }: { api: Api, userId: string, onDone: () => void }): JSX.Element {
  const [workspaceId, setWorkspaceId] = useState('')
  const [file, setFile] = useState<File | undefined>(undefined)
  const [mode, setMode] = useState<'replace' | 'merge'>('replace')
  const [done, setDone] = useState<string | undefined>(undefined)
  const action = useAction()
  const submit = async (e: Event): Promise<void> => {
    e.preventDefault()
    setDone(undefined)
    if (file === undefined) return
    const type = /\.tar$/i.test(file.name) ? 'application/x-tar' : 'application/gzip'
    const id = workspaceId.trim() === '' ? file.name.replace(/\.(tar\.gz|tgz|tar)$/i, '') : workspaceId.trim()
    const result = await action.run(() => api.upload(userId, id, file, type, mode))
    if (result !== undefined) {
      setDone(`Uploaded ${result.workspaceId}: ${result.files} entries, ${formatBytes(result.bytes)}`)
      onDone()
    }
  }
  return (
    <form class='stack upload' onSubmit={(e) => { submit(e) }}>
      <div class='row'>
        <label>Workspace id
          <input name='workspaceId' value={workspaceId} placeholder='from the file name' onInput={(e) => setWorkspaceId(e.currentTarget.value)} />
        </label>
        <label class='grow'>Archive (tar.gz or tar)
          <input
            name='archive'
            type='file'
            accept='.tar.gz,.tgz,.tar,application/gzip,application/x-tar'
            onChange={(e) => setFile(e.currentTarget.files?.[0])}
          />
        </label>
        <label>Mode
          <select name='mode' value={mode} onChange={(e) => setMode(e.currentTarget.value as 'replace' | 'merge')}>
            <option value='replace'>replace</option><option value='merge'>merge</option>
          </select>
        </label>
        <button type='submit' class='primary' disabled={action.busy || file === undefined}>Upload</button>
      </div>
      <ErrorBox error={action.error} />
      {done !== undefined && <p class='good' id='uploaded'>{done}</p>}
    </form>
  )
}

export function WorkspacesView ({ api, tenant }: ViewProps): JSX.Element {
  const list = useLoad(tenant === '' ? undefined : () => api.workspaces(tenant), [api, tenant])
  const [open, setOpen] = useState<string | undefined>(undefined)
  const action = useAction()
  if (tenant === '') return <p class='muted'>Pick a tenant: workspaces belong to one.</p>

  const download = async (workspaceId: string): Promise<void> => {
    const blob = await action.run(() => api.download(tenant, workspaceId))
    if (blob !== undefined) saveBlob(blob, `${workspaceId}.tar.gz`)
  }
  const remove = async (workspaceId: string): Promise<void> => {
    await action.run(() => api.deleteWorkspace(tenant, workspaceId))
    if (open === workspaceId) setOpen(undefined)
    list.reload()
  }
  return (
    <div class='stack'>
      <Section title='Upload'>
        <Upload api={api} userId={tenant} onDone={() => list.reload()} />
      </Section>
      <Section title={`Workspaces of ${tenant}`} actions={<><Loading when={list.loading} /><button type='button' onClick={() => list.reload()}>Refresh</button></>}>
        <ErrorBox error={list.error ?? action.error} />
        {list.data !== undefined && list.data.workspaces.length === 0 && <p class='muted'>No workspaces yet.</p>}
        {list.data !== undefined && list.data.workspaces.length > 0 && (
          <div class='scroll'>
            <table id='workspaces'>
              <thead><tr><th>Workspace</th><th>Usage vs quota</th><th>Entries</th><th>Last used</th><th>Expires</th><th>Processes</th><th /></tr></thead>
              <tbody>
                {list.data.workspaces.map((w) => (
                  <tr key={w.workspaceId} data-workspace={w.workspaceId}>
                    <td><code>{w.workspaceId}</code></td>
                    <td><Usage w={w} /></td>
                    <td>{w.files}</td>
                    <td>{formatTime(w.lastUsedAt)}</td>
                    <td>{formatTime(w.expiresAt)}</td>
                    <td>{w.processes}</td>
                    <td class='actions'>
                      <button type='button' onClick={() => { download(w.workspaceId) }}>Download</button>
                      <button type='button' onClick={() => setOpen(open === w.workspaceId ? undefined : w.workspaceId)}>Checkpoints</button>
                      <ConfirmButton label='Delete' confirm={`Delete ${w.workspaceId} and its checkpoints?`} onConfirm={() => { remove(w.workspaceId) }} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </Section>
      {open !== undefined && (
        <Section title={`Checkpoints of ${open}`} actions={<button type='button' onClick={() => setOpen(undefined)}>Close</button>}>
          <Checkpoints api={api} userId={tenant} workspaceId={open} onChange={() => list.reload()} />
        </Section>
      )}
    </div>
  )
}
