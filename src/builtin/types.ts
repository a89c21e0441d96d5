import type { WorkspaceLimits } from '../routing/types.js'

/** A named read-only root (READ_ROOTS=skills=/opt/skills). `path` is the real path. */
export interface ReadRoot {
  name: string
  path: string
}

/** A resolved workspace for one call: real paths only. */
export interface Workspace {
  /** Tenant key: the userId, or `_` without one. */
  tenant: string
  workspaceId: string
  /** Real (symlink-free) absolute path of the workspace root. */
  root: string
  readRoots: readonly ReadRoot[]
  limits: WorkspaceLimits
  /**
   * Host uid/gid the sandbox runs commands as. When set, files and directories the
   * in-process file tools create are chowned to it so sandboxed commands can modify them.
   */
  owner?: { uid: number, gid: number }
}

/**
 * An expected failure inside a built-in tool. The built-in source turns it into a
 * `{ ok: false }` outcome; the message is shown to the model, so it must not leak host
 * paths outside the workspace. `reason` defaults to 'tool-error'.
 */
export class ToolError extends Error {
  readonly reason: 'tool-error' | 'forbidden' | 'invalid-arguments' | 'timeout' | 'sandbox' | 'quota' | 'tenant-quota'
  constructor (message: string, reason: ToolError['reason'] = 'tool-error') {
    super(message)
    this.name = 'ToolError'
    this.reason = reason
  }
}
