/**
 * Which protocol era each MCP server config speaks (docs/ARCHITECTURE.md#mcp-pool), so that a
 * reconnect does not probe again: `server/discover` is sent once per config and credential, and
 * the next connection starts from the verdict (the SDK Client's `connect(transport, { prior })`:
 * a modern verdict adopts the discover result with no round trip, a legacy one goes straight
 * to `initialize`).
 *
 * - Keyed by a hash of the whole connect spec (type, url, headers with their credentials,
 *   command, args, env, cwd): a verdict is never reused across credentials or configs.
 * - In memory, per gateway instance, bounded (least recently used out first). Another instance
 *   probes once itself; a restart probes again.
 * - A legacy verdict expires (`legacyTtlMs`): a server upgraded to 2026-07-28 still answers
 *   `initialize`, so it would otherwise be spoken to in the legacy era for ever. A modern verdict
 *   lasts until it fails: a connect that fails forgets it (connection.ts), and a server that
 *   stopped speaking 2026-07-28 fails its first request, after which the pool reconnects.
 */
import { createHash } from 'node:crypto'
import type { DiscoverResult } from '@modelcontextprotocol/client'
import type { ConnectSpec } from './transport.js'

export type EraVerdict = { kind: 'modern', discover: DiscoverResult } | { kind: 'legacy' }

export interface EraVerdictsOptions {
  /** How long a legacy verdict is trusted. Default one hour. */
  legacyTtlMs?: number
  /** Configs remembered. Default 10,000. */
  maxEntries?: number
}

interface Entry { verdict: EraVerdict, at: number }

export class EraVerdicts {
  readonly #legacyTtlMs: number
  readonly #max: number
  readonly #entries = new Map<string, Entry>()
  /** Probes run (connects without a usable verdict), for GET /status and the tests. */
  probes = 0

  constructor (options: EraVerdictsOptions = {}) {
    this.#legacyTtlMs = options.legacyTtlMs ?? 3_600_000
    this.#max = Math.max(1, options.maxEntries ?? 10_000)
  }

  /** The key of a spec: a hash, so that the map never holds a credential in clear. */
  static key (spec: ConnectSpec): string {
    const byName = (a: [string, string], b: [string, string]): number => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)
    const sorted = (o: Record<string, string> | undefined): Array<[string, string]> | null =>
      o === undefined ? null : Object.entries(o).map(([k, v]): [string, string] => [k.toLowerCase(), v]).sort(byName)
    const material = [spec.type, spec.url ?? null, sorted(spec.headers), spec.command ?? null, spec.args ?? null, sorted(spec.env), spec.cwd ?? null]
    return createHash('sha256').update(JSON.stringify(material)).digest('base64url')
  }

  /** The verdict for `key`, if one is known and still trusted. */
  get (key: string, now = Date.now()): EraVerdict | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (entry.verdict.kind === 'legacy' && now - entry.at >= this.#legacyTtlMs) {
      this.#entries.delete(key)
      return undefined
    }
    // Most recently used last: Map keeps insertion order.
    this.#entries.delete(key)
    this.#entries.set(key, entry)
    return entry.verdict
  }

  set (key: string, verdict: EraVerdict, now = Date.now()): void {
    this.#entries.delete(key)
    this.#entries.set(key, { verdict, at: now })
    if (this.#entries.size > this.#max) {
      const oldest = this.#entries.keys().next()
      if (oldest.done !== true) this.#entries.delete(oldest.value)
    }
  }

  forget (key: string): void {
    this.#entries.delete(key)
  }
}
