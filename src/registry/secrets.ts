import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import type { ServerConfig } from './server-config.js'
import type { RegistryScope } from './types.js'

/**
 * Secrets at rest (docs/ARCHITECTURE.md#registry): header values and env values of server configs are sealed with
 * AES-256-GCM before they reach the registry, opened only when a client is built, and masked
 * whenever a config is shown.
 *
 * Keys (environment):
 * - `SECRETS_KEY`: the current key, `base64(32 bytes)` or `keyId:base64(32 bytes)`. Every new
 *   value is sealed with it.
 * - `SECRETS_KEY_PREVIOUS`: comma-separated older keys in the same format, used only to open
 *   values sealed before a rotation.
 * A key id is `[A-Za-z0-9-]{1,32}`; without one it is derived as `k` + the first 8 hex chars
 * of SHA-256(key), so the same key always gets the same id. Rotation: move the old key to
 * SECRETS_KEY_PREVIOUS, set the new one as SECRETS_KEY, restart; values are re-sealed with the
 * new key whenever their server is written again; drop the old key once nothing uses it.
 *
 * Sealed value: `enc:v1:{keyId}:{iv}:{ciphertext}:{tag}` (base64url; 12-byte random IV per
 * value, 16-byte tag; the AAD binds the format version, the key id, the field and a caller
 * context naming the scope and server). A value that does not start
 * with `enc:v1:` is plaintext (stored before a key was configured) and opens as itself.
 *
 * Masking: env values and header values show as `****`; a header value starting with a known
 * auth scheme keeps the scheme (`Bearer ****`), which tells an operator what kind of credential
 * is set without revealing any of it. Empty values stay empty.
 */

const SEALED_PREFIX = 'enc:v1:'
export const MASK = '****'

const KEY_ID = /^[A-Za-z0-9-]{1,32}$/
const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/
const BASE64URL_PART = /^[A-Za-z0-9_-]+$/
const AUTH_SCHEMES = /^(Bearer|Basic|Token|Bot|Digest|ApiKey|Api-Key|Key)\s+\S/i
const IV_BYTES = 12
const TAG_BYTES = 16

export type SecretOpenFailure = 'malformed' | 'unknown-key' | 'no-key' | 'tampered'
export type OpenResult<T> = { ok: true, value: T } | { ok: false, reason: SecretOpenFailure, message: string }

interface SecretKey {
  id: string
  key: Buffer
}

export interface SecretBoxOptions {
  /** SECRETS_KEY */
  key?: string | undefined
  /** SECRETS_KEY_PREVIOUS (comma-separated) */
  previousKeys?: string | undefined
}

function parseKey (spec: string, name: string): SecretKey | string {
  const trimmed = spec.trim()
  const colon = trimmed.indexOf(':')
  const id = colon === -1 ? undefined : trimmed.slice(0, colon)
  const encoded = colon === -1 ? trimmed : trimmed.slice(colon + 1)
  if (id !== undefined && !KEY_ID.test(id)) return `${name}: key id must match ${KEY_ID.source}`
  // Buffer.from(base64) silently skips bad characters: check the text before trusting the length.
  if (!BASE64.test(encoded)) return `${name}: key must be standard base64 (try: openssl rand -base64 32)`
  const key = Buffer.from(encoded, 'base64')
  if (key.length !== 32) return `${name}: key must be 32 bytes, got ${key.length} (try: openssl rand -base64 32)`
  return { id: id ?? `k${createHash('sha256').update(key).digest('hex').slice(0, 8)}`, key }
}

/** Sealing, opening and masking of config secrets with one key set. */
export class SecretBox {
  /** False when no SECRETS_KEY is configured: values are stored as given (warn at start-up). */
  readonly encrypted: boolean
  /** Id of the key new values are sealed with. */
  readonly keyId: string | undefined
  #current: SecretKey | undefined
  #keys: Map<string, Buffer>

  constructor (current: SecretKey | undefined, previous: SecretKey[]) {
    this.#current = current
    this.encrypted = current !== undefined
    this.keyId = current?.id
    this.#keys = new Map(previous.map((k) => [k.id, k.key]))
    if (current !== undefined) this.#keys.set(current.id, current.key)
  }

  isSealed (value: string): boolean {
    return value.startsWith(SEALED_PREFIX)
  }

  /**
   * Seals one value with the current key; returns it unchanged when no key is configured.
   * `aad` binds the value to where it is used: opening with another `aad` fails.
   */
  sealValue (plain: string, aad = ''): string {
    const current = this.#current
    if (current === undefined) return plain
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv('aes-256-gcm', current.key, iv, { authTagLength: TAG_BYTES })
    cipher.setAAD(aadBytes(current.id, aad))
    const ciphertext = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()])
    const tag = cipher.getAuthTag()
    return `${SEALED_PREFIX}${current.id}:${iv.toString('base64url')}:${ciphertext.toString('base64url')}:${tag.toString('base64url')}`
  }

  /** Opens one value. Plaintext passes through; a sealed value that cannot be opened is a failure, never garbage. */
  openValue (value: string, aad = ''): OpenResult<string> {
    if (!this.isSealed(value)) return { ok: true, value }
    const parts = value.slice(SEALED_PREFIX.length).split(':')
    if (parts.length !== 4) return { ok: false, reason: 'malformed', message: 'sealed secret is malformed' }
    const [id, ivText, ctText, tagText] = parts as [string, string, string, string]
    // An empty plaintext has an empty ciphertext, so only the other parts must be non-empty.
    if (!KEY_ID.test(id) || !BASE64URL_PART.test(ivText) || !BASE64URL_PART.test(tagText) || (ctText !== '' && !BASE64URL_PART.test(ctText))) {
      return { ok: false, reason: 'malformed', message: 'sealed secret is malformed' }
    }
    if (this.#keys.size === 0) return { ok: false, reason: 'no-key', message: `secret sealed with key ${id} but SECRETS_KEY is not set` }
    const key = this.#keys.get(id)
    if (key === undefined) return { ok: false, reason: 'unknown-key', message: `secret sealed with unknown key id ${id}: add that key to SECRETS_KEY_PREVIOUS` }
    const iv = Buffer.from(ivText, 'base64url')
    const tag = Buffer.from(tagText, 'base64url')
    if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) return { ok: false, reason: 'malformed', message: 'sealed secret is malformed' }
    try {
      const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES })
      decipher.setAAD(aadBytes(id, aad))
      decipher.setAuthTag(tag)
      const plain = Buffer.concat([decipher.update(Buffer.from(ctText, 'base64url')), decipher.final()])
      return { ok: true, value: plain.toString('utf8') }
    } catch {
      return { ok: false, reason: 'tampered', message: `secret sealed with key ${id} failed authentication (tampered or wrong key)` }
    }
  }

  /**
   * A copy of `config` (plaintext, as a caller sent it) with every header and env value sealed.
   * Each value is bound to its field and to `context`, which should name where the config is
   * stored (e.g. `u:42/github`, `g/github`): a ciphertext copied to another field, server or
   * tenant then fails to open instead of being sent to a server its owner never chose.
   * Values that merely look sealed are sealed too: input is never trusted to be ciphertext.
   */
  sealConfig (config: ServerConfig, context = ''): ServerConfig {
    return mapSecrets(config, (kind, name, value) => this.sealValue(value, fieldAad(context, kind, name)))
  }

  /** A copy of `config` with every header and env value opened, or the first failure (naming the field, not the value). */
  openConfig (config: ServerConfig, context = ''): { ok: true, config: ServerConfig } | { ok: false, reason: SecretOpenFailure, message: string } {
    let failure: { reason: SecretOpenFailure, message: string } | undefined
    const opened = mapSecrets(config, (kind, name, value) => {
      if (failure !== undefined) return value
      const result = this.openValue(value, fieldAad(context, kind, name))
      if (result.ok) return result.value
      failure = { reason: result.reason, message: `${kind} ${name}: ${result.message}` }
      return value
    })
    return failure === undefined ? { ok: true, config: opened } : { ok: false, ...failure }
  }

  /** A copy of `config` safe to show: every header and env value masked (sealed or not). */
  maskConfig (config: ServerConfig, context = ''): ServerConfig {
    return mapSecrets(config, (kind, name, value) => {
      const opened = this.openValue(value, fieldAad(context, kind, name))
      return maskValue(kind, opened.ok ? opened.value : undefined)
    })
  }
}

type SecretKind = 'header' | 'env' | 'oauth'

function aadBytes (keyId: string, aad: string): Buffer {
  return Buffer.from(`${SEALED_PREFIX}${keyId}\n${aad}`)
}

function fieldAad (context: string, kind: SecretKind, name: string): string {
  // Header names are case-insensitive on the wire, so they are bound case-folded.
  return `${context}\n${kind}:${kind === 'header' ? name.toLowerCase() : name}`
}

function mapSecrets (config: ServerConfig, fn: (kind: SecretKind, name: string, value: string) => string): ServerConfig {
  const copy = structuredClone(config)
  if (copy.headers !== undefined) {
    for (const [name, value] of Object.entries(copy.headers)) copy.headers[name] = fn('header', name, value)
  }
  if (copy.env !== undefined) {
    for (const [name, value] of Object.entries(copy.env)) copy.env[name] = fn('env', name, value)
  }
  if (copy.auth?.clientSecret !== undefined) copy.auth.clientSecret = fn('oauth', 'clientSecret', copy.auth.clientSecret)
  return copy
}

/** The masked form of one value; `undefined` (could not be opened) masks fully. */
function maskValue (kind: SecretKind, plain: string | undefined): string {
  if (plain === '') return ''
  if (kind === 'header' && plain !== undefined) {
    const scheme = AUTH_SCHEMES.exec(plain)?.[1]
    if (scheme !== undefined) return `${scheme} ${MASK}`
  }
  return MASK
}

/**
 * For read-modify-write clients: a header or env value in `incoming` that is exactly the
 * masked form of the same field in `previous` (an opened config) means "unchanged" and gets
 * the previous value back. Header names match case-insensitively.
 */
export function restoreMaskedSecrets (incoming: ServerConfig, previous: ServerConfig): ServerConfig {
  const prevHeaders = new Map(Object.entries(previous.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]))
  return mapSecrets(incoming, (kind, name, value) => {
    const prior = priorSecret(previous, prevHeaders, kind, name)
    if (prior === undefined || prior === '') return value
    return value === maskValue(kind, prior) ? prior : value
  })
}

/** The value of the same secret field in `previous` (header names case-folded in `prevHeaders`). */
function priorSecret (previous: ServerConfig, prevHeaders: Map<string, string>, kind: SecretKind, name: string): string | undefined {
  if (kind === 'header') return prevHeaders.get(name.toLowerCase())
  if (kind === 'env') return previous.env?.[name]
  return previous.auth?.clientSecret
}

/** The configured issuer, as a URL with its default port and trailing slash folded; '' when the server's metadata names it. */
function issuerOf (config: ServerConfig): string {
  const issuer = config.auth?.authorizationServer
  if (issuer === undefined) return ''
  try {
    return new URL(issuer).href.replace(/\/$/, '')
  } catch {
    return issuer
  }
}

/** `scheme://host:port` of a URL (default ports folded), or undefined without a valid URL. */
function originOf (url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}

/**
 * The fields (`header Authorization`) whose masked value in `incoming` would get the stored
 * value of `previous` back (restoreMaskedSecrets) although the place it is sent to changed: the
 * server's origin (scheme, host, port) for headers and env, and for the OAuth client secret, which
 * goes to the authorization server's token and revocation endpoints, the server's origin and
 * `auth.authorizationServer` (the issuer, or its absence: then the server's metadata names it). Such
 * a restore would send a secret to a place its owner never chose (a tenant re-pointing an
 * operator-provisioned server, or its issuer, at its own URL), so the caller must refuse it: a new
 * place needs the secret's actual value. Another path or query on the same origin is fine.
 */
export function maskedSecretsChangingOrigin (incoming: ServerConfig, previous: ServerConfig): string[] {
  const sameServer = originOf(incoming.url) === originOf(previous.url)
  // The client secret goes to the issuer, which the server's metadata names when the config does not: both must stay.
  const sameIssuer = sameServer && issuerOf(incoming) === issuerOf(previous)
  if (sameIssuer) return []
  const prevHeaders = new Map(Object.entries(previous.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v]))
  const fields: string[] = []
  mapSecrets(incoming, (kind, name, value) => {
    if (kind === 'oauth' ? sameIssuer : sameServer) return value
    const prior = priorSecret(previous, prevHeaders, kind, name)
    if (prior !== undefined && prior !== '' && value === maskValue(kind, prior)) fields.push(`${kind} ${name}`)
    return value
  })
  return fields
}

/** The `context` to seal and open a stored server's secrets with: its scope and serverId. */
export function secretContext (scope: RegistryScope, serverId: string): string {
  return scope.kind === 'global' ? `g/${serverId}` : `u:${scope.userId}/${serverId}`
}

/** Every non-empty secret value of an opened config, for redacting log and error text. */
export function secretValues (config: ServerConfig): string[] {
  return [...Object.values(config.headers ?? {}), ...Object.values(config.env ?? {}), config.auth?.clientSecret ?? ''].filter((v) => v !== '')
}

/** Builds the box from key specs. A malformed key is a start-up error (the message names the variable, never the key). */
export function createSecretBox (options: SecretBoxOptions): { ok: true, box: SecretBox } | { ok: false, message: string } {
  let current: SecretKey | undefined
  if (options.key !== undefined && options.key.trim() !== '') {
    const parsed = parseKey(options.key, 'SECRETS_KEY')
    if (typeof parsed === 'string') return { ok: false, message: parsed }
    current = parsed
  }
  const previous: SecretKey[] = []
  const specs = (options.previousKeys ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
  for (const [i, spec] of specs.entries()) {
    const parsed = parseKey(spec, `SECRETS_KEY_PREVIOUS[${i}]`)
    if (typeof parsed === 'string') return { ok: false, message: parsed }
    const clash = previous.find((k) => k.id === parsed.id) ?? (current?.id === parsed.id ? current : undefined)
    if (clash !== undefined && !clash.key.equals(parsed.key)) return { ok: false, message: `SECRETS_KEY_PREVIOUS[${i}]: key id ${parsed.id} is used by another key` }
    previous.push(parsed)
  }
  if (current === undefined && previous.length > 0) {
    return { ok: false, message: 'SECRETS_KEY_PREVIOUS is set without SECRETS_KEY: set the current key too' }
  }
  return { ok: true, box: new SecretBox(current, previous) }
}

/** Reads SECRETS_KEY and SECRETS_KEY_PREVIOUS from an env object (server.ts passes process.env). */
export function secretBoxFromEnv (env: Readonly<Record<string, string | undefined>>): { ok: true, box: SecretBox } | { ok: false, message: string } {
  return createSecretBox({ key: env.SECRETS_KEY, previousKeys: env.SECRETS_KEY_PREVIOUS })
}
