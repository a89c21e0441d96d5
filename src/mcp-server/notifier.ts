import { createHash } from 'node:crypto'
import type { Gateway } from '../gateway.js'
import { HttpError } from '../errors.js'
import type { ListingChange, ListingListener } from '../registry/types.js'
import type { Caller } from '../routing/types.js'
import { mcpListingQuery } from './json-rpc.js'
import type { McpQueryT } from './json-rpc.js'

/** Whatever can tell a connected client that its tool list changed (an SDK Server on a GET stream). */
export interface ListChangedTarget {
  sendToolListChanged: () => Promise<void>
}

export interface ListChangedNotifierOptions {
  gateway: Gateway
  /** How often open streams' listings are compared with what their client last could see. */
  pollMs: number
  /** Registry change events (every instance's) and upstream tool-list changes: a change to a watched scope is checked at once. */
  subscribe?: (listener: ListingListener) => () => void
  onError?: (err: unknown, scope: McpQueryT) => void
  /**
   * Tells the client pools that a listing naming these servers is watched, until the returned
   * function is called: a 2026-07-28 upstream connection then listens for its tool list changes.
   */
  watchServers?: (tenant: string | undefined, serverIds: readonly string[]) => () => void
}

interface Group {
  /** The acting tenant (already checked against the caller), the allow-list and a caller allowed to list it. */
  scope: McpQueryT
  tenant: string | undefined
  caller: Caller
  serverIds: Set<string>
  targets: Set<ListChangedTarget>
  /** A digest of the listing's tools as JSON, and the listing object it was taken of (a cached listing is the same object). */
  fingerprint: string | undefined
  /** The listing's tools as JSON, in bytes (UTF-16 units): what watching it weighs. */
  bytes: number
  listing: WeakRef<object> | undefined
  /** The timer's checks skip the group until then: a check that took long is not repeated at every poll. */
  nextPollAt: number
  checking: Promise<void> | undefined
  again: boolean
  /** An upstream server of the listing announced a change: notify after the next check even if the listing looks the same. */
  forced: boolean
  /** Ends the pools' watch of the listing's servers (watchServers). */
  unwatchServers: () => void
}

/**
 * Sends notifications/tools/list_changed to the clients that keep a GET /mcp stream open,
 * when the listing their endpoint URL gives them changes. Streams with the same tenant and
 * allow-list share one check. A listing is compared as a whole (names and schemas), so
 * every cause is seen: a registry change on any instance, a remote server's own
 * list_changed, a server becoming unreachable. Checks run every `pollMs` and, with
 * `subscribe`, at once on a registry change of the tenant's scope or the global one; a
 * warm check costs what a cached GET /tools costs.
 */
export class ListChangedNotifier {
  readonly #opts: ListChangedNotifierOptions
  readonly #groups = new Map<string, Group>()
  readonly #abort = new AbortController()
  #timer: NodeJS.Timeout | undefined
  #unsubscribe: (() => void) | undefined
  #closed = false

  constructor (opts: ListChangedNotifierOptions) {
    this.#opts = opts
  }

  get streams (): number {
    let n = 0
    for (const g of this.#groups.values()) n += g.targets.size
    return n
  }

  /**
   * Watches the listing of `scope` (tenant already resolved: `tenant` is the acting userId)
   * for `target` until the returned function is called. Resolves once the current listing is
   * known, so a change after that is never missed.
   */
  async watch (scope: McpQueryT, tenant: string | undefined, caller: Caller, target: ListChangedTarget, serverIds: readonly string[]): Promise<() => void> {
    if (this.#closed) throw new Error('notifier closed')
    const key = groupKey(scope, tenant, caller)
    let group = this.#groups.get(key)
    if (!group) {
      const owner = ownerOf(tenant, caller)
      let watched = 0
      let bytes = 0
      for (const g of this.#groups.values()) {
        if (ownerOf(g.tenant, g.caller) !== owner) continue
        watched++
        bytes += g.bytes
      }
      if (watched >= MAX_GROUPS_PER_TENANT || bytes >= MAX_WATCHED_BYTES_PER_TENANT) {
        throw new HttpError('GW_RATE_LIMITED', `This tenant's notification streams already watch ${watched} different listings ` +
          `(${(bytes / 1048576).toFixed(1)} MiB of tools) on this instance; at most ${MAX_GROUPS_PER_TENANT}, or ` +
          `${MAX_WATCHED_BYTES_PER_TENANT / 1048576} MiB: open streams for one of them (allow-list, mode, pinned), or close one`)
      }
      group = {
        scope,
        tenant,
        caller,
        serverIds: new Set(serverIds),
        targets: new Set(),
        fingerprint: undefined,
        bytes: 0,
        listing: undefined,
        nextPollAt: 0,
        checking: undefined,
        again: false,
        forced: false,
        unwatchServers: this.#opts.watchServers?.(tenant, serverIds) ?? (() => {})
      }
      this.#groups.set(key, group)
    }
    group.targets.add(target)
    this.#start()
    if (group.fingerprint === undefined) await this.#check(group, false)
    const watched = group
    return () => {
      watched.targets.delete(target)
      if (watched.targets.size === 0 && this.#groups.get(key) === watched) {
        this.#groups.delete(key)
        watched.unwatchServers()
      }
      if (this.#groups.size === 0) this.#stop()
    }
  }

  /**
   * Checks the listing of this scope and caller now (a search at /mcp changed its working set):
   * its streams on this instance hear at once, other instances' at their next poll.
   */
  async recheck (scope: McpQueryT, tenant: string | undefined, caller: Caller): Promise<void> {
    const group = this.#groups.get(groupKey(scope, tenant, caller))
    if (group !== undefined) await this.#check(group, true)
  }

  /** Checks every watched listing now; for the timer, those whose last check was not long ago. */
  async checkAll (timer = false): Promise<void> {
    const now = Date.now()
    await Promise.all([...this.#groups.values()].filter((g) => !timer || g.nextPollAt <= now).map(async (g) => await this.#check(g, true)))
  }

  #onChange (change: ListingChange): void {
    for (const group of this.#groups.values()) {
      if (!affects(change, group)) continue
      // An upstream server's own list_changed is carried as it came: its tools may differ in what
      // the listing does not show (or it changed and changed back), and its clients re-list.
      if (change.op === 'tools') group.forced = true
      this.#check(group, true).catch(() => {})
    }
  }

  async #check (group: Group, notify: boolean): Promise<void> {
    if (group.checking) {
      // A change during a check is looked at again afterwards, never lost.
      group.again = true
      return await group.checking
    }
    group.checking = (async () => {
      do {
        group.again = false
        const started = performance.now()
        let fingerprint: string
        try {
          const listing = await this.#opts.gateway.listTools(mcpListingQuery(group.scope), group.caller, this.#abort.signal)
          // A cached listing is the same object: serialising and comparing 4 MB of tools every poll of every group
          // held the event loop for seconds with 100 streams of distinct allow-lists (an audit).
          if (group.listing?.deref() === listing && group.fingerprint !== undefined) fingerprint = group.fingerprint
          else {
            const json = JSON.stringify(listing.tools)
            fingerprint = createHash('sha256').update(json).digest('base64')
            group.bytes = json.length
          }
          group.listing = new WeakRef(listing)
        } catch (err) {
          // Keep the last known listing: the next check tries again.
          if (!this.#closed) this.#opts.onError?.(err, group.scope)
          return
        } finally {
          // A check costs what a listing costs (nothing when cached; a render when not): the timer's next one waits in proportion.
          group.nextPollAt = Date.now() + POLL_BACKOFF * (performance.now() - started)
        }
        const previous = group.fingerprint
        group.fingerprint = fingerprint
        const forced = group.forced
        group.forced = false
        if (notify && previous !== undefined && (previous !== fingerprint || forced)) {
          for (const target of group.targets) {
            target.sendToolListChanged().catch(() => { /* the stream is closing */ })
          }
        }
      } while (group.again && !this.#closed)
    })()
    try {
      await group.checking
    } finally {
      group.checking = undefined
    }
  }

  #start (): void {
    if (this.#timer === undefined) {
      this.#timer = setInterval(() => { this.checkAll(true).catch(() => {}) }, this.#opts.pollMs)
      this.#timer.unref()
    }
    if (this.#unsubscribe === undefined && this.#opts.subscribe) {
      this.#unsubscribe = this.#opts.subscribe((change) => this.#onChange(change))
    }
  }

  #stop (): void {
    clearInterval(this.#timer)
    this.#timer = undefined
    this.#unsubscribe?.()
    this.#unsubscribe = undefined
  }

  close (): void {
    this.#closed = true
    this.#abort.abort(new Error('closing'))
    this.#stop()
    for (const group of this.#groups.values()) group.unwatchServers()
    this.#groups.clear()
  }
}

/**
 * Different listings one tenant's (or admin key's) streams may watch on an instance, each checked at
 * every poll: at most 100 (a tenant's share of the streams), and no new one once those it watches
 * weigh 8 MiB of tools as JSON together. A cached listing costs a lookup per check; one the listing
 * caches no longer hold is rendered again: 100 streams of distinct allow-lists over a 4 MB listing
 * held the event loop 8-12 s at a time (an audit). 8 MiB stays within a tenant's share of the caches,
 * while a multi-agent tenant with many small allow-lists is not refused at its eleventh.
 */
const MAX_GROUPS_PER_TENANT = 100
const MAX_WATCHED_BYTES_PER_TENANT = 8 * 1024 * 1024
/** A timer's check of a group waits this many times the last check's duration (its CPU, mostly) after it. */
const POLL_BACKOFF = 20

function ownerOf (tenant: string | undefined, caller: Caller): string {
  return tenant !== undefined ? `t:${tenant}` : `k:${caller.keyId ?? ''}`
}

/** Whether a change can change a listing: its tenant's scope or the global one, and a server it names. */
function affects (change: ListingChange, group: Group): boolean {
  if (change.op === 'resync') return true
  if (change.scope.kind === 'user' && change.scope.userId !== group.tenant) return false
  return group.serverIds.has(change.serverId)
}

/**
 * Streams that see the same listing share one check: same tenant, allow-list, mode and pinned, and
 * the same API key (search mode's working set is the key's own, listing/working-sets.ts).
 */
function groupKey (scope: McpQueryT, tenant: string | undefined, caller: Caller): string {
  return JSON.stringify([tenant ?? null, caller.keyId ?? null, scope.functions ?? '', scope.mcp ?? '', scope.mode ?? 'all', scope.pinned ?? ''])
}
