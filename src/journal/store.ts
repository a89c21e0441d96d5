import { HttpError } from '../errors.js'
import type { DeferredHash } from './entry.js'

/** One entry ready to append: its tenant (GLOBAL_TENANT for none), callId and JSON text. */
export interface PendingEntry {
  tenant: string
  callId: string
  /** Kept beside the JSON so the tool and isError filters never parse an entry. */
  name: string
  isError: boolean
  json: string
  /** Its argumentsSha256, left for a store that writes it on read (`fillsHash`; entry.ts entryText). */
  hashLater?: DeferredHash | undefined
}

/** Which entries a page reads. Times are epoch ms, inclusive; `before` is a position (exclusive). */
export interface JournalQuery {
  since?: number
  until?: number
  tool?: string
  isError?: boolean
  limit: number
  /** The position of the last entry of the previous page (from its cursor). */
  before?: string
}

export interface JournalPage {
  /** JSON texts of the entries, newest first. */
  entries: string[]
  /** Where the next page starts (the position of the last entry looked at), or null at the end. */
  next: string | null
}

/**
 * Where journal entries live: Redis Streams (shared by every instance) or a memory ring. Entry
 * positions are stream ids, `{ms}-{seq}`, ordered by append time; a store never reads an entry
 * older than its retention.
 */
export interface JournalStore {
  readonly backend: 'redis' | 'memory'
  /** Writes an entry's argumentsSha256 when it is read (PendingEntry.hashLater): the journal may leave it. */
  readonly fillsHash?: boolean
  /** How long the writer may wait to gather a larger batch (stores with a round trip per append). */
  readonly lingerMs?: number
  /** Appends a batch; resolves to how many were written, rejects when the store cannot be reached. */
  append: (entries: PendingEntry[]) => Promise<number>
  page: (tenant: string, query: JournalQuery) => Promise<JournalPage>
  /** The JSON text of a tenant's entry by callId (the latest, when a callId was reused). */
  get: (tenant: string, callId: string) => Promise<string | undefined>
  close: () => Promise<void>
}

/** Entries a page may look at beyond the ones it returns (filters that match rarely end a page early, with a cursor). */
export const SCAN_BUDGET = 2000

/** A stream id: `{ms}-{seq}`. */
const ID = /^(\d{1,15})-(\d{1,19})$/

/** The opaque cursor of a position: base64url of `{"v":1,"id":...}`. */
export function encodeCursor (id: string): string {
  return Buffer.from(JSON.stringify({ v: 1, id })).toString('base64url')
}

/** The position a cursor holds; a 400 GW_INVALID_CURSOR for anything this gateway did not make. */
export function decodeCursor (cursor: string): string {
  let parsed: unknown
  try {
    if (!/^[A-Za-z0-9_-]{1,200}$/.test(cursor)) throw new Error('not base64url')
    parsed = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'))
  } catch {
    throw new HttpError('GW_INVALID_CURSOR', 'cursor is not one this gateway returned (pass the nextCursor of the previous page as is)')
  }
  const p = parsed as { v?: unknown, id?: unknown }
  if (p === null || typeof p !== 'object' || p.v !== 1 || typeof p.id !== 'string' || !ID.test(p.id)) {
    throw new HttpError('GW_INVALID_CURSOR', 'cursor is not one this gateway returned (pass the nextCursor of the previous page as is)')
  }
  return p.id
}

/** Parses `{ms}-{seq}` into comparable numbers (seq fits a double for any id this gateway makes). */
export function parseId (id: string): [number, number] {
  const dash = id.indexOf('-')
  return [Number(id.slice(0, dash)), Number(id.slice(dash + 1))]
}

/** Whether an entry matches the query's tool and isError filters. */
export function matches (name: string, isError: boolean, query: JournalQuery): boolean {
  if (query.tool !== undefined && name !== query.tool) return false
  if (query.isError !== undefined && isError !== query.isError) return false
  return true
}
