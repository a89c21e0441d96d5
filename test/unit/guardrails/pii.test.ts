import { test } from 'node:test'
import assert from 'node:assert/strict'
import { findPii, ibanValid, luhnValid } from '../../../src/guardrails/pii.js'

/** What findPii finds in `text`, as `kind:matched text`. */
function found (text: string): string[] {
  return findPii(text).map((f) => `${f.kind}:${text.slice(f.start, f.end)}`)
}

test('e-mail addresses are found whole, without the sentence around them', () => {
  assert.deepEqual(found('write to bob.smith+tag@example.co.uk. or <alice@mail.sub.example.com>'), [
    'email:bob.smith+tag@example.co.uk',
    'email:alice@mail.sub.example.com'
  ])
  assert.deepEqual(found('"user_1@xn--bcher-kva.example"'), ['email:user_1@xn--bcher-kva.example'])
})

test('no e-mail without a dotted domain and a letter TLD', () => {
  assert.deepEqual(found('a@b, root@localhost, x@1.2.3.4, npm i @scope/pkg@1.2.3, git@github'), [])
})

test('international and North-American phone numbers are found', () => {
  assert.deepEqual(found('+44 20 7946 0958 (mobile), +1 (555) 123-4567, +49-30-901820, +33.1.23.45.67.89'), [
    'phone:+44 20 7946 0958',
    'phone:+1 (555) 123-4567',
    'phone:+49-30-901820',
    'phone:+33.1.23.45.67.89'
  ])
  assert.deepEqual(found('call (555) 123-4567 or 555-123-4567 or 555.123.4567.'), [
    'phone:(555) 123-4567',
    'phone:555-123-4567',
    'phone:555.123.4567'
  ])
})

test('dates, versions, timestamps, IP addresses and long ids are no phones', () => {
  const text = [
    'on 2026-12-06 at 2026-12-06T09:19:43.123Z', 'version 1.2.3.4 and v10.20.30', 'ip 192.168.100.200',
    'id 123456789012345 and 9876543210', 'build +2026-12-06', 'ip +100.200.30.40', 'semver 1.0.0+20130313144700', 'too long +12345678901234567',
    'short +1234567', 'range 100-200-3000', 'area 055-123-4567', 'x+12345678', 'a 1234-555-123-4567 b'
  ].join('\n')
  assert.deepEqual(found(text), [])
})

test('card numbers: Luhn-valid with a known network prefix, plain or grouped', () => {
  assert.deepEqual(found('visa 4111 1111 1111 1111, 4111-1111-1111-1111; 4111111111111111'), [
    'card:4111 1111 1111 1111',
    'card:4111-1111-1111-1111',
    'card:4111111111111111'
  ])
  const networks = ['5555555555554444', '2223003122003222', '378282246310005', '6011111111111117', '3530111333300000', '30569309025904']
  assert.deepEqual(found(networks.join(' ')), networks.map((n) => `card:${n}`))
  assert.deepEqual(found('amex 3782 822463 10005'), ['card:3782 822463 10005'])
})

test('no card when the Luhn check fails, the prefix is no network, or the groups are odd', () => {
  assert.equal(luhnValid('4111111111111111'), true)
  assert.equal(luhnValid('4111111111111112'), false)
  assert.deepEqual(found('4111 1111 1111 1112 and 5555555555554443'), [])
  // Luhn-valid, but 1 and 9 are no network's prefix (millisecond timestamps start with 1).
  assert.equal(luhnValid('1234567812345670'), true)
  assert.deepEqual(found('1234567812345670 9111111111111113 1733475583000'), [])
  assert.deepEqual(found('4111 11111 111 1111 and 4111111111111111.5 and 4111-1111 1111-1111'), [])
})

test('IBANs with the country length and mod-97, compact or in groups of 4', () => {
  assert.deepEqual(found('DE89 3704 0044 0532 0130 00, GB82WEST12345698765432 and FR14 2004 1010 0505 0001 3M02 606.'), [
    'iban:DE89 3704 0044 0532 0130 00',
    'iban:GB82WEST12345698765432',
    'iban:FR14 2004 1010 0505 0001 3M02 606'
  ])
  assert.deepEqual(found('NL91ABNA0417164300 CH9300762011623852957 NO9386011117947'), [
    'iban:NL91ABNA0417164300', 'iban:CH9300762011623852957', 'iban:NO9386011117947'
  ])
})

test('no IBAN with a wrong check digit, length or grouping, or an unknown country', () => {
  assert.equal(ibanValid('DE89370400440532013000'), true)
  assert.equal(ibanValid('DE88370400440532013000'), false)
  assert.deepEqual(found([
    'DE88 3704 0044 0532 0130 00', 'DE89 3704 0044 0532 0130 001', 'DE89370400440532013', 'DE89 37040 044 0532 0130 00',
    'ZZ89 3704 0044 0532 0130 00'
  ].join('\n')), [])
})

test('the digits of an IBAN are no card: the stronger kind wins where findings overlap', () => {
  // The BBAN holds a Luhn-valid Visa number in groups of 4, which alone is a card.
  assert.deepEqual(found('4111 1111 1111 1111 00'), ['card:4111 1111 1111 1111'])
  assert.equal(ibanValid('DE95411111111111111100'), true)
  assert.deepEqual(found('pay DE95 4111 1111 1111 1111 00 now'), ['iban:DE95 4111 1111 1111 1111 00'])
  // Both phone patterns match `+1 555-123-4567`: it is reported once.
  assert.deepEqual(found('+1 555-123-4567'), ['phone:+1 555-123-4567'])
})

test('a finding has the pii check and in-text offsets', () => {
  const text = 'mail: a@b.io'
  assert.deepEqual(findPii(text), [{ check: 'pii', kind: 'email', start: 6, end: 12 }])
})

test('a 1 MB adversarial input is scanned to the end', () => {
  const text = ['a@'.repeat(50_000), '1-'.repeat(50_000), '+1 '.repeat(50_000), 'DE89 '.repeat(50_000), '4'.repeat(300_000), ' x@y.zz'].join('')
  const findings = findPii(text)
  assert.deepEqual(findings.map((f) => f.kind), ['email'])
})
