import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildTestApp } from '../../helpers/app.js'

// End to end: a real bash call prints secrets on lines after the first; its
// journal entry (read back over HTTP) has them masked, and its output is still the JSON bash returned.
const ACME = 'k-acme-0123456789'
const bearer = { authorization: `Bearer ${ACME}` }

test('a bash output with secrets on its 2nd+ lines is journaled masked and still parses as JSON', async (t) => {
  const a = await buildTestApp(t, { env: { API_KEYS: `${ACME}:acme` } })
  const pat = 'ghp_' + 'A1b2C3d4E5'.repeat(4)
  const script = [
    'echo start',
    "echo 'Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ'",
    "echo 'password: hunter2-Secret'",
    "echo 'DB_PASSWORD=pg-Pa55w0rd'",
    "echo 'url postgres://app:s3cr3t-url-pw@db:5432/app'",
    `echo 'token ${pat}'`,
    "echo 'AKIAIOSFODNN7EXAMPLE' >&2",
    'echo done'
  ].join('; ')
  const res = await a.inject({
    method: 'POST',
    url: '/invoke',
    headers: bearer,
    payload: { name: 'bash', arguments: { action: 'exec', command: script }, callId: 'c-secrets' }
  })
  assert.equal(res.statusCode, 200, res.body)
  const result = res.json()
  assert.equal(result.isError, false, result.output)
  assert.match(result.output, /hunter2-Secret/, 'the caller gets the output as it was')

  await a.services.journal.flush()
  const entry = (await a.inject({ method: 'GET', url: '/users/acme/invocations/c-secrets', headers: bearer })).json()
  const stored = entry.output as string
  for (const secret of ['eyJzdWIiOiJib2IifQ', 'hunter2-Secret', 'pg-Pa55w0rd', 's3cr3t-url-pw', pat, 'AKIAIOSFODNN7EXAMPLE']) {
    assert.ok(!stored.includes(secret), `${secret} in the journal: ${stored}`)
    assert.ok(!JSON.stringify(entry.arguments).includes(secret), `${secret} in the journaled arguments`)
  }
  const parsed = JSON.parse(stored)
  assert.equal(parsed.stdout, 'start\nBearer ****\npassword: ****\nDB_PASSWORD=****\nurl postgres://app:****@db:5432/app\ntoken ****\ndone\n')
  assert.equal(parsed.stderr, '****\n')
  assert.equal(parsed.exitCode, 0)
})
