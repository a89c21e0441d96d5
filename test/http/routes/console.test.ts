import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtemp, readdir, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify from 'fastify'
import type { FastifyInstance } from 'fastify'
import type { TestContext } from 'node:test'
import authPlugin from '../../../plugins/auth.js'
import docsPlugin from '../../../plugins/docs.js'
import errorsPlugin from '../../../plugins/errors.js'
import overheadPlugin from '../../../plugins/overhead.js'
import consoleRoutes, { CONSOLE_CSP } from '../../../routes/console.js'

const KEYS = 'console-route-admin-0123456789:*'

/** The console routes with the plugins they need, keys configured, serving `distDir`. */
async function app (t: TestContext, distDir: string): Promise<FastifyInstance> {
  const a = Fastify({ logger: false })
  await a.register(errorsPlugin)
  await a.register(docsPlugin)
  await a.register(overheadPlugin)
  await a.register(authPlugin, { apiKeys: KEYS })
  await a.register(consoleRoutes, { distDir })
  t.after(async () => await a.close())
  await a.ready()
  return a
}

test('a console that was not built: /console is a 503 saying how to build it, never a crash', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-console-none-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  const a = await app(t, join(dir, 'missing'))
  for (const url of ['/console', '/console/']) {
    const res = await a.inject({ url })
    assert.equal(res.statusCode, 503)
    assert.equal(res.json().code, 'GW_NOT_READY')
    assert.match(res.json().message, /npm run build:console/)
  }
  assert.equal((await a.inject({ url: '/console/assets/console-AAAAAAAA.js' })).statusCode, 404)
})

test('a built console (scripts/build-console.mjs --out): ' +
  'public page with the CSP and no-cache, hashed assets cached for good, hidden from openapi', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'tg-console-built-'))
  t.after(async () => await rm(dir, { recursive: true, force: true }))
  execFileSync(process.execPath, ['scripts/build-console.mjs', '--out', dir], { stdio: 'pipe' })
  const assets = await readdir(join(dir, 'assets'))
  assert.equal(assets.length, 2)
  for (const name of assets) assert.match(name, /^console-[A-Z0-9]{8}\.(js|css)$/)
  const a = await app(t, dir)

  // No API key: the console's own files are public (the key is typed into the page).
  const page = await a.inject({ url: '/console' })
  assert.equal(page.statusCode, 200)
  assert.equal(page.headers['content-security-policy'], CONSOLE_CSP)
  assert.equal(page.headers['cache-control'], 'no-cache')
  assert.match(String(page.headers['content-type']), /^text\/html/)
  for (const name of assets) assert.ok(page.body.includes(`/console/assets/${name}`), `index.html names ${name}`)
  assert.equal((await a.inject({ url: '/console/' })).statusCode, 200)

  for (const name of assets) {
    const res = await a.inject({ url: `/console/assets/${name}` })
    assert.equal(res.statusCode, 200)
    assert.equal(res.headers['cache-control'], 'public, max-age=31536000, immutable')
  }
  // Nothing outside assets/ through the static route (index.html is a sibling of assets/).
  const escaped = await a.inject({ url: '/console/assets/%2e%2e/index.html' })
  assert.ok([401, 403, 404].includes(escaped.statusCode), String(escaped.statusCode))
  assert.doesNotMatch(escaped.body, /<html/)
  // A dot-file is refused by the static route itself: 403 with the code for 403, not GW_BAD_REQUEST (a 400's code).
  const dotfile = await a.inject({ url: '/console/assets/.env' })
  assert.deepEqual([dotfile.statusCode, dotfile.json().code], [403, 'GW_FORBIDDEN'])
  // Paths the console does not serve are not public: they need a key like any unknown route.
  assert.equal((await a.inject({ url: '/console/unknown' })).statusCode, 401)
  // The console's routes are in no API description.
  const openapi = JSON.stringify(a.swagger())
  assert.doesNotMatch(openapi, /\/console/)
})
