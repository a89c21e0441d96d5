import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CAPS, entryJson, entryText, fillHash } from '../../../src/journal/entry.js'
import { MemoryJournalStore } from '../../../src/journal/memory-store.js'
import type { CallRecord, JournalEntry } from '../../../src/journal/entry.js'

/** An entry as a store keeps it, read back. */
function buildEntry (r: CallRecord, mode: 'full' | 'meta', instance: string): JournalEntry {
  return JSON.parse(entryJson(r, mode, instance)) as JournalEntry
}

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

test('the entry is one JSON object with every field, in the documented order, whatever the values', () => {
  const fields = ['callId', 'ts', 'userId', 'name', 'route', 'serverId', 'arguments', 'argumentsSha256', 'output', 'isError', 'error', 'truncated',
    'trace', 'durationMs', 'toolMs', 'keyId', 'instance', 'checkpointId', 'approvalId', 'parentCallId', 'status']
  const odd = 'quote " backslash \\ newline \n tab \t nul \u0000 line sep \u2028 lone \ud800 emoji \u{1F600} </script>'
  const cyclic: Record<string, unknown> = { a: 1 }
  cyclic.self = cyclic
  const records: CallRecord[] = [
    record({}),
    record({
      callId: odd, name: odd, userId: undefined, route: null, keyId: odd, checkpointId: odd, approvalId: odd, parentCallId: odd, status: 'input_required'
    }),
    record({ arguments: { text: odd, n: -0, big: 1e300, small: 5e-324, nested: [null, true, { x: odd }] }, output: odd, trace: { steps: [odd] } }),
    record({ arguments: '{"a": 1}', output: 'x'.repeat(CAPS.output + 10), trace: { big: 'y'.repeat(CAPS.trace + 10) } }),
    record({
      arguments: 'not json', isError: true, error: { code: 'GW_X', message: odd }, truncated: true, durationMs: Number.NaN, toolMs: Number.POSITIVE_INFINITY
    }),
    record({ arguments: { token: 'ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8', deep: { password: 'hunter2-Secret!' } }, trace: cyclic }),
    record({ arguments: { note: 'export API_TOKEN=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8' } }),
    record({ arguments: { text: 'z'.repeat(CAPS.arguments + 10) } })
  ]
  let deferred = 0
  for (const r of records) {
    for (const mode of ['full', 'meta'] as const) {
      const text = entryJson(r, mode, odd)
      // A hash left for the reader is the same hash, and the same entry, once written.
      const later = entryText(r, mode, odd, true)
      if (later.hashLater !== undefined) {
        deferred++
        assert.equal(JSON.parse(later.json).argumentsSha256, null)
        assert.equal(fillHash(later.json, later.hashLater), text)
      } else {
        assert.equal(later.json, text)
      }
      const entry = JSON.parse(text) as Record<string, unknown>
      assert.deepEqual(Object.keys(entry), fields, text)
      assert.equal(entry.callId, r.callId)
      assert.equal(entry.name, r.name)
      assert.equal(entry.instance, odd)
      assert.equal(entry.ts, new Date(r.endedAt).toISOString())
      assert.equal(entry.userId, r.userId ?? null)
      assert.equal(entry.isError, r.isError)
      assert.equal(entry.durationMs, Number.isFinite(r.durationMs) ? r.durationMs : null)
      assert.match(entry.argumentsSha256 as string, /^[0-9a-f]{64}$/)
      if (mode === 'meta') for (const f of ['arguments', 'output', 'trace']) assert.equal(entry[f], null, f)
      assert.ok(!text.includes('hunter2-Secret!') && !text.includes('ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8'), text)
    }
  }
  // Left only where the entry stores the text the hash is of: full mode, no string of the arguments masked (6) and
  // the arguments not capped (7); masking by key (5) is in the hashed text too.
  assert.equal(deferred, 6)
  // The values themselves, as JSON gives them back.
  const odd2 = JSON.parse(entryJson(records[2] as CallRecord, 'full', 'test')) as Record<string, unknown>
  assert.deepEqual(odd2.arguments, { text: odd, n: 0, big: 1e300, small: 5e-324, nested: [null, true, { x: odd }] })
  assert.equal(odd2.output, odd)
  assert.deepEqual(odd2.trace, { steps: [odd] })
  const capped = JSON.parse(entryJson(records[3] as CallRecord, 'full', 'test')) as Record<string, { $capped?: boolean }>
  assert.deepEqual(capped.arguments, { a: 1 }, 'arguments a model sent as a JSON string are stored as the object')
  assert.equal(capped.output?.$capped, true)
  assert.equal(capped.trace?.$capped, true)
  const withError = JSON.parse(entryJson(records[4] as CallRecord, 'full', 'test')) as Record<string, unknown>
  assert.deepEqual(withError.error, { code: 'GW_X', message: odd })
  assert.equal(withError.arguments, 'not json')
  assert.equal(withError.toolMs, null)
  // A cycle is cut at the masking's depth bound; a value JSON cannot hold is described, not the reason the whole entry is lost.
  const cyclicEntry = JSON.parse(entryJson(records[5] as CallRecord, 'full', 'test')) as Record<string, { a?: number }>
  assert.equal(cyclicEntry.trace?.a, 1)
  const bigint = JSON.parse(entryJson(record({ trace: { n: 10n } }), 'full', 'test')) as Record<string, unknown>
  assert.match(String(bigint.trace), /^\[not serialisable: /)
})

test('an entry ending in another millisecond has its own time', () => {
  const a = buildEntry(record({ endedAt: 1_796_585_337_369 }), 'meta', 'test')
  const b = buildEntry(record({ endedAt: 1_796_585_337_370 }), 'meta', 'test')
  const c = buildEntry(record({ endedAt: 1_796_585_337_369 }), 'meta', 'test')
  assert.deepEqual([a.ts, b.ts, c.ts], ['2026-12-06T19:28:57.369Z', '2026-12-06T19:28:57.370Z', '2026-12-06T19:28:57.369Z'])
})

test('an entry\'s time is the ISO text of its end, across seconds, days and years, in whatever order entries come', () => {
  const ends = [0, 1, 999, 1000, 1_796_585_337_009, 1_796_585_337_099, 1_796_585_337_999, 1_796_585_338_000, 1_796_585_337_500,
    Date.UTC(2026, 11, 31, 23, 59, 59, 999), Date.UTC(2027, 0, 1), Date.UTC(10000, 0, 1, 0, 0, 0, 7), 1_796_585_337_369.5]
  for (const endedAt of [...ends, ...ends.reverse()]) {
    assert.equal(buildEntry(record({ endedAt }), 'meta', 'test').ts, new Date(endedAt).toISOString(), String(endedAt))
  }
})

test('arguments sent as a JSON string holding an object of more than 10,000 members are journaled as the string, not parsed', () => {
  // Parsing it (and masking and serialising the object) cost the journal's turn of the event loop ~300 ms per 150,000 keys.
  // Indented: the string's own text, not the object written again, is what is stored.
  const wide = JSON.stringify(Object.fromEntries(Array.from({ length: 10_001 }, (_, i) => [i.toString(36), 0])), null, 1)
  const entry = buildEntry(record({ arguments: wide }), 'full', 'test')
  const stored = entry.arguments as { $capped?: boolean, head?: string }
  assert.equal(stored.$capped, true)
  assert.ok(stored.head?.startsWith(wide.slice(0, 100)), 'the string itself, capped')
  // A JSON string of an ordinary object is stored as the object, as before.
  assert.deepEqual(buildEntry(record({ arguments: '{"a": 1}' }), 'full', 'test').arguments, { a: 1 })
})

test('the memory ring writes a hash left for the reader when the entry is read, in pages and by callId', async () => {
  const store = new MemoryJournalStore({ maxEntriesPerTenant: 100, retentionMs: 3_600_000, maxBytes: 1_000_000 })
  const odd = 'é 中 \u{1F600} lone \ud800 "q"'
  const records = [
    record({ callId: 'a', arguments: { text: odd } }),
    record({ callId: 'b', arguments: { password: 'hunter2-Secret!' } }),
    record({ callId: 'c', arguments: { note: 'API_TOKEN=ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8' } })
  ]
  for (const r of records) {
    const { json, hashLater } = entryText(r, 'full', 'test', true)
    await store.append([{ tenant: 't', callId: r.callId, name: r.name, isError: false, json, hashLater }])
  }
  const page = await store.page('t', { limit: 10 })
  assert.deepEqual(page.entries, records.map((r) => entryJson(r, 'full', 'test')).reverse())
  for (const r of records) assert.equal(await store.get('t', r.callId), entryJson(r, 'full', 'test'))
})
