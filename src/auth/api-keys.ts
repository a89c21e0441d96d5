import { createHash, timingSafeEqual } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { ConfigError } from '../config.js'
import { isValidId } from '../naming/names.js'

/** What a key grants: every tenant (admin) or exactly one userId. */
export type KeyScope = { kind: 'admin' } | { kind: 'tenant', userId: string } | { kind: 'approver', userId: string }

/** A configured key as the lookup returns it. The key itself is never kept in clear. */
export interface ApiKeyEntry {
  scope: KeyScope
  /**
   * A short, stable, non-reversible id of the key (16 hex chars of its SHA-256), for
   * per-key rate-limit buckets across instances. Never the key; never logged with it.
   */
  id: string
  /** Where the key was configured (`API_KEYS entry 2`, `API_KEYS_FILE line 7`), for messages. */
  origin: string
}

const MIN_KEY_LENGTH = 16
const MAX_KEY_LENGTH = 512

/**
 * The characters a key may use: RFC 6750's b64token alphabet, so every key can travel in
 * `Authorization: Bearer <key>` as is, and contains no `,` or `:` that would make
 * `key:scope` lists ambiguous.
 */
const KEY_CHARS = /^[A-Za-z0-9._~+/=-]+$/

function sha256 (text: string): Buffer {
  return createHash('sha256').update(text, 'utf8').digest()
}

/**
 * The configured API keys. Lookups compare SHA-256 digests with timingSafeEqual against
 * every entry (no early exit, no length check on the presented key), so the time a lookup
 * takes does not depend on how much of a key an attacker guessed.
 */
export class ApiKeys {
  readonly #entries: ReadonlyArray<{ digest: Buffer, entry: ApiKeyEntry }>

  constructor (entries: ReadonlyArray<{ digest: Buffer, entry: ApiKeyEntry }>) {
    this.#entries = entries
  }

  /** No keys: the gateway runs open (local development). */
  get size (): number {
    return this.#entries.length
  }

  /** How many keys of each kind, for the start-up announcement (counts only, never keys). */
  counts (): { admin: number, tenant: number, approver: number } {
    let admin = 0
    let approver = 0
    for (const { entry } of this.#entries) {
      if (entry.scope.kind === 'admin') admin++
      else if (entry.scope.kind === 'approver') approver++
    }
    return { admin, tenant: this.#entries.length - admin - approver, approver }
  }

  /** The entry of a presented key, or undefined. Constant time in the key's content. */
  lookup (presented: string): ApiKeyEntry | undefined {
    const digest = sha256(presented)
    let found: ApiKeyEntry | undefined
    for (const { digest: candidate, entry } of this.#entries) {
      // Every entry is compared even after a match: the loop's duration reveals nothing.
      if (timingSafeEqual(candidate, digest) && found === undefined) found = entry
    }
    return found
  }
}

interface RawPair { text: string, origin: string }

/**
 * Parses one `key:scope` pair. The scope is everything after the first `:` (keys cannot
 * contain one): `*`, a userId, or `approver:{userId}`.
 * Messages name the origin and the scope, never the key.
 */
function parsePair ({ text, origin }: RawPair): { key: string, scope: KeyScope } {
  const colon = text.indexOf(':')
  if (colon < 0) throw new ConfigError(`${origin}: expected key:scope (scope * for admin, approver:{userId} for an approver, else a userId)`)
  const key = text.slice(0, colon).trim()
  const scopeText = text.slice(colon + 1).trim()
  const approverOf = scopeText.startsWith('approver:') ? scopeText.slice('approver:'.length).trim() : undefined
  let scope: KeyScope
  if (scopeText === '*') scope = { kind: 'admin' }
  else if (approverOf !== undefined && isValidId(approverOf)) scope = { kind: 'approver', userId: approverOf }
  else if (isValidId(scopeText)) scope = { kind: 'tenant', userId: scopeText }
  else throw new ConfigError(`${origin}: scope must be * (admin), approver:{userId} or a userId matching ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$`)
  const scopeLabel = scope.kind === 'admin' ? 'scope *' : scope.kind === 'approver' ? `scope 'approver:${scope.userId}'` : `scope '${scope.userId}'`
  if (key.length < MIN_KEY_LENGTH) throw new ConfigError(`${origin} (${scopeLabel}): the key must be at least ${MIN_KEY_LENGTH} characters long`)
  if (key.length > MAX_KEY_LENGTH) throw new ConfigError(`${origin} (${scopeLabel}): the key must be at most ${MAX_KEY_LENGTH} characters long`)
  if (!KEY_CHARS.test(key)) throw new ConfigError(`${origin} (${scopeLabel}): the key may only use A-Z a-z 0-9 . _ ~ + / = -`)
  return { key, scope }
}

/** Splits `API_KEYS` (comma list). Empty items (a trailing comma) are ignored. */
export function splitApiKeysEnv (value: string): RawPair[] {
  return value.split(',')
    .map((text, i) => ({ text: text.trim(), origin: `API_KEYS entry ${i + 1}` }))
    .filter((p) => p.text !== '')
}

/** Splits an API_KEYS_FILE's text: one pair per line, `#` comments and blank lines ignored. */
export function splitApiKeysFile (text: string, name = 'API_KEYS_FILE'): RawPair[] {
  return text.split(/\r?\n/)
    .map((line, i) => ({ text: line.trim(), origin: `${name} line ${i + 1}` }))
    .filter((p) => p.text !== '' && !p.text.startsWith('#'))
}

/** Builds the key set from raw pairs; a bad or duplicate entry is a ConfigError. */
export function parseApiKeys (pairs: readonly RawPair[]): ApiKeys {
  const seen = new Map<string, string>()
  const entries: Array<{ digest: Buffer, entry: ApiKeyEntry }> = []
  for (const pair of pairs) {
    const { key, scope } = parsePair(pair)
    const digest = sha256(key)
    const hex = digest.toString('hex')
    const first = seen.get(hex)
    if (first !== undefined) throw new ConfigError(`${pair.origin}: the same key is already configured at ${first}`)
    seen.set(hex, pair.origin)
    entries.push({ digest, entry: { scope, id: hex.slice(0, 16), origin: pair.origin } })
  }
  return new ApiKeys(entries)
}

/**
 * Reads `API_KEYS` and `API_KEYS_FILE`. Neither set: no keys (open mode). Either set but
 * yielding no key is an error, so a truncated key file can never silently open the gateway.
 */
export async function loadApiKeys (config: { apiKeys?: string | undefined, apiKeysFile?: string | undefined }): Promise<ApiKeys> {
  const pairs: RawPair[] = []
  if (config.apiKeys !== undefined) pairs.push(...splitApiKeysEnv(config.apiKeys))
  if (config.apiKeysFile !== undefined) {
    let text: string
    try {
      text = await readFile(config.apiKeysFile, 'utf8')
    } catch (err) {
      throw new ConfigError(`API_KEYS_FILE: cannot read ${config.apiKeysFile}: ${(err as NodeJS.ErrnoException).code ?? 'error'}`)
    }
    pairs.push(...splitApiKeysFile(text))
  }
  const keys = parseApiKeys(pairs)
  if (keys.size === 0 && (config.apiKeys !== undefined || config.apiKeysFile !== undefined)) {
    throw new ConfigError('API_KEYS / API_KEYS_FILE are set but contain no key:scope pair; unset both to run open')
  }
  return keys
}
