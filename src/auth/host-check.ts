/**
 * DNS rebinding and cross-site protection (docs/ARCHITECTURE.md#host-check): which `Host`,
 * `X-Forwarded-Host` and `Origin` a request may carry. A web page whose name its owner rebinds to
 * 127.0.0.1 calls the gateway same-origin, so the browser's only tell is the `Host` header (the
 * page's own name); a page of another site that posts to http://localhost:8080 carries its own
 * `Origin`. Loopback names are always accepted: no page can make a browser send them for a name
 * of its own. Pure: the plugin (plugins/host-check.ts) reads the headers and refuses.
 */

/** One ALLOWED_HOSTS entry: a name (or `*.suffix`), with or without a port. */
export interface HostPattern {
  /** The canonical name (lower case, IPv6 without brackets), or the suffix after `*.`. */
  readonly name: string
  /** `*.example.com`: any name ending in `.example.com` (not example.com itself). */
  readonly wildcard: boolean
  /** Only this port; undefined = any port. */
  readonly port: number | undefined
}

/** What is checked: absent in keyed mode without ALLOWED_HOSTS (nothing is checked then). */
export interface HostPolicy {
  readonly allowed: readonly HostPattern[]
  /** Whether X-Forwarded-Host is checked too (TRUST_PROXY set: the gateway believes forwarded headers). */
  readonly forwardedHost: boolean
}

export type HostVerdict =
  | { ok: true }
  | { ok: false, header: 'host' | 'x-forwarded-host' | 'origin', value: string }

/** `name`, `name:port`, `[v6]`, `[v6]:port`; the name in the characters DNS names and IP literals use. */
const HOST_SYNTAX = /^(?:\[([0-9a-f:.]+)\]|([a-z0-9_.-]+))(?::([0-9]{1,5}))?$/
/** The WHATWG URL parser reads a host as IPv4 when its last label is a number (decimal, or 0x hex). */
const DOMAIN = /^(?:[a-z0-9_-]+\.)*(?=[a-z0-9_-]*[g-wyz_-]|(?!0x)[0-9a-f]*[a-f])[a-z0-9_-]+\.?$/
const CANONICAL_IPV4 = /^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$/
const WILDCARD_SYNTAX = /^\*\.([a-z0-9_-][a-z0-9_.-]*)(?::([0-9]{1,5}))?$/

interface ParsedHost { name: string, port: number | undefined }

/**
 * The canonical name and port of a `Host`-style value, or undefined when it is not one.
 * IP literals are canonicalised the way the WHATWG URL parser (a browser) does: `[0:0::1]` is
 * `::1`, `0x7f.1` is `127.0.0.1`.
 */
export function parseHost (value: string): ParsedHost | undefined {
  const m = HOST_SYNTAX.exec(value.trim().toLowerCase())
  if (m === null) return undefined
  const port = portOf(m[3])
  if (port === null) return undefined
  let name = m[2] as string
  // A name whose last label is not a number is a domain as written (lower-cased); a canonical
  // dotted quad is itself. Only other IP forms go through the URL parser (a few µs per call).
  if (m[1] !== undefined || !(DOMAIN.test(name) || CANONICAL_IPV4.test(name))) {
    try {
      name = new URL(m[1] !== undefined ? `http://[${m[1]}]/` : `http://${name}/`).hostname
    } catch {
      return undefined
    }
    if (name.startsWith('[')) name = name.slice(1, -1)
  }
  // `localhost.` is `localhost` to a resolver; compare without the root dot.
  if (name.endsWith('.')) name = name.slice(0, -1)
  return name === '' ? undefined : { name, port }
}

function portOf (text: string | undefined): number | undefined | null {
  if (text === undefined) return undefined
  const port = Number(text)
  return port <= 65535 ? port : null
}

/** localhost, *.localhost (RFC 6761: always loopback, browsers resolve it themselves), 127.0.0.0/8, ::1. */
function isLoopbackName (name: string): boolean {
  return name === 'localhost' || name.endsWith('.localhost') || name === '::1' ||
    /^127\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$/.test(name) || name === '::ffff:7f00:1'
}

/** ALLOWED_HOSTS entries; throws naming the entry that is not a host name, `*.name`, or either with a port. */
export function parseAllowedHosts (entries: readonly string[]): HostPattern[] {
  return entries.map((entry) => {
    const text = entry.trim().toLowerCase()
    const wild = WILDCARD_SYNTAX.exec(text)
    if (wild !== null) {
      const port = portOf(wild[2])
      const suffix = parseHost(wild[1] as string)
      if (port !== null && suffix !== undefined) return { name: suffix.name, wildcard: true, port }
    } else {
      const host = parseHost(text)
      if (host !== undefined) return { name: host.name, wildcard: false, port: host.port }
    }
    throw new Error(`ALLOWED_HOSTS: "${entry}" is not a host name, *.domain or [IPv6] address with an optional :port`)
  })
}

/**
 * The policy of a mode: open mode always checks (loopback names plus ALLOWED_HOSTS); keyed mode
 * checks only when ALLOWED_HOSTS is set (a key, which a browser never sends on its own, already
 * protects it). undefined = nothing to check.
 */
export function hostPolicyOf (mode: 'open' | 'keyed', allowedHosts: readonly string[], opts: { trustProxy?: boolean } = {}): HostPolicy | undefined {
  if (mode === 'keyed' && allowedHosts.length === 0) return undefined
  return { allowed: parseAllowedHosts(allowedHosts), forwardedHost: opts.trustProxy === true }
}

/**
 * Whether a name and port (a port-less Host means the scheme's default, 80 or 443) is loopback
 * or in the list.
 */
function hostAllowed (policy: HostPolicy, host: ParsedHost): boolean {
  if (isLoopbackName(host.name)) return true
  for (const p of policy.allowed) {
    const nameOk = p.wildcard ? host.name.endsWith(`.${p.name}`) : host.name === p.name
    if (!nameOk) continue
    if (p.port === undefined || p.port === host.port) return true
    if (host.port === undefined && (p.port === 80 || p.port === 443)) return true
  }
  return false
}

/** An `Origin` header: `null` (sandboxed frames, file:) and anything unparsable are foreign. */
function originAllowed (policy: HostPolicy, origin: string): boolean {
  let url: URL
  try {
    url = new URL(origin)
  } catch {
    return false
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false
  const name = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname
  const port = url.port !== '' ? Number(url.port) : url.protocol === 'https:' ? 443 : 80
  return hostAllowed(policy, { name: name.endsWith('.') ? name.slice(0, -1) : name, port })
}

/** The headers a request is judged by (as Node gives them: a string, or undefined when absent). */
export interface HostHeaders {
  host: string | undefined
  origin: string | undefined
  forwardedHost: string | string[] | undefined
}

/**
 * The verdict on one request. A missing Host (HTTP/1.0) is accepted: a browser always sends one.
 * X-Forwarded-Host, when the policy looks at it, must be allowed too (every hop's value): it is
 * checked in addition to Host, never instead, so a page cannot add `X-Forwarded-Host: localhost`
 * to pass.
 */
export function checkHostHeaders (policy: HostPolicy, headers: HostHeaders): HostVerdict {
  const { host, origin, forwardedHost } = headers
  if (host !== undefined && host !== '') {
    const parsed = parseHost(host)
    if (parsed === undefined || !hostAllowed(policy, parsed)) return { ok: false, header: 'host', value: host }
  }
  if (policy.forwardedHost && forwardedHost !== undefined) {
    for (const value of (Array.isArray(forwardedHost) ? forwardedHost : [forwardedHost]).flatMap((v) => v.split(','))) {
      const parsed = parseHost(value)
      if (parsed === undefined || !hostAllowed(policy, parsed)) return { ok: false, header: 'x-forwarded-host', value: value.trim() }
    }
  }
  if (origin !== undefined && !originAllowed(policy, origin)) return { ok: false, header: 'origin', value: origin }
  return { ok: true }
}

/** The refusal's message: what was refused and how to allow it. */
export function hostRefusalMessage (verdict: Exclude<HostVerdict, { ok: true }>, mode: 'open' | 'keyed'): string {
  const value = JSON.stringify(verdict.value.slice(0, 200))
  const how = mode === 'open'
    ? 'without API keys the gateway answers only requests addressed to a loopback name (localhost, 127.0.0.1, [::1]); ' +
      'to reach it under another name, set ALLOWED_HOSTS=name[:port],... (better: set API_KEYS too)'
    : 'add the name to ALLOWED_HOSTS (comma-separated name[:port] or *.domain entries)'
  if (verdict.header === 'origin') return `Origin ${value} is not allowed (a page of another site; DNS rebinding and cross-site protection): ${how}`
  return `${verdict.header === 'host' ? 'Host' : 'X-Forwarded-Host'} ${value} is not allowed (DNS rebinding protection): ${how}`
}
