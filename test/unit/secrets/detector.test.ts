import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { detectorWork, MASK, maskText, maskValue, MAX_DEPTH, PATTERNS, TOO_DEEP } from '../../../src/secrets/detector.js'

// A deterministic run of characters from `alphabet` (no Math.random: a failing case must repeat).
function run (len: number, alphabet: string, seed = 7): string {
  let out = ''
  let x = seed
  for (let i = 0; i < len; i++) {
    x = (x * 1103515245 + 12345) % 2147483648
    out += alphabet[x % alphabet.length]
  }
  return out
}
const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789'
const B64URL = ALNUM + '-_'

const TOKENS: Record<string, string> = {
  openai: 'sk-' + run(48, ALNUM, 1),
  openaiProject: 'sk-proj-' + run(64, B64URL, 2),
  anthropic: 'sk-ant-api03-' + run(93, B64URL, 3),
  githubClassic: 'ghp_' + run(36, ALNUM, 4),
  githubOauth: 'gho_' + run(36, ALNUM, 5),
  githubFineGrained: 'github_pat_' + run(82, ALNUM + '_', 6),
  gitlab: 'glpat-' + run(20, B64URL, 8),
  awsAccessKeyId: 'AKIAIOSFODNN7EXAMPLE',
  awsSession: 'ASIA' + run(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567', 9),
  slackBot: 'xoxb-1234567890123-1234567890123-' + run(24, ALNUM, 10),
  slackUser: 'xoxp-1234567890123-1234567890123-1234567890123-' + run(32, 'abcdef0123456789', 11),
  googleApiKey: 'AIza' + run(35, B64URL, 12),
  googleOauth: 'ya29.' + run(120, B64URL, 13),
  jwt: 'eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ.' + run(43, B64URL, 14),
  stripe: 'sk_live_' + run(24, ALNUM, 15),
  npm: 'npm_' + run(36, ALNUM, 16),
  huggingFace: 'hf_' + run(34, ALNUM, 17),
  sendgrid: 'SG.' + run(22, B64URL, 18) + '.' + run(43, B64URL, 19)
}

// Positive cases: [input, exactly what must come out]. The secret part is gone, the rest kept.
const POSITIVE: Array<[string, string]> = [
  // credential-like names, with prefixes and suffixes, in the forms text takes
  ['DB_PASSWORD=pg-Pa55w0rd', 'DB_PASSWORD=****'],
  ['export API_KEY=a8F3kQ9zL2x', 'export API_KEY=****'],
  ['export API_KEY="a8F3 kQ9z"', 'export API_KEY="****"'],
  ['GITHUB_TOKEN: ghx123abc', 'GITHUB_TOKEN: ****'],
  ['PGPASSWORD=secret99 psql -h db', 'PGPASSWORD=**** psql -h db'],
  ['aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY', 'aws_secret_access_key = ****'],
  ['client_secret: "abc def 123"', 'client_secret: "****"'],
  ["password='p@ss word'", "password='****'"],
  ['$password = "s3cret";', '$password = "****";'],
  ['password := "s3cret"', 'password := "****"'],
  ['db:\n  host: db.internal\n  password: hunter2\n  port: 5432', 'db:\n  host: db.internal\n  password: ****\n  port: 5432'],
  ['Server=db;User Id=sa;Password=S3cret!;Encrypt=true', 'Server=db;User Id=sa;Password=****;Encrypt=true'],
  ['x-api-key: k-123456', 'x-api-key: ****'],
  ['Set-Cookie: session=abc123; Path=/', 'Set-Cookie: ****; Path=/'],
  ['mysql --password=hunter22 -u root', 'mysql --password=**** -u root'],
  ['deploy --api-key a8F3kQ9 --verbose', 'deploy --api-key **** --verbose'],
  ['gh auth login --with-token --token abc123XYZ', 'gh auth login --with-token --token ****'],
  // JSON text: by key, whatever the value (a string, a number, a whole object)
  ['{"password": "hunter2", "user": "bob"}', '{"password": "****", "user": "bob"}'],
  ['{"auth": {"user": "bob", "note": "x1"}, "n": 1}', '{"auth": "****", "n": 1}'],
  ['{"pin": 1234, "otp": "", "useAuth": true}', '{"pin": "****", "otp": "", "useAuth": true}'],
  ['{"headers":{"Authorization":"Bearer abc","Accept":"*/*"}}', '{"headers":{"Authorization":"****","Accept":"*/*"}}'],
  ['{"rawHeaders":[["X-Api-Key", "k-123"],["Accept","text/plain"]]}', '{"rawHeaders":[["X-Api-Key", "****"],["Accept","text/plain"]]}'],
  // mysql -pPW, curl -u user:pw
  ['mysql -u root -pMyS3cret db', 'mysql -u root -p**** db'],
  ["mysqldump -h db -p'MyS3cret' app > a.sql", "mysqldump -h db -p'****' app > a.sql"],
  ['curl -u deploy:curl-Pw-99 https://ci.example.com', 'curl -u deploy:**** https://ci.example.com'],
  ['curl -s --user "bob:pw-123" https://x', 'curl -s --user "bob:****" https://x'],
  // URL userinfo and credential query parameters
  ['https://user:s3cret@example.com/path', 'https://user:****@example.com/path'],
  ['DATABASE_URL=postgres://app:pa@ss@db:5432/app', 'DATABASE_URL=postgres://app:****@db:5432/app'],
  ['redis://:authpass123@localhost:6379/0', 'redis://:****@localhost:6379/0'],
  ['git clone https://x-access-token:abc123def456@github.com/o/r', 'git clone https://x-access-token:****@github.com/o/r'],
  ['git clone https://9f8e7d6c5b4a39281706f5e4d3c2b1a0@git.example.com/r', 'git clone https://****@git.example.com/r'],
  ['GET /a?api_key=12345678&page=2', 'GET /a?api_key=****&page=2'],
  ['https://h/x?sig=ab12&X-Amz-Signature=cd34&sort=name', 'https://h/x?sig=****&X-Amz-Signature=****&sort=name'],
  // auth schemes, also at the start of a line after the first
  ['Authorization: Bearer abcdefghijkl', 'Authorization: Bearer ****'],
  ["curl -H 'Authorization: Bearer abcdefghijkl' https://x", "curl -H 'Authorization: Bearer ****' https://x"],
  ['Authorization: Basic dXNlcjpwYXNz', 'Authorization: Basic ****'],
  ['proxy-authorization: token ghx-123', 'proxy-authorization: token ****'],
  ['line one\nBearer Zx9_abc.DEF-123', 'line one\nBearer ****'],
  // an auth scheme's name is case-insensitive (RFC 9110 11.1), in any mix of cases
  ['X-Upstream-Auth: bEARer Zx9_abc.DEF-123', 'X-Upstream-Auth: bEARer ****'],
  ['sent BEarer abc.def-12 upstream', 'sent BEarer **** upstream'],
  ['X-Proxy: bAsIc dXNlcjpwYXNz', 'X-Proxy: bAsIc ****'],
  ['then BAsic dXNlcjpwYXNz was sent', 'then BAsic **** was sent'],
  ['ok\npassword: x', 'ok\npassword: ****'],
  ['ok\r\n\tapi_key = abc123', 'ok\r\n\tapi_key = ****'],
  // PEM private keys, whole or cut
  [
    'key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7b\nq1w==\n-----END RSA PRIVATE KEY-----\ndone',
    'key:\n-----BEGIN RSA PRIVATE KEY-----****-----END RSA PRIVATE KEY-----\ndone'
  ],
  ['-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU', '-----BEGIN OPENSSH PRIVATE KEY-----****'],
  ['-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBg\n-----END PRIVATE KEY-----', '-----BEGIN PRIVATE KEY-----****-----END PRIVATE KEY-----'],
  [
    '-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----',
    '-----BEGIN PGP PRIVATE KEY BLOCK-----****-----END PGP PRIVATE KEY BLOCK-----'
  ],
  // high-entropy tokens next to credential words
  ['your API token is 9fQ2xL7pK3mZ8vR1tW6y, keep it', 'your API token is ****, keep it'],
  ['Secret for prod: Zm9vYmFyYmF6MTIzNDU2Nzg5', 'Secret for prod: ****'],
  ['the access key (2f7c9a1e4b8d3f6a0c5e) expired', 'the access key (****) expired'],
  // escaped text that is not JSON (a Python repr): a line after an escaped newline is still a line start
  ["{'stdout': 'ok\\npassword: hunter2\\nBearer Zx9abcDEF123\\n'}", "{'stdout': 'ok\\npassword: ****\\nBearer ****\\n'}"]
]
for (const [name, token] of Object.entries(TOKENS)) {
  POSITIVE.push([`${name}: ${token}`, `${name}: ****`])
  POSITIVE.push([`value ${token} end`, 'value **** end'])
  POSITIVE.push([`line one\n${token}`, 'line one\n****'])
}

// Negative cases: ordinary code, prose, logs and data that must come out unchanged.
const NEGATIVE: string[] = [
  'password_field = form.get("pw")',
  'const key = getKey()',
  'const password = getPassword()',
  'const apiKey = config.apiKey;',
  'const token = process.env.GITHUB_TOKEN',
  'password = os.environ["DB_PASSWORD"]',
  'interface User { password?: string; apiKey: string; token: string | undefined }',
  'export DB_PASSWORD=$DB_PASSWORD_FROM_VAULT',
  // eslint-disable-next-line no-template-curly-in-string -- a shell reference, not a template
  'echo "token: ${TOKEN}"',
  'password=None  # set later',
  'if (password == confirm) ok()',
  'commit 3f2a1b4c5d6e7f8091a2b3c4d5e6f708192a3b4c\nAuthor: Jane Doe <jane@example.com>',
  'Merge: 3f2a1b4 9e8d7c6',
  'sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08',
  'id: 550e8400-e29b-41d4-a716-446655440000',
  '{"id":"550e8400-e29b-41d4-a716-446655440000","max_tokens":1000,"next_page_token":"CAESBggBEAEYAQ","tokenizer":"cl100k_base"}',
  '<img src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==">',
  '{"type":"image","mimeType":"image/png","data":"iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="}',
  'The bearer of bad news. Bearer tokens are sent in a header.',
  'Basic authentication is disabled',
  'author: Jane Doe\nmonkey=banana\nkeys: [a, b]\npassage: the text',
  'PWD=/home/user/project\nOLDPWD=/tmp',
  'secret_name: db-creds\ntoken_type: Bearer\ntoken_url: https://auth.example.com/token',
  'isSecret: true, requireAuth: false',
  'ssh-keygen -t ed25519 -C "me@example.com"',
  'password is required. Forgot password? Reset it here.',
  'function_signature: (a: int) -> str',
  '-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIU\n-----END CERTIFICATE-----',
  'pip install scikit-learn && sk-learn-helpers --help',
  'https://example.com:8080/path?page=2&sort=name',
  'docker run -u 1000:1000 image',
  'Authorization: Bearer ****\npassword: ****',
  'for (const [k, v] of Object.entries(tokens)) total += v',
  'ghp_ is the prefix of a GitHub token; AKIA starts an AWS key id',
  'const eyJ = 1; // eyJ is base64 of {"',
  '[["Accept", "text/plain"], ["X-Trace", "abc"]]'
]

test('the positive corpus: every secret masked, the text around it kept', () => {
  for (const [input, expected] of POSITIVE) assert.equal(maskText(input), expected, input)
})

test('the negative corpus: ordinary code, prose and data come out unchanged', () => {
  for (const input of NEGATIVE) assert.equal(maskText(input), input)
})

test('a JSON text is masked on its decoded strings and stays valid JSON, at any line and inside nested JSON', () => {
  const stdout = ['first line', `Bearer ${TOKENS.jwt}`, 'password: hunter2', `DB_PASSWORD=pg-${run(12, ALNUM)}`, 'https://u:pw123@h/', `x ${TOKENS.githubClassic}`, 'last "quoted" \\ line'].join('\n')
  const inner = JSON.stringify({ note: `see\nAuthorization: Bearer ${TOKENS.openai}`, api_key: 'k-1234567' })
  const text = JSON.stringify({ stdout, exitCode: 0, nested: inner, list: ['a', `token=${TOKENS.npm}`] }, null, 2)
  const out = maskText(text)
  const parsed = JSON.parse(out)
  assert.equal(parsed.stdout, ['first line', 'Bearer ****', 'password: ****', 'DB_PASSWORD=****', 'https://u:****@h/', 'x ****', 'last "quoted" \\ line'].join('\n'))
  assert.deepEqual(JSON.parse(parsed.nested), { note: 'see\nAuthorization: Bearer ****', api_key: '****' })
  assert.deepEqual(parsed.list, ['a', 'token=****'])
  assert.equal(out.split('\n').length, text.split('\n').length, 'the formatting is kept')
  // Cut anywhere, the pieces are masked all the same.
  for (const cut of [40, 70, 200, text.length - 30]) {
    const head = maskText(text.slice(0, cut))
    for (const secret of ['hunter2', TOKENS.jwt, TOKENS.githubClassic, 'pw123', TOKENS.openai, 'k-1234567', TOKENS.npm]) assert.ok(!head.includes(secret as string), `${cut}: ${head}`)
  }
  // A text starting inside a JSON string (the tail of a cut one).
  assert.equal(maskText('ne\\npassword: hunter2\\nok","exitCode":0}', { inString: true }), 'ne\\npassword: ****\\nok","exitCode":0}')
})

test('any JSON text stays valid JSON, whatever secrets, quotes, backslashes and newlines its strings hold', () => {
  const fragment = fc.constantFrom('password: ', 'DB_PASSWORD=', 'Bearer ', 'api_key', '"', '\\', '\n', '\\n', ':', '=', ' ', 'https://u:', '@h/', 'curl -u a:', 'mysql -p',
    TOKENS.githubClassic as string, TOKENS.jwt as string, '-----BEGIN PRIVATE KEY-----', '{"token":', '[', ']', '{', '}', ',', 'é', '\u2028', 'x')
  const text = fc.array(fc.oneof(fragment, fc.string({ maxLength: 8 })), { maxLength: 12 }).map((parts) => parts.join(''))
  const key = fc.oneof(fc.constantFrom('password', 'token', 'stdout', 'X-Api-Key', 'note', 'auth'), fc.string({ maxLength: 6 }))
  const value = fc.letrec((tie) => ({
    node: fc.oneof(
      { depthSize: 'small' }, text, fc.integer(), fc.boolean(), fc.constant(null),
      fc.array(tie('node'), { maxLength: 4 }), fc.dictionary(key, tie('node'), { maxKeys: 4 })
    )
  })).node
  fc.assert(fc.property(value, fc.boolean(), (v, pretty) => {
    const json = JSON.stringify(v, null, pretty ? 2 : undefined)
    const out = maskText(json)
    JSON.parse(out)
    // A string inside holding JSON is still JSON too.
    JSON.parse(JSON.parse(maskText(JSON.stringify(json))))
  }), { numRuns: 500, seed: 27 })
})

test('maskValue: by key at any depth, arrays and [name, value] header pairs, strings scanned; the input untouched', () => {
  const input = {
    path: 'a.txt',
    token: 'abc',
    nested: { deeper: [{ headers: { Authorization: 'Bearer sk-live-123456789', accept: 'json' } }, { list: [{ password: 'hunter2' }] }] },
    rawHeaders: [['X-Api-Key', 'k-123'], ['Accept', 'text/plain']],
    empty: { secret: '' },
    flags: { requireAuth: true },
    env: { PWD: '/home/me', DB_PASSWORD: 'pw-1' },
    command: 'psql postgres://app:s3cret@db/app\nexport API_KEY=k-998877',
    count: 3,
    max_tokens: 100
  }
  const copy = structuredClone(input)
  const out = maskValue(input, { strings: true }) as typeof input
  assert.deepEqual(input, copy, 'the input is not modified')
  assert.equal(out.token, MASK)
  assert.equal((out.nested.deeper[0] as any).headers.Authorization, MASK)
  assert.equal((out.nested.deeper[0] as any).headers.accept, 'json')
  assert.equal((out.nested.deeper[1] as any).list[0].password, MASK)
  assert.deepEqual(out.rawHeaders, [['X-Api-Key', MASK], ['Accept', 'text/plain']])
  assert.equal(out.empty.secret, '', 'an empty value stays visibly empty')
  assert.equal(out.flags.requireAuth, true, 'a boolean is no secret')
  assert.deepEqual(out.env, { PWD: '/home/me', DB_PASSWORD: MASK })
  assert.equal(out.command, 'psql postgres://app:****@db/app\nexport API_KEY=****')
  assert.equal(out.count, 3)
  assert.equal(out.max_tokens, 100)
  const same = { a: 'plain text', b: [1, 2, { c: 'more' }] }
  assert.equal(maskValue(same, { strings: true }), same, 'nothing to mask: the same object back')
  const byKeyOnly = maskValue({ password: 'x', note: 'password: y' }, { strings: false })
  assert.deepEqual(byKeyOnly, { password: MASK, note: 'password: y' }, 'strings: false masks by key only')
  assert.deepEqual(maskValue({ password: 'x' }, { strings: true, mask: '[redacted]' }), { password: '[redacted]' })
})

test('a secret hidden below the depth limit is cut off, never kept', () => {
  let v: unknown = { password: 'deep-secret' }
  for (let i = 0; i < MAX_DEPTH + 10; i++) v = { a: v }
  const text = JSON.stringify(maskValue(v, { strings: true }))
  assert.ok(!text.includes('deep-secret'))
  assert.ok(text.includes(TOO_DEEP))
})

// A quantified group that itself holds an unbounded quantifier, `(a+)+` or `(?:x|y*)*`, is what
// backtracks exponentially. None of the detector's patterns may have one.
function nestedQuantifier (source: string): boolean {
  const groups: boolean[] = []
  let inner = false
  for (let i = 0; i < source.length; i++) {
    const c = source[i]
    if (c === '\\') {
      i++
      continue
    }
    if (c === '[') {
      while (i < source.length && source[i] !== ']') i += source[i] === '\\' ? 2 : 1
      continue
    }
    if (c === '(') {
      groups.push(inner)
      inner = false
    } else if (c === ')') {
      const had = inner
      inner = groups.pop() ?? false
      const next = source.slice(i + 1)
      const repeats = /^(?:[*+]|\{\d+,\d*\})/.exec(next)
      if (repeats !== null && !/^\{\d+,1\}/.test(next) && had) return true
      if (had) inner = true
    } else if (c === '*' || c === '+' || (c === '{' && /^\{\d+,\d*\}/.test(source.slice(i)))) {
      inner = true
    }
  }
  return false
}

test('linear time: no pattern nests quantifiers, and adversarial inputs cost work proportional to their size', () => {
  assert.equal(nestedQuantifier('(a+)+'), true, 'the check can fail')
  assert.equal(nestedQuantifier(String.raw`(?:[^"\\]|\\.)*`), false)
  for (const p of PATTERNS) assert.equal(nestedQuantifier(p.source), false, p.source)

  const n = 200_000
  const adversarial = [
    'password='.repeat(n / 9),
    'a-'.repeat(n / 2) + '=x',
    '"'.repeat(n),
    '"\\'.repeat(n / 2),
    '"a'.repeat(n / 2),
    '{"password":' + '['.repeat(n),
    '{"a":"' + '\\"'.repeat(n / 2),
    'https://' + 'a:'.repeat(n / 2),
    'https://a:' + 'b'.repeat(n),
    'x://'.repeat(n / 4),
    '-----BEGIN PRIVATE KEY-----'.repeat(n / 27),
    'eyJ' + 'a'.repeat(n),
    'eyJaaaaaaaaaaa.'.repeat(n / 15),
    'Bearer '.repeat(n / 7),
    'token '.repeat(n / 6) + 'a1'.repeat(n / 2),
    'token is is is '.repeat(n / 15),
    '?a='.repeat(n / 3),
    'curl -u ' + 'a'.repeat(n) + '\n' + 'curl -u a:'.repeat(n / 10),
    'mysql -p'.repeat(n / 8),
    'x\\npassword:'.repeat(n / 12),
    'sk-' + 'a'.repeat(n),
    ' \t'.repeat(n / 2) + 'password',
    JSON.stringify(JSON.stringify(JSON.stringify(JSON.stringify(JSON.stringify(JSON.stringify({ password: 'x'.repeat(n / 64), note: 'a\npassword: y' })))))),
    run(n, ALNUM + ' :=-_"\\\n/@?&.', 99)
  ]
  for (const input of adversarial) {
    const before = detectorWork()
    const out = maskText(input)
    const work = detectorWork() - before
    assert.equal(typeof out, 'string')
    // Each character is handed to at most one pass per nesting level (five levels), plus the decode of its literal.
    assert.ok(work <= 12 * input.length + 64, `work ${work} for ${input.length} characters: ${input.slice(0, 40)}`)
  }
})

/**
 * Asserts that masking each of `hostile` costs under `limit` times the CPU of prose of the same size, measured in the
 * same process, so the machine's speed cancels out (each text's first 20,000 characters masked first, to warm up).
 */
function assertCostsLikeProse (hostile: readonly string[], n: number, limit = 25): void {
  const prose = 'The quick brown fox jumps over the lazy dog, then the token of 2024 goes home. '.repeat(n / 80)
  const cpu = (text: string): number => {
    const start = process.cpuUsage()
    maskText(text)
    const used = process.cpuUsage(start)
    return used.user + used.system
  }
  for (const text of [prose, ...hostile]) maskText(text.slice(0, 20_000))
  const base = Math.max(cpu(prose), 1000)
  for (const text of hostile) {
    const ratio = cpu(text) / base
    assert.ok(ratio < limit, `${text.slice(0, 20)}...: ${ratio.toFixed(1)}x the CPU of prose of its size`)
  }
}

test('no token format reads a long run again from each place it could start: back-to-back JWT heads cost about what prose does', () => {
  // The work counter above counts characters handed to each pass, not the regex engine's steps inside one: a JWT
  // head (`eyJ` and a run with no dot) was read up to 4,096 characters from each of its `eyJ`s (1 MB: 1.2 s of a
  // blocked event loop, from a tenant's arguments or result). Compared with prose of the same size in the same
  // process, so the machine's speed cancels out: 50-400x before the fix, 1-5x after.
  const n = 400_000
  const hostile = ['eyJabcdefghijklm'.repeat(n / 16), JSON.stringify({ a: '-eyJabcdefghijk'.repeat(n / 15) })]
  assertCostsLikeProse(hostile, n)
})

test('texts full of short runs with digits (numbers, logs, ids of 15) cost about what prose does, and a token among them is still masked', () => {
  // Where a random-looking token may be is asked of the runs with a digit (starts.ts mayHoldMixedRun): each read once, at most
  // one per 128 characters before the credential-word scan runs anyway. Compared with prose in the same process.
  const n = 400_000
  const hostile = [
    'some_long_identifier_name ' + '1 '.repeat(n / 2),
    'record_identifier_value,12,34,56,78,90\n'.repeat(n / 39),
    'some_long_identifier_name ' + 'a1b2c3d4e5f6g7h '.repeat(n / 16),
    '0'.repeat(15) + ' ' + 'abcdefghijklmnop'.repeat(n / 16),
    // One run of digits and no letter: read once, not once from each of its digits.
    '7'.repeat(n)
  ]
  assertCostsLikeProse(hostile, n)
  const token = '9fQ2mB7kL4pZ8wR1xV3'
  for (const text of hostile) assert.equal(maskText(`${text.slice(0, 50_000)} the token is ${token}`).endsWith(`the token is ${MASK}`), true, text.slice(0, 30))
})

test('the scan for flags, curl and mysql (the character before each word matched, not looked behind) costs about what prose does on texts full of them', () => {
  // COMMAND_WORDS matches the character before a word instead of a lookbehind (starts.ts): texts of dashes, of words glued to what may not
  // come before them, and of nothing but command names are read once, as prose is. Compared in the same process, as the test above.
  const n = 400_000
  const hostile = ['-'.repeat(n), 'x--a'.repeat(n / 4), ' curl'.repeat(n / 5), '_mysql-mariadb'.repeat(n / 14)]
  assertCostsLikeProse(hostile, n)
})

test('where a credential word or name may start: not inside a word, not after a digit or a third dash', () => {
  const token = '9fQ2mB7kL4pZ8wR1xV3'
  assert.equal(maskText(`token is ${token}`), `token is ${MASK}`, 'at the start of the text')
  assert.equal(maskText(`my token is ${token}`), `my token is ${MASK}`)
  assert.equal(maskText(`xtoken is ${token}`), `xtoken is ${token}`, 'a word that ends in token is no credential word')
  assert.equal(maskText('password: hunter2hunter2'), `password: ${MASK}`)
  assert.equal(maskText('--password=abc123'), `--password=${MASK}`)
  assert.equal(maskText('_secret=abc123'), `_secret=${MASK}`)
  assert.equal(maskText('1password: hunter2hunter2'), '1password: hunter2hunter2', 'a name starts with a letter or _')
  assert.equal(maskText('9secret=abc123'), '9secret=abc123')
  assert.equal(maskText('---password=abc123'), '---password=abc123', 'at most two dashes')
})

test('separators, flags, curl and mysql lines as the whole-text patterns read them: comparisons, a leading `=`, names ending in a digit', () => {
  const cases: Array<[string, string]> = [
    ['=password=hunter2', '=password=****'],
    ['pin2=1234 pin=1234', 'pin2=1234 pin=****'],
    ['x!=:password=a1', 'x!=:password=****'],
    ['a==password=b', 'a==password=****'],
    ['09:07 key:=v password := s3cret', '09:07 key:=v password := ****'],
    ['DB_PASSWORD_2=abc DB_PASSWORD_=abc', 'DB_PASSWORD_2=abc DB_PASSWORD_=****'],
    ['Xsk-abcdefghijklmnopqrstuvwx1 sk-abcdefghijklmnopqrstu1vwx', 'Xsk-abcdefghijklmnopqrstuvwx1 ****'],
    ['ls --color=auto --password hunter2 && curl -u a:b x && mysql -pS3cret', 'ls --color=auto --password **** && curl -u a:**** x && mysql -p****'],
    ['-rw-r--r-- 1 dev dev 1207 Dec  6 09:07 src/module-12/index.ts', '-rw-r--r-- 1 dev dev 1207 Dec  6 09:07 src/module-12/index.ts']
  ]
  for (const [input, expected] of cases) assert.equal(maskText(input), expected, input)
})

test('curl and mysql credentials masked on the lines that run them, wherever the line is, and only there', () => {
  const text = [
    'curl -u ops:first-Pw-1 https://a', // the first line
    'echo -u x:not-a-command-line',
    '  mysql -u root -pLine3Pw db\r', // a CRLF line
    'notes: -pNotMySQL and -u y:z',
    'echo start && curl -s --user "bob:pw-123" https://x && mysql -pAlso4',
    'mysqlx -pNoTool curl2 -u a:b', // names glued to other characters run nothing
    'sudo -u admin:before-Pw-8 curl https://b', // a credential before the command's name, on its line
    'last: curl -u eve:end-Pw-7' // the last line, no newline after it
  ].join('\n')
  const expected = [
    'curl -u ops:**** https://a',
    'echo -u x:not-a-command-line',
    '  mysql -u root -p**** db\r',
    'notes: -pNotMySQL and -u y:z',
    'echo start && curl -s --user "bob:****" https://x && mysql -p****',
    'mysqlx -pNoTool curl2 -u a:b',
    'sudo -u admin:**** curl https://b',
    'last: curl -u eve:****'
  ].join('\n')
  assert.equal(maskText(text), expected)
})

test('URL credentials tried at each `://` and command lines found by one scan: linear on texts made of them', () => {
  // Each `://` costs at most one attempt of each URL pattern from its scheme's start (a user and a password run of up
  // to 256 characters each), or a whole-text scan where they are dense; each curl or mysql line one rewrite of that
  // line. Texts where every piece is a match do that work per piece (8-60x prose here, old and new code alike): the
  // bound is set to catch a pass that reads the text again from each hit (quadratic: thousands of times prose at this
  // size), not the per-match work.
  const n = 400_000
  const hostile = [
    'a://'.repeat(n / 4),
    ('s://u:' + 'p'.repeat(250) + ' ').repeat(n / 257),
    ('s://:' + '@'.repeat(120) + '/').repeat(n / 126),
    ('x://' + 'a1B2'.repeat(60) + ':').repeat(n / 245),
    'curl -u a:b\n'.repeat(n / 12),
    'curl -s https://x\n'.repeat(n / 18),
    'mysql -pS3cret curl\n'.repeat(n / 20)
  ]
  assertCostsLikeProse(hostile, n, 150)
})
