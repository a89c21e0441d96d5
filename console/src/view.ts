import type { Api } from './api.js'
import type { AllowList, Role } from './session.js'

export type ViewName = 'tools' | 'servers' | 'playground' | 'journal' | 'approvals' | 'workspaces' | 'status'

/** What every view gets: the client, who is logged in, and the tenant acted for ('' = none picked). */
export interface ViewProps {
  api: Api
  role: Role
  tenant: string
  /** The allow-list the Tools and Playground views share. */
  allow: AllowList
  setAllow: (allow: AllowList) => void
  go: (view: ViewName) => void
}
