import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../helpers/app.js'

// Behind a reverse proxy every client arrives from the proxy's address. TRUST_PROXY says which
// X-Forwarded-For hops to believe; what a client writes itself further left is never believed.
// Observed through the per-address rate limit of open mode (RATE_LIMIT_PER_MINUTE=2).

const get = (xff: string): { method: 'GET', url: string, headers: Record<string, string> } =>
  ({ method: 'GET', url: '/tools?functions=calculate', headers: { 'x-forwarded-for': xff } })

test('without TRUST_PROXY, X-Forwarded-For is ignored: every client behind the proxy shares one address', async (t) => {
  const app = await buildTestApp(t, { env: { RATE_LIMIT_PER_MINUTE: '2' } })
  const codes = []
  for (const xff of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) codes.push((await app.inject(get(xff))).statusCode)
  assert.deepEqual(codes, [200, 200, 429])
})

test('TRUST_PROXY=1: the address the proxy in front saw counts, so clients behind it are limited each on their own', async (t) => {
  const app = await buildTestApp(t, { env: { RATE_LIMIT_PER_MINUTE: '2', TRUST_PROXY: '1' } })
  const codes = []
  for (const xff of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) codes.push((await app.inject(get(xff))).statusCode)
  assert.deepEqual(codes, [200, 200, 200])
  // A client cannot escape its limit by writing addresses of its own to the left: the proxy appends the real one.
  const spoofed = []
  for (const fake of ['198.51.100.1', '198.51.100.2', '198.51.100.3']) spoofed.push((await app.inject(get(`${fake}, 203.0.113.9`))).statusCode)
  assert.deepEqual(spoofed, [200, 200, 429])
})

test('TRUST_PROXY with the proxy\'s address: believed only from that proxy', async (t) => {
  const app = await buildTestApp(t, { env: { RATE_LIMIT_PER_MINUTE: '2', TRUST_PROXY: '10.9.9.9' } })
  // inject connects from 127.0.0.1, not the trusted proxy: its X-Forwarded-For is not believed.
  const codes = []
  for (const xff of ['203.0.113.1', '203.0.113.2', '203.0.113.3']) codes.push((await app.inject(get(xff))).statusCode)
  assert.deepEqual(codes, [200, 200, 429])
})

test('TRUST_PROXY=true is refused (any client could name its own address)', async (t) => {
  await assert.rejects(buildTestApp(t, { env: { TRUST_PROXY: 'true' } }), /TRUST_PROXY/)
})
