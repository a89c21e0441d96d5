/**
 * starts.ts: the secret detector's token formats and credential words are tried only where a
 * literal says one can start (a sticky attempt at each candidate), not by a scan of every
 * position. What they find must be what the whole-text scan finds, match for match, on random
 * texts full of the formats' prefixes, whole tokens, cut ones, and prefixes glued inside words.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { credentialWordStarts, matchesFrom, tokenFormatStarts } from '../../../src/secrets/starts.js'
import { TOKEN_FORMATS, TOKEN_FORMATS_AT } from '../../../src/secrets/tokens.js'
import { CREDENTIAL_WORD, credentialWords, nextCredentialWord } from '../../../src/secrets/words.js'

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
})

const WORDS = ['api key', 'API_KEYS', 'apikey', 'Access-Key', 'secret', 'SECRET keys', 'secrets', 'Token', 'tokens', 'password', 'PASSWD', 'passphrase',
  'credential', 'Credentials', 'auth', 'Authorization', 'bearer', 'BeArEr', 'tokenizer', 'xtoken', '1password', 'author']

function wordText (next: () => number): string {
  const parts: string[] = []
  for (let k = 1 + Math.floor(next() * 10); k > 0; k--) {
    parts.push(next() < 0.6 ? pick(next, WORDS) : run(next, ALNUM + '  .:=_-', 12))
    parts.push(pick(next, [' ', '', ': ', '=', '\n', 'x', '9']))
    // Prose between them (none of the literals in it): a text dense with words is scanned whole.
    if (next() < 0.8) parts.push(' the quick brown fox jumps over the lazy dog '.slice(0, 20 + Math.floor(next() * 25)))
  }
  return (next() < 0.05 ? 'İ ' : '') + parts.join('')
}

test('credential words tried where one can start are those the whole-text scan finds, from any point on', () => {
  const next = rng(7)
  let tried = 0
  let found = 0
  for (let round = 0; round < 4000; round++) {
    const text = wordText(next)
    if (credentialWordStarts(text) !== undefined) tried++
    const nextWord = credentialWords(text)
    // The detector goes on from the end of a word, or further (past the token it masked).
    for (let from = 0; ;) {
      CREDENTIAL_WORD.lastIndex = from
      const expected = nextCredentialWord(text)
      const m = nextWord(from)
      assert.deepEqual(m === null ? null : [m.index, m[0]], expected === null ? null : [expected.index, expected[0]], `${JSON.stringify(text)} from ${from}`)
      if (m === null) break
      found++
      from = m.index + m[0].length + (next() < 0.3 ? Math.floor(next() * 12) : 0)
    }
  }
  assert.ok(tried > 3000 && found > 2000, `the texts were tried (${tried}) and hold words (${found})`)
  assert.equal(credentialWordStarts('İ token'), undefined, 'lower-casing changed the length: the whole-text scan')
})
