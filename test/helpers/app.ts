import type { TestContext } from 'node:test'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../src/app.js'
import { loadConfig } from '../../src/config.js'
import type { ServiceOverrides } from '../../src/services.js'

/**
 * Builds the app on test config (no listening, silent logs) and closes it after the test.
 * `env` uses the real variable names, so tests exercise loadConfig too.
 */
export async function buildTestApp (t: TestContext, opts: { env?: Record<string, string>, overrides?: ServiceOverrides } = {}): Promise<FastifyInstance> {
  const config = loadConfig({ SANDBOX: 'none', LOG_LEVEL: 'silent', ...opts.env })
  const app = await buildApp(config, { logger: false, ...(opts.overrides ? { overrides: opts.overrides } : {}) })
  t.after(async () => await app.close())
  return app
}
