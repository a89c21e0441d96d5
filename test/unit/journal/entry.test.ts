import { test } from 'node:test'
import assert from 'node:assert/strict'
import { buildEntry, CAPS } from '../../../src/journal/entry.js'
import type { CallRecord } from '../../../src/journal/entry.js'

// A bash output reaches the journal as JSON text (the tool's result object
// serialised), so each line after the first follows the two characters `\n` there. The secrets
// below sit at the start of such lines; none may be stored, and the stored output must still parse.
const SECRETS = {
  bearer: 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib2IifQ.c2lnbmF0dXJlLXNpZ25hdHVyZQ',
  password: 'hunter2-Secret!',
  dbPassword: 'pg-Pa55w0rd',
  apiKey: 'a8F3kQ9zL2xW7vB1nM4pR6tY',
  urlPassword: 's3cr3t-url-pw',
  curlPassword: 'curl-Pw-99',
  mysqlPassword: 'MyS3cretPw',
  openai: 'sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z',
  github: 'ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8',
  aws: 'AKIAIOSFODNN7EXAMPLE'
}

function bashOutput (): string {
  const stdout = [
    'starting deploy',
    `Bearer ${SECRETS.bearer}`,
    `password: ${SECRETS.password}`,
    `DB_PASSWORD=${SECRETS.dbPassword}`,
    `export API_KEY="${SECRETS.apiKey}"`,
    `DATABASE_URL=postgres://app:${SECRETS.urlPassword}@db.internal:5432/app`,
    `+ curl -u deploy:${SECRETS.curlPassword} https://ci.example.com/hook`,
    `+ mysql -u root -p${SECRETS.mysqlPassword} app`,
    `OPENAI_KEY ${SECRETS.openai}`,
    `remote: ${SECRETS.github}`,
    `aws id ${SECRETS.aws}`,
    'done in 3s'
  ].join('\n')
  // The bash tool's exec result, as stringifyToolValue makes the output string.
  return JSON.stringify({ command: './deploy.sh', workingDirectory: '.', stdout, stderr: 'warning: "quoted" \\ backslash\n', exitCode: 0, timedOut: false })
}

function record (over: Partial<CallRecord>): CallRecord {
  const base: CallRecord = {
    callId: 'c1',
    endedAt: Date.now(),
    userId: 'acme',
    name: 'bash',
    route: 'builtin',
    serverId: null,
    arguments: {},
    output: null,
    isError: false,
    error: null,
    truncated: false,
    trace: null,
    durationMs: 1,
    toolMs: 1,
    keyId: null,
    checkpointId: null,
    approvalId: null
  }
  return { ...base, ...over }
}

test('a bash output with secrets on its 2nd+ lines is stored masked, and still parses as the same JSON', () => {
  const output = bashOutput()
  const entry = buildEntry(record({ output, arguments: { action: 'exec', command: `curl -H 'Authorization: Bearer ${SECRETS.bearer}' -u u:${SECRETS.curlPassword} x` } }), 'full', 'test')
  assert.equal(typeof entry.output, 'string')
  const stored = entry.output as string
  for (const [name, secret] of Object.entries(SECRETS)) {
    assert.ok(!stored.includes(secret), `${name} stored in clear: ${stored}`)
    assert.ok(!JSON.stringify(entry.arguments).includes(secret), `${name} in the arguments: ${JSON.stringify(entry.arguments)}`)
  }
  const parsed = JSON.parse(stored) as Record<string, unknown>
  const original = JSON.parse(output) as Record<string, unknown>
  assert.deepEqual(Object.keys(parsed), Object.keys(original), 'the same object, field for field')
  assert.equal(parsed.stderr, original.stderr, 'a field with nothing secret is kept exactly')
  assert.equal(parsed.exitCode, 0)
  const lines = (parsed.stdout as string).split('\n')
  assert.equal(lines.length, 12, 'every line is kept')
  assert.deepEqual(lines, [
    'starting deploy',
    'Bearer ****',
    'password: ****',
    'DB_PASSWORD=****',
    'export API_KEY="****"',
    'DATABASE_URL=postgres://app:****@db.internal:5432/app',
    '+ curl -u deploy:**** https://ci.example.com/hook',
    '+ mysql -u root -p**** app',
    'OPENAI_KEY ****',
    'remote: ****',
    'aws id ****',
    'done in 3s'
  ])
})

test('an output past its cap keeps a masked head; a result cut in the middle by the output cap is masked on both sides', () => {
  const output = bashOutput()
  const big = JSON.stringify({ stdout: 'x'.repeat(CAPS.output) + '\n' + output, exitCode: 0 })
  // The head is the first 16 KiB: cut inside the stdout string, it is no JSON, and what it holds is masked all the same.
  const head = buildEntry(record({ output: `${JSON.stringify({ stdout: 'line one\n' + `password: ${SECRETS.password}\n` + 'y'.repeat(CAPS.output) })}` }), 'full', 'test').output as { head: string }
  assert.ok(head.head.includes('password: ****'), head.head.slice(0, 80))
  assert.ok(!head.head.includes(SECRETS.password))
  assert.ok(!JSON.stringify(buildEntry(record({ output: big }), 'full', 'test').output).includes(SECRETS.password))
  // capOutput's marker lands inside a JSON string: the tail starts inside it.
  const cut = output.slice(0, 40) + '\n[... truncated 999 chars ...]\n' + output.slice(output.indexOf('password'))
  const stored = buildEntry(record({ output: cut, truncated: true }), 'full', 'test').output as string
  for (const [name, secret] of Object.entries(SECRETS)) assert.ok(!stored.includes(secret), `${name} stored in clear: ${stored}`)
  assert.ok(stored.includes('\\nDB_PASSWORD=****\\n'), stored)
})

test('error messages and traces are masked with the same detector', () => {
  const entry = buildEntry(record({
    isError: true,
    error: { code: 'GW_UPSTREAM_ERROR', message: `upstream said: 401\nAuthorization: Bearer ${SECRETS.bearer}\nurl https://u:${SECRETS.urlPassword}@h/` },
    trace: { steps: [{ stderr: `line\npassword: ${SECRETS.password}` }], env: { DB_PASSWORD: SECRETS.dbPassword } }
  }), 'full', 'test')
  const text = JSON.stringify(entry)
  for (const secret of [SECRETS.bearer, SECRETS.urlPassword, SECRETS.password, SECRETS.dbPassword]) assert.ok(!text.includes(secret), text)
  assert.match(entry.error?.message ?? '', /^upstream said: 401\nAuthorization: Bearer \*\*\*\*\nurl https:\/\/u:\*\*\*\*@h\/$/)
})
