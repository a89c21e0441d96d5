import type { Workspace } from '../../src/builtin/types.js'
import type { WorkspaceLimits } from '../../src/routing/types.js'

/** The gateway's default workspace limits (tests lower single ones through `limits`). */
const TEST_LIMITS: WorkspaceLimits = {
  readMaxChars: 12000,
  commandTimeoutMs: 30000,
  bashLogChars: 12000,
  maxProcessOutputChars: 120000,
  outputMaxChars: 100000
}

/** A Workspace on an existing directory, for tests that call built-in tools directly. */
export function testWorkspace (root: string, opts: Partial<Omit<Workspace, 'root' | 'limits'>> & { limits?: Partial<WorkspaceLimits> } = {}): Workspace {
  const { limits, ...rest } = opts
  return { tenant: '_', workspaceId: 'test', readRoots: [], ...rest, root, limits: { ...TEST_LIMITS, ...limits } }
}
