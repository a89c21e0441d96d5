/**
 * starts.ts: the secret detector's token formats are tried only where a literal says one can
 * start (a sticky attempt at each candidate), not by a scan of every position, and its test for a
 * run of 16 token characters reads the text's bytes once. What they find must be what the
 * patterns find, on random texts full of the formats' prefixes, whole tokens, cut ones, prefixes
 * glued inside words, and runs of every length around 16 among characters of one, two and four bytes.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { commandWords, hasTokenRun, matchesFrom, mayHoldMixedRun, tokenFormatStarts } from '../../../src/secrets/starts.js'
import { TOKEN_FORMATS, TOKEN_FORMATS_AT } from '../../../src/secrets/tokens.js'

/** A deterministic generator (xorshift), so a failure names a reproducible seed. */
function rng (seed: number): () => number {
  let x = seed
  return () => {
    x ^= x << 13; x ^= x >>> 17; x ^= x << 5
    return (x >>> 0) / 0x100000000
  }
}

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'

function pick<T> (next: () => number, xs: readonly T[]): T {
  return xs[Math.floor(next() * xs.length)] as T
}

function run (next: () => number, alphabet: string, max: number): string {
  let s = ''
  for (let n = Math.floor(next() * max); n > 0; n--) s += alphabet[Math.floor(next() * alphabet.length)]
  return s
}

// Every format's prefix, as a whole token (a run long enough, or too short, after it) or alone.
const PREFIXES = [
  'sk-', 'sk-proj-', 'ghp_', 'gho_', 'ghu_', 'ghs_', 'ghr_', 'github_pat_', 'glpat-', 'AKIA', 'ASIA', 'ABIA', 'ACCA', 'xoxb-', 'xoxp-', 'xapp-',
  'AIza', 'ya29.', 'eyJ', 'sk_live_', 'rk_test_', 'whsec_', 'npm_', 'hf_', 'pypi-AgE', 'SG.', 'dop_v1_', 'shpat_', 'shpca_', 'shppa_', 'shpss_'
]

function tokenText (next: () => number): string {
  const parts: string[] = []
  for (let k = 1 + Math.floor(next() * 8); k > 0; k--) {
    const r = next()
    if (r < 0.45) {
      const prefix = pick(next, PREFIXES)
      const body = run(next, prefix === 'dop_v1_' || prefix.startsWith('shp') ? 'abcdef0123456789' : ALNUM + '_-', 80)
      parts.push(prefix === 'eyJ' || prefix === 'SG.' ? `${prefix}${body}.${prefix === 'eyJ' ? 'eyJ' : ''}${run(next, ALNUM, 40)}.${run(next, ALNUM, 30)}` : prefix + body)
    } else if (r < 0.7) {
      parts.push(run(next, ALNUM, 6) + pick(next, PREFIXES))
    } else {
      parts.push(run(next, ALNUM + ' .\n_-=/', 30))
    }
    parts.push(pick(next, [' ', '', '.', '\n', '\\n', '_', '-', '=', 'x']))
    // Prose between them (none of the literals in it): a text dense with candidates is scanned whole.
    if (next() < 0.9) parts.push(' the quick brown fox jumps over the lazy dog, and over the lazy dog again '.slice(0, 50 + Math.floor(next() * 25)))
  }
  return parts.join('')
}

test('token formats tried where a prefix is find what a scan of the whole text finds', () => {
  const next = rng(20261206)
  let tried = 0
  let matched = 0
  for (let round = 0; round < 4000; round++) {
    const text = tokenText(next)
    const starts = tokenFormatStarts(text)
    if (starts === undefined) continue
    tried++
    const expected = [...text.matchAll(TOKEN_FORMATS)].map((m) => [m.index, m[0]])
    assert.deepEqual(matchesFrom(text, TOKEN_FORMATS_AT, starts).map((m) => [m.index, m[0]]), expected, JSON.stringify(text))
    matched += expected.length
  }
  assert.ok(tried > 2000 && matched > 2000, `the texts were tried (${tried}) and hold matches (${matched})`)
  // A text dense with `_` is scanned whole: too many candidates to pay.
  assert.equal(tokenFormatStarts('sk_a '.repeat(100)), undefined)
  assert.deepEqual(tokenFormatStarts('a'.repeat(100) + ' sk_a'), [101])
})

// Token characters, characters around them (ASCII, accented, an emoji's surrogates) and the lengths around 16.
const RUN_PIECES = ['a'.repeat(15), 'b'.repeat(16), 'Zz09+/_~.=-', 'x', ' ', '\n', 'é', '😀', '\ud83d', '"', ':', '-'.repeat(8)]

test('a run of 16 token characters: what the pattern finds, in any text, across the chunks the UTF-8 is read in', () => {
  const next = rng(16)
  const LONG_RUN = /[A-Za-z0-9+/_~.=-]{16}/
  let runs = 0
  for (let round = 0; round < 5000; round++) {
    let text = ''
    for (let k = Math.floor(next() * 12); k > 0; k--) text += pick(next, RUN_PIECES)
    assert.equal(hasTokenRun(text, 16), LONG_RUN.test(text), JSON.stringify(text))
    if (LONG_RUN.test(text)) runs++
  }
  assert.ok(runs > 1000 && runs < 4000, `both answers were tried (${runs} of 5000 hold a run)`)
  // A run cut by a chunk's end, and a run of 15 on each side of one, wherever the chunks end (512, then 4 times more each).
  for (const cut of [512, 512 + 2048, 512 + 2048 + 8192, 512 + 2048 + 8192 + 16_384]) {
    for (const [before, after, expected] of [[8, 8, true], [15, 0, false], [0, 15, false], [1, 15, true]] as const) {
      const text = ' '.repeat(cut - before) + 'a'.repeat(before) + 'b'.repeat(after) + ' x'
      assert.equal(hasTokenRun(text, 16), expected, `${cut}: ${before} + ${after}`)
      assert.equal(hasTokenRun(text.replaceAll(' ', 'é'), 16), expected, `two-byte, ${cut}: ${before} + ${after}`)
    }
  }
})

test('a run of 16 token characters with a digit and a letter: never missed; found exactly while runs with a digit are sparse', () => {
  const next = rng(1616)
  // Letters, digits and other token characters in runs around 16 long, between separators and non-ASCII characters.
  const pieces = ['a'.repeat(8), 'Q'.repeat(7), '7', '12345678', '_-./', 'x', ' ', '\n', 'é', '😀', '"', ':']
  const mixed = (text: string): boolean => (text.match(/[A-Za-z0-9+/_~.=-]{16,}/g) ?? []).some((r) => /[0-9]/.test(r) && /[A-Za-z]/.test(r))
  const seen = { mixed: 0, not: 0 }
  for (let round = 0; round < 6000; round++) {
    let text = ''
    for (let k = Math.floor(next() * 16); k > 0; k--) text += pick(next, pieces)
    // Padded, so that the budget of runs with a digit (one per 128 characters) is not what answers.
    const padded = text + ' '.repeat(128 * 20)
    const expected = mixed(text)
    assert.equal(mayHoldMixedRun(padded, 16), expected, JSON.stringify(text))
    if (expected) seen.mixed++
    else seen.not++
  }
  assert.ok(seen.mixed > 1000 && seen.not > 1000, JSON.stringify(seen))
  // Past one run with a digit per 128 characters it answers that one may be there (the credential-word scan then runs).
  const numbers = '1 '.repeat(1000)
  assert.equal(mixed(numbers), false)
  assert.equal(mayHoldMixedRun(numbers, 16), true)
  assert.equal(mayHoldMixedRun('1 '.repeat(10) + ' '.repeat(2000), 16), false)
})

test('the command words found by matching the character before them: what the lookbehind patterns find, on random texts', () => {
  const next = rng(183)
  const pieces = ['--', '-', '--p', 'curl', 'mysql', 'mariadb', 'a', 'Z', '0', '_', ' ', '\n', '\t', '=', '/', 'é', '"', 'xcurl', '_mysql']
  const flag = /(?<![A-Za-z0-9_-])--[A-Za-z]/
  const curl = /(?<![A-Za-z0-9_-])curl/
  const mysql = /(?<![A-Za-z0-9_-])(?:mysql|mariadb)/
  const seen = { flag: 0, curl: 0, mysql: 0 }
  for (let round = 0; round < 5000; round++) {
    let text = ''
    for (let k = Math.floor(next() * 14); k > 0; k--) text += pick(next, pieces)
    const expected = { flag: flag.test(text), curl: curl.test(text), mysql: mysql.test(text) }
    assert.deepEqual(commandWords(text), expected, JSON.stringify(text))
    for (const key of ['flag', 'curl', 'mysql'] as const) if (expected[key]) seen[key]++
  }
  assert.ok(seen.flag > 500 && seen.curl > 500 && seen.mysql > 500, `each word was found in some texts and not others: ${JSON.stringify(seen)}`)
})
