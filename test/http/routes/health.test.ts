import { test } from 'node:test'
import assert from 'node:assert/strict'
import { BUILTIN_NAMES } from '../../../src/naming/builtin-names.js'
import { createMemoryRegistryStore } from '../../../src/registry/memory-store.js'
import { buildTestApp } from '../../helpers/app.js'

test('GET /healthz', async (t) => {
  const app = await buildTestApp(t)
  const res = await app.inject({ method: 'GET', url: '/healthz' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { status: 'ok' })
})

test('GET /readyz: ready, and reports an unsandboxed bash loudly', async (t) => {
  const app = await buildTestApp(t, { env: { SANDBOX: 'none' } })
  const res = await app.inject({ method: 'GET', url: '/readyz' })
  assert.equal(res.statusCode, 200)
  const body = res.json()
  assert.equal(body.ready, true)
  assert.deepEqual(body.registry, { backend: 'memory', reachable: true })
  assert.equal(body.sandbox.mode, 'none')
  assert.match(body.sandbox.warning, /UNSANDBOXED/)
  // One per reserved name: the count is what createBuiltins registered, never a figure written down.
  assert.deepEqual(body.sources, { builtin: BUILTIN_NAMES.length, functions: 3, localMcpTools: 2 })
})

test('GET /readyz with the real sandbox', async (t) => {
  const app = await buildTestApp(t, { env: { SANDBOX: 'bwrap' } })
  const body = (await app.inject({ method: 'GET', url: '/readyz' })).json()
  assert.equal(body.sandbox.mode, 'bwrap')
  assert.equal(body.sandbox.ok, true)
  assert.equal(body.sandbox.warning, null)
})

test('GET /readyz: 503 with the reason when the registry is unreachable', async (t) => {
  const store = createMemoryRegistryStore()
  const app = await buildTestApp(t, { overrides: { store } })
  await store.close()
  const res = await app.inject({ method: 'GET', url: '/readyz' })
  assert.equal(res.statusCode, 503)
  assert.equal(res.json().ready, false)
  assert.match(res.json().reasons[0], /registry \(memory\) unreachable/)
  // registry routes answer 503 with the stable code, the rest keeps serving
  const list = await app.inject({ method: 'GET', url: '/mcp/servers' })
  assert.equal(list.statusCode, 503)
  assert.equal(list.json().code, 'GW_REGISTRY_UNAVAILABLE')
  const calc = await app.inject({ method: 'POST', url: '/invoke', payload: { name: 'calculate', arguments: { expression: '1+1' } } })
  assert.equal(calc.statusCode, 200)
})
