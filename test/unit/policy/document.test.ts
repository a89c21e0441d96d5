import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HttpError } from '../../../src/errors.js'
import { parsePolicy } from '../../../src/policy/document.js'

function refusal (input: unknown): string {
  try {
    parsePolicy(input)
  } catch (err) {
    assert.ok(err instanceof HttpError)
    assert.equal(err.code, 'GW_INVALID_POLICY')
    assert.equal(err.statusCode, 400)
    return err.message
  }
  assert.fail(`accepted ${JSON.stringify(input)}`)
}

test('a valid policy comes back with its fields only, duplicates dropped', () => {
  const policy = parsePolicy({
    deny: ['a', 'a', 'b*'],
    allowOnly: [],
    readOnly: true,
    requireApproval: ['write_*'],
    bash: { denyCommands: ['rm\\s'] },
    limits: { timeoutMs: 5, outputMaxChars: 100 }
  })
  assert.deepEqual(policy, {
    deny: ['a', 'b*'],
    allowOnly: [],
    readOnly: true,
    requireApproval: ['write_*'],
    bash: { denyCommands: ['rm\\s'] },
    limits: { timeoutMs: 5, outputMaxChars: 100 }
  })
  assert.deepEqual(parsePolicy({}), {})
})

test('every invalid entry is named', () => {
  assert.match(refusal({ deny: 'bash' }), /deny must be an array of strings/)
  assert.match(refusal({ deny: [1] }), /deny\/0 must be a string/)
  assert.match(refusal({ allowOnly: ['ok', 'no/slash'] }), /allowOnly\/1 "no\/slash" is not a valid pattern/)
  assert.match(refusal({ bash: { denyCommands: ['('] } }), /bash\/denyCommands\/0 "\(" is not a valid regular expression/)
  assert.match(refusal({ bash: { denyCommands: ['x'.repeat(513)] } }), /bash\/denyCommands\/0 must have 1 to 512 characters/)
  assert.match(refusal({ bash: { denyCommands: Array.from({ length: 65 }, (_, i) => `r${i}`) } }), /bash\/denyCommands must have at most 64 entries/)
  assert.match(refusal({ bash: [] }), /bash must be an object/)
  assert.match(refusal({ limits: { readMaxChars: 1.5 } }), /limits\/readMaxChars must be a positive integer/)
  assert.match(refusal({ limits: { readMaxChars: '5' } }), /limits\/readMaxChars must be a positive integer/)
  assert.match(refusal({ extra: true }), /extra is not a policy field \(known: deny, allowOnly/)
  assert.match(refusal(null), /the body must be a JSON object/)
  // A huge unknown key does not make a huge message.
  assert.ok(refusal({ ['k'.repeat(10_000)]: 1 }).length < 400)
})
