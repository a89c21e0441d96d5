/**
 * Which names hold a secret (docs/ARCHITECTURE.md#secrets): key, header, variable and flag names
 * (`DB_PASSWORD`, `apiKey`, `X-Api-Key`, `--db-password`), and URL query parameter names, read
 * more broadly. The detector (detector.ts) masks the values under them. A name is judged on its
 * words, and each verdict is remembered, within a bound. No I/O, no dependency.
 */

// A name is split into lowercase words (`DB_PASSWORD`, `dbPassword`, `db-password` and
// `db.password` are `db password`); it names a secret when the words joined end with one of these.
const SECRET_ENDINGS = [
  'password', 'passwd', 'passphrase', 'passcode', 'secret', 'token', 'apikey', 'accesskey', 'accesskeyid', 'secretkey',
  'privatekey', 'signingkey', 'encryptionkey', 'decryptionkey', 'masterkey', 'sessionkey', 'appkey', 'authkey', 'clientkey',
  'accountkey', 'subscriptionkey', 'licensekey', 'hmackey', 'sharedkey', 'authorization', 'credential', 'credentials',
  'cookie', 'cookies', 'sessionid', 'sessid', 'auth', 'pwd', 'jwt', 'bearer'
]
// Or when its last word is one of these (`db_pass`, `user_pin`; not `bypass`, `spin`).
const SECRET_LAST_WORDS = new Set(['pass', 'pin', 'otp'])
// A signature is a secret in request signing (`X-Amz-Signature`, `X-Hub-Signature`, `sig`), not in code (`function_signature`).
const SIGNATURE_WORDS = new Set(['signature', 'sig'])
const SIGNERS = new Set(['x', 'amz', 'hub', 'hmac', 'webhook', 'goog', 'slack', 'request'])
// Paging and counting tokens are no credentials (`next_page_token`, `maxToken`).
const NOT_CREDENTIAL_TOKEN = new Set(['max', 'min', 'num', 'page', 'next', 'prev', 'previous', 'continuation', 'cursor', 'sync', 'count'])

const nameVerdicts = new Map<string, boolean>()
const queryVerdicts = new Map<string, boolean>()

/** The verdict on a name, remembered: names repeat from call to call (short names only, within a bound). */
function remembered (verdicts: Map<string, boolean>, name: string, classify: (name: string) => boolean): boolean {
  if (name.length > 128) return classify(name)
  let known = verdicts.get(name)
  if (known === undefined) {
    known = classify(name)
    if (verdicts.size >= 4096) verdicts.clear()
    verdicts.set(name, known)
  }
  return known
}

/**
 * Whether a key, header, variable or flag name holds a secret: `password`, `DB_PASSWORD`,
 * `PGPASSWORD`, `api_key`, `X-Api-Key`, `apiKey`, `access_token`, `GITHUB_TOKEN`, `client_secret`,
 * `aws_secret_access_key`, `Authorization`, `Set-Cookie`, `session_id`, `basic_auth`, `--db-password`;
 * not `password_field`, `max_tokens`, `next_page_token`, `tokenizer`, `author`, `key`, `monkey`.
 */
export function isSecretName (name: string): boolean {
  return remembered(nameVerdicts, name, classifyName)
}

function nameWords (name: string): string[] {
  return name.slice(0, 256).replace(/([a-z0-9])([A-Z])/g, '$1 $2').toLowerCase().split(/[^a-z0-9]+/).filter((w) => w !== '')
}

// A name is a secret's only when its letters and digits, joined and lower-cased, end with one of SECRET_ENDINGS, a word of
// SECRET_LAST_WORDS or SIGNATURE_WORDS (the last word is their suffix): one test of that rules out most names at once
// (an object's keys, unique ones past the verdicts' bound, were 1.5-2.7 us each to split into words).
const MAY_END = new RegExp(`(?:${[...SECRET_ENDINGS, ...SECRET_LAST_WORDS, ...SIGNATURE_WORDS].join('|')})$`)
// Lower-cased first, as nameWords does: a few other characters lower-case to a-z (U+212A, the Kelvin sign, to k).
const NOT_ALNUM = /[^a-z0-9]+/g

function classifyName (name: string): boolean {
  if (!MAY_END.test(name.slice(0, 256).toLowerCase().replace(NOT_ALNUM, ''))) return false
  return classifyWords(name)
}

/** classifyName on the name's words alone, without the test of their ending (the names test compares the two). */
export function classifyWords (name: string): boolean {
  const words = nameWords(name)
  const last = words[words.length - 1]
  if (last === undefined) return false
  if (SIGNATURE_WORDS.has(last)) return words.length === 1 || words.some((w) => SIGNERS.has(w))
  if (SECRET_LAST_WORDS.has(last)) return true
  const joined = words.join('')
  if (!SECRET_ENDINGS.some((e) => joined.endsWith(e))) return false
  if (joined.endsWith('token') && words.some((w) => NOT_CREDENTIAL_TOKEN.has(w))) return false
  return true
}

// Query parameter names are read more broadly: a `key`, `session` or `sig` in a URL is a credential.
const QUERY_CREDENTIAL = /key|token|secret|passw|pwd|auth|credential|signature|sig$|session|cookie|jwt|bearer/

/** Whether a URL query parameter name (raw or percent-encoded) carries a credential: `api_key`, `key`, `Client%5FSecret`, `X-Amz-Signature`. */
export function isQueryCredentialName (rawName: string): boolean {
  return remembered(queryVerdicts, rawName, classifyQueryName)
}

function classifyQueryName (rawName: string): boolean {
  let name: string
  try {
    name = decodeURIComponent(rawName.replace(/\+/g, ' '))
  } catch {
    name = rawName
  }
  return QUERY_CREDENTIAL.test(name.toLowerCase().replace(/-/g, '_'))
}
