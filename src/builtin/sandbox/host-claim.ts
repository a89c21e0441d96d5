/**
 * Which gateway on this host owns which sandbox uids and cgroups (docs/ARCHITECTURE.md#isolation).
 *
 * Why: a tenant's host uid is allocated in the registry store, so it is unique only among the
 * gateways that share that store. Two gateways on one host with different stores (separate Redis,
 * another REDIS_KEY_PREFIX, or no Redis at all) would both hand uid 200000 to their first tenant:
 * those tenants would share RLIMIT_NPROC and own each other's files, and their tenant cgroups (named
 * after the tenant, under the same default parent) would share limits, and a gateway closing would
 * remove the other's groups. So every gateway that gives out uids or makes cgroups claims them here,
 * and the claims of live gateways of another deployment must not overlap:
 *
 * - With Redis (uids kept in the store, the same on every instance and across restarts), the range
 *   is SANDBOX_UID_RANGE as configured; another deployment's live claim that overlaps it stops
 *   start-up with a message naming the setting. Instances of one deployment (same store) share it.
 * - Without Redis the uids live in this process only and are given out afresh at each start, so
 *   nothing ties the gateway to a fixed range: it takes the first block of UID_BLOCK uids of
 *   SANDBOX_UID_RANGE that no live gateway holds (start-up stops only when none is free); with the
 *   default range, of PROCESS_UID_POOL instead, away from the range Redis deployments claim whole.
 * - The default cgroup parent is derived from the claimed range (`tool-gateway-<first>-<last>`):
 *   disjoint ranges give distinct parents, one deployment's instances share theirs. An explicit
 *   SANDBOX_CGROUP_ROOT is claimed as it is: another deployment with the same one stops start-up.
 *
 * A claim is a file `<pid>.json` in CLAIMS_DIR with the owner's pid and start time (a recycled pid
 * is not mistaken for it), its deployment and what it holds; it is removed on close, and a claim
 * whose owner is gone (SIGKILL) is ignored and removed by the next gateway that looks. No lock:
 * each gateway writes its claim first, then reads the others'; of two that start at once at least
 * one sees the other (the later reader), and the one that sees a conflict yields (stops, or takes
 * another block and looks again), so two conflicting claims are never both kept.
 *
 * The claims are as wide as the directory is shared: gateways in containers that share the host's
 * uids (no user namespace) but not its /run see nothing of each other; give them distinct ranges.
 */
import { randomUUID } from 'node:crypto'
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { StartupError } from '../../errors.js'
import type { UidRange } from '../../registry/types.js'
import { ROOT_NAME } from './cgroups.js'

/** Uids a gateway without Redis takes from SANDBOX_UID_RANGE: as many tenants as it can serve. */
export const UID_BLOCK = 10_000

/**
 * Where a gateway without Redis takes its block when SANDBOX_UID_RANGE is the default: not in the
 * default range, which Redis deployments claim whole (their uids are kept there), so a gateway
 * without Redis running beside one never stops it from starting.
 */
export const PROCESS_UID_POOL: Readonly<UidRange> = { first: 300000, last: 399999 }

/** Where claims live: /run is a tmpfs (claims do not outlive a reboot) writable by root only. */
function defaultClaimsDir (): string {
  return process.getuid?.() === 0 && existsSync('/run')
    ? '/run/tool-gateway/claims'
    : path.join(os.tmpdir(), `tool-gateway-claims-${process.getuid?.() ?? 'u'}`)
}

export interface ClaimRequest {
  /** Equal for gateways sharing one registry store (they may share uids and cgroups); see deploymentOf. */
  deployment: string
  /** The store keeps the uid table (Redis): the range is claimed as configured; else a free block of it. */
  uidsPersisted: boolean
  /** SANDBOX_UID_RANGE when uids are given per tenant. */
  uidRange?: UidRange | undefined
  /** SANDBOX_CGROUP_ROOT when set (and not `none`). */
  cgroupRoot?: string | undefined
  /** Tests: a private claims directory. */
  dir?: string
}

export interface HostClaim {
  /** The uids this gateway gives out (the configured range, or a block of it). */
  readonly uidRange: UidRange | undefined
  /** The name of the default cgroup parent, derived from the uid range; undefined: `tool-gateway`. */
  readonly cgroupName: string | undefined
  /** Removes the claim. Never throws. */
  release: () => void
}

interface Claim {
  pid: number
  start: string
  deployment: string
  uids: UidRange | null
  cgroupRoot: string | null
}

/** Field 22 of /proc/<pid>/stat: the start time in clock ticks since boot; undefined when gone. */
function startTimeOf (pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]
  } catch {
    return undefined
  }
}

function parseClaim (text: string): Claim | undefined {
  try {
    const c = JSON.parse(text) as Claim
    if (!Number.isSafeInteger(c.pid) || typeof c.start !== 'string' || typeof c.deployment !== 'string') return undefined
    return c
  } catch {
    return undefined
  }
}

/** Live claims of other processes; removes those whose owner is gone. */
function othersLive (dir: string): Claim[] {
  const out: Claim[] = []
  for (const name of readdirSync(dir)) {
    const m = /^(\d+)\.json$/.exec(name)
    if (m === null || Number(m[1]) === process.pid) continue
    let claim: Claim | undefined
    try {
      claim = parseClaim(readFileSync(path.join(dir, name), 'utf8'))
    } catch {
      continue // removed meanwhile
    }
    if (claim === undefined || claim.pid !== Number(m[1])) continue
    if (startTimeOf(claim.pid) !== claim.start) {
      try { rmSync(path.join(dir, name), { force: true }) } catch {}
      continue
    }
    out.push(claim)
  }
  return out
}

const overlaps = (a: UidRange | null | undefined, b: UidRange | null | undefined): boolean =>
  a != null && b != null && a.first <= b.last && b.first <= a.last

function blocksOf (range: UidRange): UidRange[] {
  const out: UidRange[] = []
  for (let first = range.first; first <= range.last; first += UID_BLOCK) {
    out.push({ first, last: Math.min(range.last, first + UID_BLOCK - 1) })
  }
  return out
}

const who = (c: Claim): string => `pid ${c.pid}`

function conflictMessage (req: ClaimRequest, conflicts: readonly Claim[], uids: UidRange | undefined): string {
  const byCgroup = conflicts.filter((c) => c.cgroupRoot !== null && c.cgroupRoot === resolvedRoot(req.cgroupRoot))
  if (byCgroup.length > 0) {
    return `SANDBOX_CGROUP_ROOT ${req.cgroupRoot ?? ''} is used by another gateway on this host with another registry store ` +
      `(${byCgroup.map(who).join(', ')}): their tenants' cgroups would be shared. Give each gateway its own SANDBOX_CGROUP_ROOT ` +
      '(or, for instances of one deployment, the same REDIS_URL/REDIS_CLUSTER_NODES and REDIS_KEY_PREFIX).'
  }
  const ranges = conflicts.map((c) => `${c.uids?.first ?? ''}-${c.uids?.last ?? ''} (${who(c)})`).join(', ')
  if (!req.uidsPersisted) {
    return `no free block of ${UID_BLOCK} uids left in SANDBOX_UID_RANGE ${req.uidRange?.first ?? ''}-${req.uidRange?.last ?? ''}: ` +
      `other gateways on this host hold ${ranges}. Set SANDBOX_UID_RANGE to a range no other gateway uses.`
  }
  return `SANDBOX_UID_RANGE ${uids?.first ?? ''}-${uids?.last ?? ''} overlaps the sandbox uids of another gateway on this host ` +
    `with another registry store: ${ranges}. Their tenants would share host uids. Give each gateway its own SANDBOX_UID_RANGE ` +
    '(or, for instances of one deployment, the same REDIS_URL/REDIS_CLUSTER_NODES and REDIS_KEY_PREFIX).'
}

function resolvedRoot (root: string | undefined): string | null {
  return root === undefined || root === 'none' ? null : path.resolve('/', root)
}

function ensureDir (dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o755 })
  const st = lstatSync(dir)
  // Someone else's directory could hold forged claims (a refusal to start) or lose ours.
  if (!st.isDirectory() || st.uid !== (process.getuid?.() ?? st.uid)) {
    throw new StartupError(`the sandbox claims directory ${dir} is not a directory of this user: remove it`)
  }
}

/**
 * Claims this gateway's uids and cgroup root on the host, or throws a StartupError naming the
 * setting to change. Release it on close.
 */
export async function claimHost (req: ClaimRequest): Promise<HostClaim> {
  const dir = req.dir ?? defaultClaimsDir()
  ensureDir(dir)
  const file = path.join(dir, `${process.pid}.json`)
  const start = startTimeOf(process.pid) ?? ''
  const cgroupRoot = resolvedRoot(req.cgroupRoot)
  const candidates: Array<UidRange | undefined> = req.uidRange === undefined
    ? [undefined]
    : req.uidsPersisted ? [req.uidRange] : blocksOf(req.uidRange)
  const conflictsOf = (others: readonly Claim[], uids: UidRange | undefined): Claim[] =>
    others.filter((o) => o.deployment !== req.deployment && (overlaps(o.uids, uids) || (cgroupRoot !== null && o.cgroupRoot === cgroupRoot)))
  const release = (): void => { try { rmSync(file, { force: true }) } catch {} }

  for (let attempt = 0; ; attempt++) {
    const before = othersLive(dir)
    const uids = candidates.find((c) => conflictsOf(before, c).length === 0)
    if (uids === undefined) throw new StartupError(conflictMessage(req, conflictsOf(before, candidates[0]), candidates[0]))
    const claim: Claim = { pid: process.pid, start, deployment: req.deployment, uids: uids ?? null, cgroupRoot }
    const tmp = `${file}.${randomUUID()}.tmp`
    writeFileSync(tmp, JSON.stringify(claim), { mode: 0o644 })
    renameSync(tmp, file)
    // Written first, read second: see the module comment.
    const conflicts = conflictsOf(othersLive(dir), uids)
    if (conflicts.length === 0) {
      return {
        uidRange: uids,
        cgroupName: uids !== undefined ? `${ROOT_NAME}-${uids.first}-${uids.last}` : undefined,
        release
      }
    }
    release()
    // A fixed range (or cgroup root) stays taken; a block raced for is looked for again, briefly.
    if (req.uidsPersisted || attempt >= 20) throw new StartupError(conflictMessage(req, conflicts, uids))
    await sleep(5 + Math.floor(Math.random() * 50))
  }
}

/** A deployment id for a gateway whose uid table is its own (no Redis): this process. */
export function processDeployment (): string {
  return `process:${process.pid}:${randomUUID()}`
}
