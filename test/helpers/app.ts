import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import type { BuildOptions } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import type { ServiceOverrides } from '../../src/services.js'
import { testUidRange } from '../../scripts/lib/uid-range.js'

/**
 * The suite keeps workspace quotas with the watchdog unless a test asks for the quota images
 * (WORKSPACE_QUOTA_MODE, which scripts/run-tests.mjs sets for the whole run): a test app's temp
 * directory is removed by a clean-up that loop mounts would stand in the way of. Spread it into
 * a test's own loadConfig env before the test's values.
 */
export const TEST_QUOTA = { WORKSPACE_QUOTA_MODE: process.env.WORKSPACE_QUOTA_MODE ?? 'watchdog' }

/**
 * Builds the app on test config (no listening, silent logs) and closes it after the test.
 * `env` uses the real variable names, so tests exercise loadConfig too. Workspaces live in a
 * fresh temp dir; the sandbox is off unless `env` sets SANDBOX (the sandbox has its own tests).
 */
export async function buildTestApp (
  t: TestContext,
  opts: { env?: Record<string, string>, overrides?: ServiceOverrides, mcp?: BuildOptions['mcp'] } = {}
): Promise<FastifyInstance> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-ws-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  // MCP_HTTP_TRANSPORT from the environment lets a run pick the remote MCP client transport (sdk|lean).
  const transport = process.env.MCP_HTTP_TRANSPORT !== undefined ? { MCP_HTTP_TRANSPORT: process.env.MCP_HTTP_TRANSPORT } : {}
  const env = opts.env ?? {}
  const config = loadConfig({ SANDBOX: 'none', LOG_LEVEL: 'silent', WORKSPACES_DIR: workspaces, ...TEST_QUOTA, ...transport, ...env, ...testUidRange(env) })
  const app = await buildApp(config, { logger: false, ...(opts.overrides ? { overrides: opts.overrides } : {}), ...(opts.mcp ? { mcp: opts.mcp } : {}) })
  t.after(async () => await app.close())
  return app
}

/** Makes a test app listen on a free loopback port; its base URL (for clients that need a real socket: MCP SDK clients). */
export async function listenOnLoopback (app: FastifyInstance): Promise<string> {
  await app.listen({ port: 0, host: '127.0.0.1' })
  const address = app.server.address()
  if (address === null || typeof address !== 'object') throw new Error('the app listens on no TCP port')
  return `http://127.0.0.1:${address.port}`
}
