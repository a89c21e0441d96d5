/**
 * The tenant CPU cap (SANDBOX_TENANT_CPUS), applied under contention only (docs/ARCHITECTURE.md#isolation).
 *
 * The cap exists for fairness between tenants: without it, one tenant's fork bomb churning on every core
 * holds the kernel's process-table lock and another tenant's spawns wait on it for hundreds of ms. It
 * also held a tenant that was alone on the host to half of it: a multi-threaded command (rg walks with
 * one thread per core) ran at the speed of one core in the sandbox, 1.4-1.6x its bare time on 2 cores.
 *
 * So a tenant's group stays capped (as configured) except while that tenant is the only one with
 * processes under the cgroup base (every gateway sharing it: the base's pids.current counts them all),
 * and no other tenant of this gateway is starting a command:
 * - a command starting while the tenant is alone lifts its cap (cpu.cfs_quota_us -1, v2 cpu.max `max`);
 * - a command of another tenant starting in this gateway puts it back before that command is spawned
 *   (synchronously; a CFS quota write takes effect at once: the runtime already handed out is reset);
 * - a command of another tenant started by another gateway on the same base puts it back within POLL_MS
 *   (this gateway polls the pids counters while it holds a tenant uncapped);
 * - the tenant's last command ending in this gateway puts it back.
 * A count that cannot be read counts as contention; the cap is lifted only on counts that held still while read.
 */
import { readFileSync } from 'node:fs'

/** How one tenant's cap is switched, and where its process count is. */
export interface CapTarget {
  /** pids.current of the tenant's group (hierarchical: all its commands). */
  pidsFile: string
  /** Writes the configured quota (true) or none (false). Throws when the group is gone. */
  set: (capped: boolean) => void
}

interface ContentionCapOptions {
  /** pids.current of the cgroup base (every tenant's processes); undefined = unknown, the cap always stays. */
  basePidsFile: string | undefined
  /** The tenant group named `groupName`. */
  target: (groupName: string) => CapTarget
}

/** While a tenant runs uncapped: how often the base's count is checked for another gateway's tenants. */
const POLL_MS = 25

function count (file: string): number | undefined {
  try {
    const n = Number(readFileSync(file, 'utf8'))
    return Number.isSafeInteger(n) && n >= 0 ? n : undefined
  } catch {
    return undefined
  }
}

export class ContentionCap {
  readonly #opts: ContentionCapOptions
  /** Commands of this gateway per tenant group, from enter() to leave(). */
  readonly #active = new Map<string, number>()
  /** Tenant groups this gateway lifted the cap of (at most one at a time). */
  readonly #uncapped = new Set<string>()
  #timer: NodeJS.Timeout | undefined

  constructor (opts: ContentionCapOptions) {
    this.#opts = opts
  }

  /** A command of `groupName` is about to be spawned (its group exists; its launcher has not joined it). */
  enter (groupName: string): void {
    this.#active.set(groupName, (this.#active.get(groupName) ?? 0) + 1)
    if (this.#contended(groupName, false)) {
      this.#capAll()
      return
    }
    // No other tenant seen; the lift still needs counts that held still (a tenant whose own processes
    // are forking now keeps its state until a later command or its last one ends).
    if (this.#uncapped.has(groupName) || this.#contended(groupName, true)) return
    try {
      this.#opts.target(groupName).set(false)
      this.#uncapped.add(groupName)
      this.#poll()
    } catch {}
  }

  /** That command is over (its group removed or being removed). */
  leave (groupName: string): void {
    const n = (this.#active.get(groupName) ?? 1) - 1
    if (n > 0) {
      this.#active.set(groupName, n)
      return
    }
    this.#active.delete(groupName)
    if (this.#uncapped.has(groupName)) this.#cap(groupName)
  }

  close (): void {
    this.#capAll()
  }

  /**
   * Does another tenant have, or is it about to have, processes? `exact`: only a count that held still
   * while read says no (the lift); otherwise a count that moved is read in the tenant's favour, so a
   * tenant forking all the time (the tenant's own count moves between reads) is not capped by its own
   * churn, and another tenant's command (a launcher, bwrap and its init at least) still shows.
   */
  #contended (groupName: string, exact: boolean): boolean {
    for (const [g, n] of this.#active) if (g !== groupName && n > 0) return true
    const base = this.#opts.basePidsFile
    if (base === undefined) return true
    const own = this.#opts.target(groupName).pidsFile
    // The tenant's count is read on both sides of the base's.
    const before = count(own)
    const all = count(base)
    const after = count(own)
    if (before === undefined || all === undefined || after === undefined) return true
    if (exact) return before !== after || all !== before
    return all > Math.max(before, after)
  }

  #cap (groupName: string): void {
    this.#uncapped.delete(groupName)
    // A group that is gone has nothing to cap; one made again gets its configured quota.
    try { this.#opts.target(groupName).set(true) } catch {}
    if (this.#uncapped.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer)
      this.#timer = undefined
    }
  }

  #capAll (): void {
    for (const g of [...this.#uncapped]) this.#cap(g)
  }

  #poll (): void {
    if (this.#timer !== undefined) return
    this.#timer = setInterval(() => {
      for (const g of [...this.#uncapped]) if (this.#contended(g, false)) this.#cap(g)
    }, POLL_MS)
    this.#timer.unref()
  }
}
