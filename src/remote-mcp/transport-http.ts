/**
 * The HTTP transports (docs/ARCHITECTURE.md#mcp-pool): streamable HTTP, on our lean transport
 * (lean-http-transport.ts, MCP_HTTP_TRANSPORT=lean) or the SDK's fetch-based one, and the legacy
 * SSE transport (the SDK's). Redirects are never followed and answers are bounded either way
 * (docs/ARCHITECTURE.md#egress, response-limits.ts).
 */
import { SSEClientTransport, SseError, StreamableHTTPClientTransport } from '@modelcontextprotocol/client'
import type { FetchLike } from '@modelcontextprotocol/client'
import { Agent, type Dispatcher } from 'undici'
import { EgressBlockedError } from '../egress/ssrf.js'
import { isolateAbortSignals, limitResponses, RedirectRefusedError, refuseRedirects, traceHeaders } from './http-fetch.js'
import { LeanHttpTransport } from './lean-http-transport.js'
import { ConnectSpecError } from './transport.js'
import { authorizedFetch } from './upstream-auth.js'
import type { ConnectSpec, TransportContext, TransportHandle, TransportKind } from './transport.js'

export const streamableHttpTransport: TransportKind = {
  create: (spec, context) => {
    const url = parseHttpUrl(spec.url)
    const dispatcher = context.httpTransport === 'lean' ? leanDispatcher(context.fetch) : undefined
    return dispatcher !== undefined ? createLean(spec, url, dispatcher, context) : createSdkHttp(spec, url, context, 'streamable_http')
  },
  slowFirstStart: false,
  closedMeansUnanswered: false,
  // When the server crashes or shuts down, a POST's response stream that breaks or ends before
  // its answer is never resumed (no event ids), so the call would wait out its whole timeout; the
  // only signs are transport errors (the broken stream, the failed reconnects of the GET stream).
  onTransportError: () => 'probe',
  // Both eras: server/discover once per config, then the remembered verdict.
  era: 'auto'
}

export const sseTransport: TransportKind = {
  create: (spec, context) => createSdkHttp(spec, parseHttpUrl(spec.url), context, 'sse'),
  slowFirstStart: false,
  closedMeansUnanswered: false,
  // The legacy SSE stream cannot resume a session: once it breaks, the session is gone.
  onTransportError: (err) => err instanceof SseError ? 'drop' : 'log',
  // The HTTP+SSE transport of 2024-11-05 has no 2026-07-28 counterpart.
  era: 'legacy'
}

// Operator (global) servers without the SSRF guard: one keep-alive agent for the process, a
// pool per origin, no pipelining (a slow call must not hold up the next one on the socket),
// connections bounded per origin (each session's GET stream holds one while open).
let plainAgent: Agent | undefined
function plainDispatcher (): Dispatcher {
  plainAgent ??= new Agent({ pipelining: 1, connections: 1024, keepAliveTimeout: 4000 })
  return plainAgent
}

function leanDispatcher (fetchFn: FetchLike | undefined): ((url: URL) => Dispatcher) | undefined {
  if (fetchFn === undefined) return plainDispatcher
  const dispatcherFor = (fetchFn as { dispatcherFor?: unknown }).dispatcherFor
  return typeof dispatcherFor === 'function' ? dispatcherFor as (url: URL) => Dispatcher : undefined
}

function createLean (spec: ConnectSpec, url: URL, dispatcher: (url: URL) => Dispatcher, context: TransportContext): TransportHandle {
  const { limits } = context
  const transport = new LeanHttpTransport(url, {
    headers: { ...(spec.headers ?? {}) },
    dispatcher,
    maxMessageBytes: limits.maxMessageBytes,
    budget: limits.budget,
    budgetOwner: limits.owner,
    ...(spec.authorization !== undefined ? { authorization: spec.authorization } : {}),
    ...(context.traceHeaders !== undefined ? { traceHeaders: context.traceHeaders } : {}),
    // The same refusal as the SDK path's: the SSRF guard's own error for tenant servers.
    redirectError: context.fetch !== undefined
      ? (status) => new EgressBlockedError('redirect', `refused to follow a redirect (HTTP ${status}) from ${url.host}`)
      : (status) => new RedirectRefusedError(status)
  })
  return {
    transport,
    type: 'streamable_http',
    pid: () => null,
    abortListenerCount: () => transport.abortListenerCount(),
    endSession: async () => { await transport.terminateSession() }
  }
}

function createSdkHttp (spec: ConnectSpec, url: URL, context: TransportContext, type: 'streamable_http' | 'sse'): TransportHandle {
  const fetched = context.fetch ?? globalThis.fetch
  const base = refuseRedirects(context.traceHeaders !== undefined ? traceHeaders(fetched, context.traceHeaders) : fetched)
  const isolated = isolateAbortSignals(spec.authorization !== undefined ? authorizedFetch(base, spec.authorization) : base)
  const bounded = limitResponses(isolated.fetch, context.limits)
  // redirect 'manual' makes the SDK hand the POSTs to our fetch unchanged (it would otherwise
  // follow same-origin redirects itself); refuseRedirects then fails any 3xx, including on the
  // GET stream, because redirects are never followed (docs/ARCHITECTURE.md#egress).
  const requestInit: RequestInit = { headers: { ...(spec.headers ?? {}) }, redirect: 'manual' }
  if (type === 'sse') {
    return { transport: new SSEClientTransport(url, { requestInit, fetch: bounded }), type, pid: () => null, abortListenerCount: isolated.sharedListenerCount }
  }
  const transport = new StreamableHTTPClientTransport(url, { requestInit, fetch: bounded })
  return {
    transport,
    type,
    pid: () => null,
    abortListenerCount: isolated.sharedListenerCount,
    endSession: async () => { await transport.terminateSession() }
  }
}

function parseHttpUrl (raw: string | undefined): URL {
  if (raw === undefined || raw === '') throw new ConnectSpecError('An HTTP MCP server needs a url')
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    throw new ConnectSpecError('The MCP server url is not a valid URL')
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new ConnectSpecError(`The MCP server url must be http or https, not ${url.protocol}`)
  }
  return url
}
