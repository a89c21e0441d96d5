import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'

const ADMIN = 'k-admin-5d1e9a7c3b'
const ACME = 'k-acme-8c2f4e6a1d'
const APPROVER = 'k-approve-7f3a9c2e41'
const KEYS = `${ADMIN}:*,${ACME}:acme,${APPROVER}:approver:acme`

test('GET /whoami names the role and tenant of the request\'s key', async (t) => {
  const app = await buildTestApp(t, { env: { API_KEYS: KEYS } })
  const who = async (key?: string): Promise<{ status: number, body: any }> => {
    const res = await app.inject({ method: 'GET', url: '/whoami', headers: key === undefined ? {} : { authorization: `Bearer ${key}` } })
    return { status: res.statusCode, body: res.json() }
  }
  let r = await who(ADMIN)
  assert.equal(r.status, 200)
  assert.deepEqual({ ...r.body, keyId: typeof r.body.keyId }, { role: 'admin', userId: null, keyId: 'string', auth: 'keyed' })
  r = await who(ACME)
  assert.equal(r.body.role, 'tenant')
  assert.equal(r.body.userId, 'acme')
  assert.match(r.body.keyId, /^[0-9a-f]{16}$/)
  assert.doesNotMatch(JSON.stringify(r.body), new RegExp(ACME), 'the key itself is never echoed')
  r = await who(APPROVER)
  assert.equal(r.status, 200, 'an approver key may ask who it is')
  assert.equal(r.body.role, 'approver')
  assert.equal(r.body.userId, 'acme')
  r = await who()
  assert.equal(r.status, 401)
  assert.equal(r.body.code, 'GW_UNAUTHORIZED')
  r = await who('k-nobody-0000000000')
  assert.equal(r.status, 401)
})

test('GET /whoami in open mode: admin, open', async (t) => {
  const app = await buildTestApp(t)
  const res = await app.inject({ method: 'GET', url: '/whoami' })
  assert.equal(res.statusCode, 200)
  assert.deepEqual(res.json(), { role: 'admin', userId: null, keyId: null, auth: 'open' })
})
