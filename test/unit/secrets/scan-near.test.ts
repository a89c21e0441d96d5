/**
 * scan-near.ts and the pii check's use of it: the exact patterns run only near their hints, and
 * must find what a scan of the whole text finds. Random texts over the characters the patterns
 * care about (digits, separators, capitals, `@`, `+`, word characters) are scanned both ways.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { EMAIL, emailMatches, NEAR_SCANS } from '../../../src/guardrails/pii.js'
import { schemeStarts, URL_SCANS } from '../../../src/secrets/urls.js'
import { literalHits, matchesNear, replaceMatches } from '../../../src/secrets/scan-near.js'
import { matchesFrom } from '../../../src/secrets/starts.js'

/** A deterministic generator (xorshift), so a failure names a reproducible seed. */
function rng (seed: number): () => number {
  let x = seed
  return () => {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5
    return (x >>> 0) / 0x100000000
  }
}

const ALPHABET = '0123456789012345678901234567890123456789    ---...()+@@_%aAbZxDEGB\n,'

// Shapes the patterns match, dropped among the random characters (which may glue them to a neighbour).
const SHAPES = ['555-123-4567', '(555) 123-4567', '1-800-555-0199', '555.123.4567', '4111 1111 1111 1111', '4111-1111-1111-1111', '378282246310005',
  'DE89 3704 0044 0532 0130 00', 'GB82WEST12345698765432', 'AB12', 'ZX99 ', '+44 20 7946 0958', '2026-12-06']

function randomText (next: () => number, length: number, shapes = false): string {
  let s = ''
  for (let i = 0; i < length; i++) {
    if (shapes && next() < 0.03) s += SHAPES[Math.floor(next() * SHAPES.length)]
    else s += ALPHABET[Math.floor(next() * ALPHABET.length)]
  }
  return s
}

const whole = (text: string, re: RegExp): Array<[number, string]> => [...text.matchAll(re)].map((m) => [m.index, m[0]])

test('matchesNear finds what a whole scan finds, for every pattern of the pii check near the hits it is given, on random texts', () => {
  const next = rng(20261206)
  const matched = NEAR_SCANS.map(() => 0)
  for (let round = 0; round < 3000; round++) {
    const text = randomText(next, 20 + Math.floor(next() * 300), round % 2 === 0)
    NEAR_SCANS.forEach((scan, i) => {
      const near = matchesNear(text, scan.re, scan.hits(text), scan.reach).map((m): [number, string] => [m.index, m[0]])
      const expected = whole(text, scan.re)
      assert.deepEqual(near, expected, `${scan.re.source} on ${JSON.stringify(text)}`)
      matched[i] = (matched[i] ?? 0) + expected.length
    })
  }
  // Each pattern matched often enough to tell (the IBAN starts near the capitals' hits, the others near the digits').
  assert.ok(matched.every((n) => n > 50), `each pattern's matches: ${matched.join(', ')}`)
})

test('emailMatches finds what the e-mail pattern finds', () => {
  const next = rng(7)
  let matched = 0
  const cases = ['a@bcd@efg.com', 'x'.repeat(70) + '@example.com', 'a.b@c', '..@abc', '_x@' + 'a'.repeat(300), 'jane@ex.com,joe@ex.org']
  for (let round = 0; round < 3000; round++) cases.push(randomText(next, 10 + Math.floor(next() * 120)).replaceAll('0', 'a'))
  for (const text of cases) {
    const found: Array<[number, string]> = []
    emailMatches(text, (start, _at, end) => found.push([start, text.slice(start, end)]))
    const expected = whole(text, EMAIL)
    assert.deepEqual(found, expected, JSON.stringify(text))
    matched += expected.length
  }
  assert.ok(matched > 200, `the texts hold matches (${matched})`)
})

test('matchesNear: windows far apart and close together, a match across two hits, none without a hit', () => {
  const re = /\d{4}-\d{4}/g
  const reach = { maxMatch: 9, maxHint: 1, behind: 0, ahead: 0 }
  const text = `1234-5678 ${'x'.repeat(50)} 1111-2222-3333 ${'y'.repeat(5)} 9999-0000`
  assert.deepEqual(matchesNear(text, re, literalHits(text, '-'), reach).map((m) => m[0]), ['1234-5678', '1111-2222', '9999-0000'])
  assert.deepEqual(matchesNear(text, re, [], reach), [])
})

test('the secret detector\'s URL patterns tried where the scheme before each `://` starts find what a whole scan finds, on random texts of schemes, users, passwords and @s', () => {
  const next = rng(3)
  const pieces = ['https://', 'postgres://', 'x+y.z-1://', 'a'.repeat(31) + '://', 'b'.repeat(32) + '://', 'c'.repeat(30) + '://', '1a://', '+', '9', '://', ':', '@', '/', '?', '#', ' ', '"', "'", '\\',
    'user', 'pw', 'user:pw@', ':s3cret@', 'ghp_' + 'a1B2'.repeat(6), 'a1B2c3D4e5F6g7H8@', 'x'.repeat(250),
    'u'.repeat(250) + ':' + 'p'.repeat(250) + '@', 'a1'.repeat(128) + '@', 'é', '-', '.', '+', 'A9']
  const matched = URL_SCANS.map(() => 0)
  for (let round = 0; round < 3000; round++) {
    let text = ''
    for (let k = Math.floor(next() * 16); k > 0; k--) text += pieces[Math.floor(next() * pieces.length)] as string
    URL_SCANS.forEach((scan, i) => {
      const near = matchesFrom(text, scan.sticky, schemeStarts(text)).map((m): [number, string] => [m.index, m[0]])
      const expected = whole(text, scan.re)
      assert.deepEqual(near, expected, `${scan.re.source} on ${JSON.stringify(text)}`)
      // What the detector runs: the same attempts, or the scan itself where the text is dense with `://`.
      assert.deepEqual(scan.matches(text).map((m): [number, string] => [m.index, m[0]]), expected, `${scan.re.source} on ${JSON.stringify(text)}`)
      matched[i] = (matched[i] ?? 0) + expected.length
    })
  }
  assert.ok(matched.every((n) => n > 100), `each pattern's matches: ${matched.join(', ')}`)
})

test('replaceMatches: each match replaced in order, the text between kept, the text itself when there is none', () => {
  const text = 'a1 b22 c333'
  assert.equal(replaceMatches(text, text.matchAll(/\d+/g), (m) => `<${m[0].length}>`), 'a<1> b<2> c<3>')
  const none = 'no digits'
  assert.equal(replaceMatches(none, none.matchAll(/\d+/g), () => 'x'), none)
})
