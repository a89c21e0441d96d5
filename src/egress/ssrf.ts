import { lookup as dnsLookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'
import { Agent, fetch as undiciFetch, type Dispatcher, type RequestInit as UndiciRequestInit } from 'undici'
import type { GwCode } from '../errors.js'

/**
 * SSRF guard for tenant-registered MCP servers (docs/ARCHITECTURE.md#egress). A tenant controls the URL the gateway
 * connects to, so the gateway must never reach its own host, the private network or cloud
 * metadata on a tenant's behalf. Checked twice: at registration (`checkUrl`) and at connect
 * time against the address actually dialled (`guardedFetch`), because DNS can answer
 * differently between the two (rebinding). Redirects are never followed: a public server could
 * otherwise bounce the request to an internal one.
 *
 * Hostnames are normalised by the WHATWG URL parser, which also turns decimal, octal, hex and
 * short IPv4 spellings (2130706433, 0177.0.0.1, 0x7f.1, 127.1) into dotted quads, and writes
 * IPv6 in one canonical hex form.
 */

export type AddressList = Array<{ address: string, family: number }>
/** Resolves a hostname to every address (dns.lookup with all: true). Injectable for tests. */
export type ResolveAll = (hostname: string) => Promise<AddressList>

export interface EgressPolicy {
  /** EGRESS_ALLOW entries as given. */
  readonly entries: readonly string[]
  /** Hostnames trusted whatever they resolve to (lower-case, no trailing dot). */
  readonly allowHosts: ReadonlySet<string>
  /** Address ranges opened despite being blocked. */
  readonly allowRanges: BlockList
  readonly resolve: ResolveAll
}

export interface EgressPolicyOptions {
  /** Default: node:dns lookup with all addresses. Bounded by `dnsTimeoutMs` either way. */
  resolve?: ResolveAll
  /** Bound on one DNS resolution; past it the check fails closed. Default 5000. */
  dnsTimeoutMs?: number
}

export type EgressFailure = 'invalid-url' | 'scheme' | 'blocked-address' | 'dns-failure' | 'redirect'
export type CheckResult = { ok: true, addresses: string[] } | { ok: false, reason: EgressFailure, message: string }

/** Thrown by `guardedFetch` (fetch reports failures by rejecting). */
export class EgressBlockedError extends Error {
  readonly code = 'GW_EGRESS_BLOCKED' satisfies GwCode
  readonly reason: EgressFailure
  constructor (reason: EgressFailure, message: string) {
    super(message)
    this.name = 'EgressBlockedError'
    this.reason = reason
  }
}

const BLOCKED_V4: ReadonlyArray<[string, number, string]> = [
  ['0.0.0.0', 8, 'unspecified'],
  ['10.0.0.0', 8, 'private'],
  ['100.64.0.0', 10, 'carrier-grade NAT'],
  ['127.0.0.0', 8, 'loopback'],
  ['169.254.0.0', 16, 'link-local (cloud metadata)'],
  ['172.16.0.0', 12, 'private'],
  ['192.0.0.0', 24, 'IETF protocol assignments'],
  ['192.0.2.0', 24, 'documentation'],
  ['192.168.0.0', 16, 'private'],
  ['198.18.0.0', 15, 'benchmarking'],
  ['198.51.100.0', 24, 'documentation'],
  ['203.0.113.0', 24, 'documentation'],
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved and broadcast']
]

// IPv6 forms that embed an IPv4 address (mapped, translated, NAT64, 6to4) are decoded and
// judged by the IPv4 they lead to, before this list is consulted.
const BLOCKED_V6: ReadonlyArray<[string, number, string]> = [
  ['::', 96, 'unspecified, loopback or IPv4-compatible'],
  ['64:ff9b:1::', 48, 'local-use NAT64'],
  ['100::', 64, 'discard-only'],
  ['2001::', 32, 'Teredo'],
  ['2001:2::', 48, 'benchmarking'],
  ['2001:db8::', 32, 'documentation'],
  ['3fff::', 20, 'documentation'],
  ['fc00::', 7, 'unique local'],
  ['fe80::', 10, 'link-local'],
  ['fec0::', 10, 'site-local'],
  ['ff00::', 8, 'multicast']
]

// One BlockList per range so a refusal can say which range matched.
function ranges (table: ReadonlyArray<[string, number, string]>, family: 'ipv4' | 'ipv6'): Array<{ list: BlockList, category: string }> {
  return table.map(([net, prefix, category]) => {
    const list = new BlockList()
    list.addSubnet(net, prefix, family)
    return { list, category }
  })
}
const blockedV4 = ranges(BLOCKED_V4, 'ipv4')
const blockedV6 = ranges(BLOCKED_V6, 'ipv6')

function stripBrackets (host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}

/** Lower-case, no brackets, no trailing dot: the form allow-list hostnames are compared in. */
function hostKey (host: string): string {
  return stripBrackets(host).toLowerCase().replace(/\.$/, '')
}

/** The 8 16-bit words of an IPv6 address, via the WHATWG parser's canonical hex form. */
function ipv6Words (ip: string): number[] | undefined {
  let canonical: string
  try {
    canonical = stripBrackets(new URL(`http://[${ip}]/`).hostname)
  } catch {
    return undefined
  }
  const [head = '', tail] = canonical.split('::')
  const headWords = head === '' ? [] : head.split(':')
  const tailWords = tail === undefined || tail === '' ? [] : tail.split(':')
  const zeros = tail === undefined ? 0 : 8 - headWords.length - tailWords.length
  const words = [...headWords, ...Array<string>(zeros).fill('0'), ...tailWords].map((w) => parseInt(w, 16))
  return words.length === 8 && words.every((w) => Number.isInteger(w) && w >= 0 && w <= 0xffff) ? words : undefined
}

function v4FromWords (high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
}

/** The IPv4 address an IPv6 address stands for, if it is one of the embedding forms. */
function embeddedIpv4 (w: number[]): string | undefined {
  const [w0, w1, w2, w3, w4, w5, w6 = 0, w7 = 0] = w
  const zero4 = w0 === 0 && w1 === 0 && w2 === 0 && w3 === 0
  if (zero4 && w4 === 0 && w5 === 0xffff) return v4FromWords(w6, w7) // ::ffff:a.b.c.d (mapped)
  if (zero4 && w4 === 0xffff && w5 === 0) return v4FromWords(w6, w7) // ::ffff:0:a.b.c.d (SIIT)
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 0 && w3 === 0 && w4 === 0 && w5 === 0) return v4FromWords(w6, w7) // NAT64
  if (w0 === 0x2002) return v4FromWords(w1 ?? 0, w2 ?? 0) // 6to4
  return undefined
}

function normaliseIp (ip: string): { family: 4, ip: string } | { family: 6, ip: string, words: number[] } | undefined {
  // A zone id (fe80::1%eth0) does not change which range the address is in.
  const bare = stripBrackets(ip).replace(/%.*$/, '')
  const family = isIP(bare)
  if (family === 4) return { family: 4, ip: bare }
  if (family === 6) {
    const words = ipv6Words(bare)
    return words === undefined ? undefined : { family: 6, ip: bare, words }
  }
  return undefined
}

/** Why an address is blocked, or undefined when it is a public unicast address. Not an IP: blocked. */
function blockedCategory (ip: string): string | undefined {
  const parsed = normaliseIp(ip)
  if (parsed === undefined) return 'not an IP address'
  if (parsed.family === 4) return blockedV4.find((r) => r.list.check(parsed.ip, 'ipv4'))?.category
  const v4 = embeddedIpv4(parsed.words)
  if (v4 !== undefined) {
    const inner = blockedCategory(v4)
    return inner === undefined ? undefined : `${inner} (embedded in IPv6)`
  }
  return blockedV6.find((r) => r.list.check(parsed.ip, 'ipv6'))?.category
}

/** True for every address a tenant's server must not reach (ignores EGRESS_ALLOW). */
export function isBlockedAddress (ip: string): boolean {
  return blockedCategory(ip) !== undefined
}

function inAllowedRange (ip: string, policy: EgressPolicy): boolean {
  const parsed = normaliseIp(ip)
  if (parsed === undefined) return false
  if (parsed.family === 4) return policy.allowRanges.check(parsed.ip, 'ipv4')
  if (policy.allowRanges.check(parsed.ip, 'ipv6')) return true
  // ::ffff:127.0.0.1 is opened by an allowed 127.0.0.1/32, as it reaches the same host.
  const v4 = embeddedIpv4(parsed.words)
  return v4 !== undefined && policy.allowRanges.check(v4, 'ipv4')
}

/** Whether the policy lets a connection go to `ip` (public, or inside an EGRESS_ALLOW range). */
export function isAddressAllowed (ip: string, policy: EgressPolicy): boolean {
  return !isBlockedAddress(ip) || inAllowedRange(ip, policy)
}

const CIDR = /^(.+)\/(\d{1,3})$/
const HOSTNAME = /^(?=.{1,253}$)([a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/i

/**
 * Parses EGRESS_ALLOW: comma-separated hostnames (exact, case-insensitive; a listed name is
 * trusted whatever it resolves to), IP addresses, or CIDRs (`127.0.0.1/32`, `10.1.0.0/16`,
 * `fd00::/8`). An invalid entry is a start-up error.
 */
export function parseEgressAllow (raw: string | undefined): { ok: true, entries: string[] } | { ok: false, message: string } {
  const entries = (raw ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
  for (const entry of entries) {
    const problem = entryProblem(entry)
    if (problem !== undefined) return { ok: false, message: `EGRESS_ALLOW: ${problem}` }
  }
  return { ok: true, entries }
}

function entryProblem (entry: string): string | undefined {
  const cidr = CIDR.exec(entry)
  if (cidr !== null) {
    const family = isIP(stripBrackets(cidr[1] ?? ''))
    const prefix = Number(cidr[2])
    if (family === 0) return `'${entry}' is not a valid CIDR`
    if (prefix > (family === 4 ? 32 : 128)) return `'${entry}' has a prefix longer than the address`
    return undefined
  }
  if (isIP(stripBrackets(entry)) !== 0) return undefined
  if (!HOSTNAME.test(entry.replace(/\.$/, ''))) return `'${entry}' is neither a hostname, an IP address nor a CIDR`
  return undefined
}

const systemResolve: ResolveAll = async (hostname) => await dnsLookup(hostname, { all: true, verbatim: true })

// getaddrinfo has no timeout of its own: an unanswered lookup must not hold a registration.
function withTimeout (resolve: ResolveAll, timeoutMs: number): ResolveAll {
  return async (hostname) => {
    let timer: NodeJS.Timeout | undefined
    const timeout = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(() => reject(new Error(`DNS lookup of ${hostname} timed out`)), timeoutMs)
    })
    try {
      return await Promise.race([resolve(hostname), timeout])
    } finally {
      clearTimeout(timer)
    }
  }
}

/** Builds the policy from EGRESS_ALLOW entries. Invalid entries throw (validate with parseEgressAllow first). */
export function createEgressPolicy (allow: readonly string[], options: EgressPolicyOptions = {}): EgressPolicy {
  const allowHosts = new Set<string>()
  const allowRanges = new BlockList()
  for (const entry of allow) {
    const problem = entryProblem(entry)
    if (problem !== undefined) throw new TypeError(`EGRESS_ALLOW: ${problem}`)
    const cidr = CIDR.exec(entry)
    if (cidr !== null) {
      const net = stripBrackets(cidr[1] ?? '')
      const family = isIP(net) === 4 ? 'ipv4' : 'ipv6'
      allowRanges.addSubnet(net, Number(cidr[2]), family)
    } else if (isIP(stripBrackets(entry)) !== 0) {
      const ip = stripBrackets(entry)
      allowRanges.addAddress(ip, isIP(ip) === 4 ? 'ipv4' : 'ipv6')
    } else {
      allowHosts.add(hostKey(entry))
    }
  }
  return {
    entries: [...allow],
    allowHosts,
    allowRanges,
    resolve: withTimeout(options.resolve ?? systemResolve, options.dnsTimeoutMs ?? 5000)
  }
}

function parseTarget (url: string | URL): URL | CheckResult {
  let parsed: URL
  try {
    parsed = typeof url === 'string' ? new URL(url) : new URL(url.href)
  } catch {
    return { ok: false, reason: 'invalid-url', message: 'not a valid absolute URL' }
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return { ok: false, reason: 'scheme', message: `scheme ${parsed.protocol} is not allowed: http or https only` }
  }
  return parsed
}

function judgeLiteral (host: string, policy: EgressPolicy): CheckResult {
  const category = blockedCategory(host)
  if (category === undefined || inAllowedRange(host, policy)) return { ok: true, addresses: [host] }
  return { ok: false, reason: 'blocked-address', message: `address ${host} is blocked (${category}); EGRESS_ALLOW can open it` }
}

/**
 * The check done without DNS: scheme, and the address when the host is an IP literal.
 * Returns undefined when the host is a name that still has to be resolved.
 */
function checkStatic (url: URL, policy: EgressPolicy): CheckResult | undefined {
  const host = stripBrackets(url.hostname)
  if (isIP(host) !== 0) return judgeLiteral(host, policy)
  return undefined
}

/**
 * Registration-time check of a tenant server URL. Every address a name resolves to must be
 * allowed (a name with one private address among public ones is refused: the client could
 * dial any of them). A DNS failure or an empty answer fails closed.
 */
export async function checkUrl (url: string | URL, policy: EgressPolicy): Promise<CheckResult> {
  const target = parseTarget(url)
  if (!(target instanceof URL)) return target
  const literal = checkStatic(target, policy)
  if (literal !== undefined) return literal
  const host = hostKey(target.hostname)
  let addresses: AddressList
  try {
    addresses = await policy.resolve(host)
  } catch {
    return { ok: false, reason: 'dns-failure', message: `cannot resolve ${host}` }
  }
  if (addresses.length === 0) return { ok: false, reason: 'dns-failure', message: `${host} has no address` }
  if (!policy.allowHosts.has(host)) {
    for (const { address } of addresses) {
      if (!isAddressAllowed(address, policy)) {
        return { ok: false, reason: 'blocked-address', message: `${host} resolves to a blocked address (${blockedCategory(address) ?? 'blocked'}); EGRESS_ALLOW can open it` }
      }
    }
  }
  return { ok: true, addresses: addresses.map((a) => a.address) }
}

type LookupCallback = (err: NodeJS.ErrnoException | null, address: string | AddressList, family?: number) => void

/**
 * A `lookup` for net/tls.connect that resolves with the policy and refuses blocked answers,
 * so the address checked is the address dialled. (IP literals do not go through lookup:
 * guardedFetch checks those before the request.)
 */
function guardedLookup (
  policy: EgressPolicy,
  cache: { ttlMs: number, maxHosts?: number } = { ttlMs: 0 }
): (hostname: string, options: { family?: number | string, all?: boolean }, callback: LookupCallback) => void {
  const resolve = cache.ttlMs > 0 ? cachedResolve(policy.resolve, cache.ttlMs, cache.maxHosts ?? 1000) : policy.resolve
  return (hostname, options, callback) => {
    const host = hostKey(hostname)
    resolve(host).then((addresses) => {
      if (!policy.allowHosts.has(host)) {
        const blocked = addresses.find((a) => !isAddressAllowed(a.address, policy))
        if (blocked !== undefined) {
          callback(new EgressBlockedError('blocked-address', `${host} resolved to a blocked address at connect time (${blockedCategory(blocked.address) ?? 'blocked'})`), '')
          return
        }
      }
      const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : Number(options.family ?? 0)
      const usable = family === 4 || family === 6 ? addresses.filter((a) => a.family === family) : addresses
      const first = usable[0]
      if (first === undefined) {
        const err: NodeJS.ErrnoException = new Error(`cannot resolve ${host}`)
        err.code = 'ENOTFOUND'
        callback(err, '')
        return
      }
      if (options.all === true) callback(null, usable)
      else callback(null, first.address, first.family)
    }, (err: unknown) => {
      const wrapped: NodeJS.ErrnoException = new EgressBlockedError('dns-failure', `cannot resolve ${host}`)
      wrapped.cause = err
      callback(wrapped, '')
    })
  }
}

/**
 * The resolver with a short-lived memory per hostname: the connects of many tenants to servers on
 * the same host within `ttlMs` share one lookup (concurrent ones share the lookup in flight).
 * Every answer is still checked on every connect, so a cached answer can only make a connect dial
 * an address that was checked, never one that was not (a rebinding answer arrives once the entry
 * expires, and is checked then). Failures are not kept; at most `maxHosts` names, oldest first out.
 */
function cachedResolve (resolve: ResolveAll, ttlMs: number, maxHosts: number): ResolveAll {
  const answers = new Map<string, { expires: number, answer: Promise<AddressList> }>()
  return async (host) => {
    const now = Date.now()
    const hit = answers.get(host)
    if (hit !== undefined && hit.expires > now) return await hit.answer
    const answer = resolve(host)
    answers.delete(host)
    answers.set(host, { expires: now + ttlMs, answer })
    if (answers.size > maxHosts) answers.delete(answers.keys().next().value as string)
    answer.catch(() => { if (answers.get(host)?.answer === answer) answers.delete(host) })
    return await answer
  }
}

export interface GuardedFetchOptions {
  /** Bound on establishing a connection (TCP + TLS). Default 10000. */
  connectTimeoutMs?: number
  /** Distinct origins one connection pool serves before a fresh one takes over. Default 64. */
  maxOriginsPerAgent?: number
  /** How long a hostname's DNS answer serves further connects (each still checked); 0 resolves every connect. Default 2000. */
  dnsCacheMs?: number
  /**
   * Connections to one origin at once (all tenants: an origin may be a host many tenants' servers share); more
   * requests wait for one. Default 1024, a backstop for the gateway's descriptors: a tenant's server that kept the
   * gateway's replies to its own requests unanswered made it open a socket per reply, 15,000-19,000 in one call (an
   * audit). What keeps it far below that: 100 server requests per call stream, 10 s per reply (stream-bounds.ts).
   */
  connectionsPerOrigin?: number
}

/** A fetch for tenant servers. `close()` releases its connection pools. */
export type GuardedFetch = ((input: string | URL | Request, init?: RequestInit) => Promise<Response>) & {
  close: () => Promise<void>
  /** Origins on the current connection pool, and pools created so far. */
  stats: () => { origins: number, pools: number }
  /**
   * The guarded dispatcher for a request to `url` (the lean MCP transport's undici request()
   * path): throws EgressBlockedError for a bad scheme or a blocked IP literal, and names are
   * checked at connect time by the same lookup as fetch's. The caller must refuse 3xx itself.
   */
  dispatcherFor: (url: URL) => Dispatcher
}

function isRedirect (status: number): boolean {
  return status >= 300 && status < 400 && status !== 304
}

/**
 * A fetch-compatible function (for the MCP SDK's `fetch` transport option) that enforces the
 * policy on every request: the scheme and IP literals before sending, names at connect time
 * through its own connection pool, and any 3xx answer as an error (never followed).
 */
export function guardedFetch (policy: EgressPolicy, options: GuardedFetchOptions = {}): GuardedFetch {
  // One memory of DNS answers for every pool of this fetch (they rotate, see maxOrigins below).
  const lookup = guardedLookup(policy, { ttlMs: options.dnsCacheMs ?? 2000 })
  const newAgent = (): Agent => new Agent({
    connect: { lookup, timeout: options.connectTimeoutMs ?? 10_000 },
    connections: options.connectionsPerOrigin ?? 1024,
    maxRedirections: 0
  })
  // undici's Agent keeps a pool per origin it ever dispatched to and never drops it (~20 KiB
  // each), so one agent for the process would grow with every tenant server ever contacted.
  // After maxOrigins distinct origins a fresh agent takes new requests; the old one closes
  // gracefully (its streaming responses finish) and is then garbage.
  const maxOrigins = options.maxOriginsPerAgent ?? 64
  let agent = newAgent()
  let origins = new Set<string>()
  let pools = 1
  const retired = new Set<Agent>()
  const checkedUrls = new WeakSet<URL>()
  const agentFor = (origin: string): Agent => {
    if (!origins.has(origin)) {
      if (origins.size >= maxOrigins) {
        const old = agent
        retired.add(old)
        old.close().catch(() => {}).finally(() => retired.delete(old))
        agent = newAgent()
        origins = new Set()
        pools++
      }
      origins.add(origin)
    }
    return agent
  }
  const fetchFn = async (input: string | URL | Request, init?: RequestInit): Promise<Response> => {
    const isRequest = typeof input === 'object' && !(input instanceof URL)
    const target = parseTarget(isRequest ? input.url : input)
    if (!(target instanceof URL)) throw new EgressBlockedError(target.ok ? 'invalid-url' : target.reason, target.ok ? 'invalid URL' : target.message)
    const literal = checkStatic(target, policy)
    if (literal !== undefined && !literal.ok) throw new EgressBlockedError(literal.reason, literal.message)

    const base: Record<string, unknown> = isRequest
      ? { method: input.method, headers: input.headers, body: input.body, signal: input.signal, duplex: 'half' }
      : {}
    const requestInit = { ...base, ...init, redirect: 'manual', dispatcher: agentFor(target.origin) } as unknown as UndiciRequestInit
    let response: Awaited<ReturnType<typeof undiciFetch>>
    try {
      response = await undiciFetch(target, requestInit)
    } catch (err) {
      // fetch wraps connect errors in "fetch failed"; surface the policy's own error.
      const cause = (err as { cause?: unknown }).cause
      if (cause instanceof EgressBlockedError) throw cause
      throw err
    }
    if (isRedirect(response.status)) {
      await response.body?.cancel().catch(() => {})
      throw new EgressBlockedError('redirect', `refused to follow a redirect (HTTP ${response.status}) from ${target.host}`)
    }
    return response as unknown as Response
  }
  return Object.assign(fetchFn, {
    close: async () => {
      // Retired pools may still hold long-lived streams (MCP GET streams): cut those off.
      await Promise.all([agent.close(), ...[...retired].map(async (a) => { await a.destroy().catch(() => {}) })])
    },
    stats: () => ({ origins: origins.size, pools }),
    dispatcherFor: (url: URL): Dispatcher => {
      // The static check is a property of the URL object (the transport's own, never mutated):
      // once per transport, not per request. Names are still checked on every connect.
      if (checkedUrls.has(url)) return agentFor(url.origin)
      const target = parseTarget(url)
      if (!(target instanceof URL)) throw new EgressBlockedError(target.ok ? 'invalid-url' : target.reason, target.ok ? 'invalid URL' : target.message)
      const literal = checkStatic(target, policy)
      if (literal !== undefined && !literal.ok) throw new EgressBlockedError(literal.reason, literal.message)
      checkedUrls.add(url)
      return agentFor(target.origin)
    }
  })
}
