import { test } from 'node:test'
import assert from 'node:assert/strict'
import Fastify from 'fastify'
import type { FastifyInstance } from 'fastify'
import authPlugin from '../../plugins/auth.js'
import hostCheckPlugin from '../../plugins/host-check.js'
import overheadPlugin from '../../plugins/overhead.js'
import rateLimitPlugin from '../../plugins/rate-limit.js'
import routeConfigPlugin from '../../plugins/route-config.js'
import healthRoutes from '../../routes/health.js'
import registryRoutes from '../../routes/registry.js'

const rateLimitOptions = { perMinute: 60, maxConcurrent: 4, batchConcurrency: 2 }

async function bootFails (t: { after: (fn: () => Promise<void>) => void }, register: (app: FastifyInstance) => Promise<unknown>): Promise<Error> {
  const app = Fastify({ logger: false })
  t.after(async () => { await app.close().catch(() => {}) })
  try {
    await register(app)
    await app.ready()
  } catch (err) {
    return err as Error
  }
  assert.fail('the app booted although a plugin came before its dependency')
}

test('a plugin registered before the plugin it depends on stops the boot, naming both', async (t) => {
  // The rate limit keys its buckets by the caller that auth sets.
  const err = await bootFails(t, async (app) => {
    await app.register(overheadPlugin)
    await app.register(rateLimitPlugin, rateLimitOptions)
    await app.register(authPlugin, {})
  })
  assert.match(err.message, /gateway-auth/)
  assert.match(err.message, /gateway-rate-limit/)

  // Auth refusals must carry the overhead header, so the overhead plugin comes first.
  const err2 = await bootFails(t, async (app) => {
    await app.register(authPlugin, {})
    await app.register(overheadPlugin)
  })
  assert.match(err2.message, /gateway-overhead/)

  // The Host check needs the mode auth decides: before it, open mode would not be known.
  const err3 = await bootFails(t, async (app) => {
    await app.register(routeConfigPlugin)
    await app.register(overheadPlugin)
    await app.register(hostCheckPlugin, { allowedHosts: [], trustProxy: false })
    await app.register(authPlugin, {})
  })
  assert.match(err3.message, /gateway-host-check/)
  assert.match(err3.message, /gateway-auth/)
})

test('routes registered before the plugins they rely on stop the boot', async (t) => {
  // Admin-only routes without the auth plugin would be open to anyone.
  const err = await bootFails(t, async (app) => { await app.register(registryRoutes) })
  assert.match(err.message, /routes-registry/)
  const err2 = await bootFails(t, async (app) => { await app.register(healthRoutes) })
  assert.match(err2.message, /gateway-services/)
})

test('the same plugins in dependency order boot', async (t) => {
  const app = Fastify({ logger: false })
  t.after(async () => { await app.close() })
  await app.register(routeConfigPlugin)
  await app.register(overheadPlugin)
  await app.register(authPlugin, {})
  await app.register(hostCheckPlugin, { allowedHosts: [], trustProxy: false })
  await app.register(rateLimitPlugin, rateLimitOptions)
  await app.ready()
  assert.equal(app.authMode, 'open')
})
