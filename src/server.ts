import os from 'node:os'
import closeWithGrace from 'close-with-grace'
import { buildApp } from './app.js'
import { ConfigError, loadConfig } from './config.js'
import type { Config } from './config.js'
import { DiscoveryError } from './discovery/modules.js'
import { StartupError } from './errors.js'
import { closeInheritedDescriptors } from './builtin/index.js'
import { createTracing } from './tracing/index.js'
import { stdoutLogStream } from './logger.js'
import type { Tracing } from './tracing/index.js'

/**
 * Process entry: the only place that reads process.env, listens and handles signals.
 */
async function main (): Promise<void> {
  // Before anything spawns: what the parent left open must not reach sandboxed commands (Node's IPC channel stays).
  const ipc = (process.channel as { fd?: number } | undefined)?.fd
  const inherited = closeInheritedDescriptors(ipc !== undefined ? [ipc] : [])
  let config: Config
  let tracing: Tracing
  try {
    config = loadConfig(process.env)
    // OpenTelemetry: off unless an OTLP endpoint is set (the standard OTEL_* variables, src/tracing/).
    tracing = await createTracing(process.env)
  } catch (err) {
    if (err instanceof ConfigError || err instanceof StartupError) {
      process.stderr.write(`tool-gateway: ${err.message}\n`)
      process.exit(2)
    }
    throw err
  }

  let app: Awaited<ReturnType<typeof buildApp>>
  try {
    app = await buildApp(config, { overrides: { tracing }, logStream: stdoutLogStream() })
  } catch (err) {
    // Discovery, sandbox probe, workspace and registry problems: say what is wrong, no stack.
    const detail = err instanceof DiscoveryError || err instanceof ConfigError ? '' : `\n${(err as Error)?.stack ?? ''}`
    process.stderr.write(`tool-gateway: start-up failed: ${(err as Error)?.message ?? String(err)}${config.logLevel === 'debug' || config.logLevel === 'trace' ? detail : ''}\n`)
    process.exit(1)
  }

  // The hard bound: the drain (SHUTDOWN_GRACE_MS), then killing processes and closing MCP
  // clients and Redis (each bounded on its own). Past it close-with-grace exits 1.
  closeWithGrace({ delay: config.shutdownGraceMs + 15_000 }, async ({ signal, err }) => {
    if (err) app.log.error({ err }, 'closing after an error')
    else app.log.info({ signal, graceMs: config.shutdownGraceMs }, 'closing: no new connections, waiting for in-flight requests')
    await closeGracefully(app, config.shutdownGraceMs)
    // Last: the spans of the drain are exported too (bounded by the exporter's timeout).
    await tracing.shutdown().catch((e: unknown) => app.log.warn({ err: e }, 'exporting the last spans failed'))
    app.log.info('closed')
  })

  // The auth plugin decides (a key file with no key is a start-up error, never open mode).
  const open = app.authMode === 'open'
  const host = config.host ?? (open ? '127.0.0.1' : '0.0.0.0')
  await app.listen({ port: config.port, host })
  const address = app.server.address()
  const port = typeof address === 'object' && address ? address.port : config.port
  if (open) {
    app.log.warn('No API keys configured: running OPEN (every caller is admin) for local development; bound to %s', host)
  } else {
    app.log.info(`API keys required (Authorization: Bearer <key>): ${app.apiKeyCounts.admin} admin, ${app.apiKeyCounts.tenant} tenant, ${app.apiKeyCounts.approver} approver key(s)`)
  }
  // The issuer is not contacted now (discovery is lazy): say which one will be, so a typo shows at start-up.
  if (config.oauthIssuer !== undefined) {
    app.log.info({ issuer: config.oauthIssuer }, 'incoming OAuth: access tokens of %s accepted beside the keys', config.oauthIssuer)
  }
  const membership = app.services.coordination?.membership
  if (membership !== undefined) {
    // Where the other instances reach this one: INSTANCE_URL, else this host and the bound port
    // (a wildcard bind is announced under the host name, which resolves in compose and Kubernetes).
    const announced = host === '0.0.0.0' || host === '::' ? os.hostname() : host
    const url = config.instanceUrl ?? `http://${announced.includes(':') ? `[${announced}]` : announced}:${port}`
    await membership.start(url).catch((err: unknown) => app.log.warn({ err }, 'cluster membership could not be registered yet (retried every heartbeat)'))
    app.log.info({ instanceId: membership.id, instanceUrl: url }, `cluster instance ${membership.id} at ${url}`)
  }
  if (inherited.length > 0) {
    app.log.info({ fds: inherited }, 'closed descriptors inherited from the parent process (they would have reached sandboxed commands)')
  }
  const auth = open ? '' : " -H 'authorization: Bearer <key>'"
  app.log.info(`tool-gateway listening on http://${host}:${port}  try: curl${auth} 'http://${host}:${port}/tools?functions=current_time,calculate'`)
}

/**
 * app.close() stops accepting at once, waits for in-flight requests, then runs the onClose
 * hooks (background and sandboxed processes killed, MCP clients and Redis closed). A request
 * still running after `graceMs` has its connection destroyed: that aborts its tool (the
 * sandbox kills the command) and lets the close proceed.
 */
async function closeGracefully (app: Awaited<ReturnType<typeof buildApp>>, graceMs: number): Promise<void> {
  const closing = app.close()
  // server.close() only drops the keep-alive connections idle at that moment; one whose last
  // response finishes during the drain would otherwise hold the close until keepAliveTimeout.
  const sweep = setInterval(() => { app.server.closeIdleConnections() }, 100)
  let timer: NodeJS.Timeout | undefined
  const drained = await Promise.race([
    closing.then(() => true),
    new Promise<false>((resolve) => { timer = setTimeout(() => resolve(false), graceMs) })
  ])
  clearTimeout(timer)
  clearInterval(sweep)
  if (!drained) {
    app.log.warn({ graceMs }, 'in-flight requests did not finish in time; cutting them off')
    app.server.closeAllConnections()
    await closing
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`tool-gateway: fatal: ${(err as Error)?.stack ?? String(err)}\n`)
  process.exit(1)
})
