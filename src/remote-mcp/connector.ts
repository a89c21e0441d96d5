import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import type { UpstreamCallResult } from './pooled-client.js'
import type { ServerConfig } from '../registry/server-config.js'
import { UpstreamError } from './errors.js'
import type { McpClientPool } from './pool.js'
import type { McpConnector, RemoteServer } from './source.js'
import type { SurfaceRequest } from '../routing/source.js'
import type { ConnectSpec } from './transport.js'
import { transportKind } from './transports.js'
import { RELAY_CAPABILITIES, RELAY_KEY_SUFFIX } from './relay.js'
import type { RegistryScope } from '../registry/types.js'
import type { UpstreamAuthorization } from './upstream-auth.js'

/** A server's OAuth hook for its transports (src/oauth), or undefined for a server without `auth`. */
export type AuthorizationFor = (scope: RegistryScope, serverId: string, config: ServerConfig) => UpstreamAuthorization | undefined

/** The transport part of a (decrypted) server config. */
function toConnectSpec (config: ServerConfig, authorization?: UpstreamAuthorization): ConnectSpec {
  return {
    ...(authorization !== undefined ? { authorization } : {}),
    type: config.type,
    ...(config.url !== undefined ? { url: config.url } : {}),
    ...(config.headers !== undefined ? { headers: config.headers } : {}),
    ...(config.command !== undefined ? { command: config.command } : {}),
    ...(config.args !== undefined ? { args: config.args } : {}),
    ...(config.env !== undefined ? { env: config.env } : {}),
    ...(config.timeoutMs !== undefined ? { timeoutMs: config.timeoutMs } : {}),
    ...(config.protocol !== undefined ? { protocol: config.protocol } : {})
  }
}

/**
 * Connects the remote sources to the client pools. Tenant servers go through a pool whose
 * fetch is SSRF-guarded (checked against the address actually dialled); global servers are
 * the operator's and use a plain pool.
 */
export class PoolConnector implements McpConnector {
  readonly #tenantPool: McpClientPool
  readonly #globalPool: McpClientPool

  readonly #authorizationFor: AuthorizationFor | undefined
  readonly #specs = new WeakMap<ServerConfig, ConnectSpec>()
  readonly #relaySpecs = new WeakMap<ConnectSpec, ConnectSpec>()

  constructor (pools: { tenant: McpClientPool, global: McpClientPool }, authorizationFor?: AuthorizationFor) {
    this.#tenantPool = pools.tenant
    this.#globalPool = pools.global
    this.#authorizationFor = authorizationFor
  }

  #spec (server: RemoteServer): ConnectSpec {
    const config = server.config as ServerConfig
    const authorization = config.auth !== undefined && server.scope !== undefined ? this.#authorizationFor?.(server.scope, server.serverId, config) : undefined
    if (authorization !== undefined) return toConnectSpec(config, authorization)
    // One spec object per config object (the registry's, never changed once made): the pool knows its client by it
    // without hashing the config again on every call (pool.ts clientId).
    let spec = this.#specs.get(config)
    if (spec === undefined) {
      spec = toConnectSpec(config)
      this.#specs.set(config, spec)
    }
    return spec
  }

  /** The spec of a call whose client can be asked: the server's, declaring what a relay carries (relay.ts); one per spec. */
  #relaySpec (spec: ConnectSpec): ConnectSpec {
    let relay = this.#relaySpecs.get(spec)
    if (relay === undefined) {
      relay = { ...spec, clientCapabilities: RELAY_CAPABILITIES }
      this.#relaySpecs.set(spec, relay)
    }
    return relay
  }

  #pool (server: RemoteServer): McpClientPool {
    return server.scope?.kind === 'global' ? this.#globalPool : this.#tenantPool
  }

  async listTools (key: string, server: RemoteServer, opts: { signal: AbortSignal, timeoutMs: number }): Promise<Tool[]> {
    const deadline = AbortSignal.timeout(opts.timeoutMs)
    const signal = AbortSignal.any([opts.signal, deadline])
    const pool = this.#pool(server)
    const spec = this.#spec(server)
    try {
      return await pool.listTools(key, spec, { signal })
    } catch (err) {
      // The pool reports any abort of its signal as the caller's cancellation; when it was our
      // deadline, the server is slow or hung: a list it gave before is better than none (the
      // refresh goes on in the background), else `unavailable` must say it timed out.
      if (deadline.aborted && !opts.signal.aborted) {
        const stale = pool.cachedTools(key, spec)
        if (stale !== undefined) return stale
        // A first start (npx downloading its package) has a longer deadline of its own and goes on.
        const starting = pool.starting(key, spec)
        if (starting !== undefined) {
          throw new UpstreamError('GW_UPSTREAM_ERROR', `starting: first connection in progress${starting.lastError !== undefined ? ` (the previous attempt failed: ${starting.lastError})` : ''}`)
        }
        throw new UpstreamError('GW_UPSTREAM_TIMEOUT', `The MCP server did not connect and list its tools within ${opts.timeoutMs} ms`)
      }
      throw err
    }
  }

  /** Starts a slow-starting (stdio) server's first connection and listing in the background; other transports connect on use. */
  async warm (key: string, server: RemoteServer): Promise<void> {
    const spec = this.#spec(server)
    if (!transportKind(spec.type).slowFirstStart) return
    await this.#pool(server).warm(key, spec)
  }

  async callTool (
    key: string,
    server: RemoteServer,
    name: string,
    args: Record<string, unknown>,
    opts: Parameters<McpConnector['callTool']>[4]
  ): Promise<UpstreamCallResult> {
    const spec = this.#spec(server)
    // A call whose client can be asked the server's questions: on a connection that declares it can (relay.ts).
    if (opts.input?.relay?.ask !== undefined) {
      return await this.#pool(server).callTool(`${key}${RELAY_KEY_SUFFIX}`, this.#relaySpec(spec), name, args, opts)
    }
    return await this.#pool(server).callTool(key, spec, name, args, opts)
  }

  async surface (key: string, server: RemoteServer, req: SurfaceRequest, opts: { signal: AbortSignal, timeoutMs: number }): Promise<unknown> {
    return await this.#pool(server).surface(key, this.#spec(server), req, opts)
  }
}
