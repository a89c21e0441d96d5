import { randomUUID } from 'node:crypto'
import Fastify, { LogController } from 'fastify'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import type { DestinationStream } from 'pino'
import { Ajv } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { Config } from './config.js'
import { formatValidationErrors } from './api/error-format.js'
import { redactLogLine } from './logger.js'
import { createServices } from './services.js'
import { oauthResourceOf } from './auth/oauth-bearer.js'
import type { OAuthBearerOptions } from './auth/oauth-bearer.js'
import type { ServiceOverrides, Services } from './services.js'
import authPlugin from '../plugins/auth.js'
import hostCheckPlugin from '../plugins/host-check.js'
import routeConfigPlugin from '../plugins/route-config.js'
import requestLogPlugin from '../plugins/request-log.js'
import bodyTimeoutPlugin from '../plugins/body-timeout.js'
import jsonBodyPlugin from '../plugins/json-body.js'
import docsPlugin from '../plugins/docs.js'
import errorsPlugin, { frameworkErrorReply, MAX_PARAM_LENGTH } from '../plugins/errors.js'
import servicesPlugin from '../plugins/services.js'
import tracingPlugin from '../plugins/tracing.js'
import metricsPlugin from '../plugins/metrics.js'
import overheadPlugin from '../plugins/overhead.js'
import rateLimitPlugin from '../plugins/rate-limit.js'
import approvalRoutes from '../routes/approvals.js'
import clusterRoutes from '../routes/cluster.js'
import consoleRoutes from '../routes/console.js'
import clusterAuthPlugin from '../plugins/cluster-auth.js'
import healthRoutes from '../routes/health.js'
import whoamiRoutes from '../routes/whoami.js'
import invocationRoutes from '../routes/invocations.js'
import taskRoutes from '../routes/tasks.js'
import invokeRoutes from '../routes/invoke.js'
import mcpRoutes from '../routes/mcp.js'
import type { McpRoutesOptions } from '../routes/mcp.js'
import oauthMetadataRoutes from '../routes/oauth-metadata.js'
import pinRoutes from '../routes/pins.js'
import policyRoutes from '../routes/policy.js'
import registryRoutes from '../routes/registry.js'
import oauthRoutes from '../routes/oauth.js'
import toolsRoutes from '../routes/tools.js'
import workspaceRoutes from '../routes/workspaces.js'

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => void

export interface BuildOptions {
  /** Fastify logger option; tests pass false. */
  logger?: FastifyServerOptions['logger']
  /** Where the default logger writes its lines (server.ts: stdout, a few lines per write); default stdout, a write per line. */
  logStream?: DestinationStream
  /** Prebuilt services (tests), or overrides for the ones built from the config. */
  services?: Services
  overrides?: ServiceOverrides
  /** Incoming OAuth's timings (tests: a JWKS cooldown of 0 to see a key rotation at once). */
  oauth?: Pick<OAuthBearerOptions, 'jwksCooldownMs' | 'discoveryRetryMs'>
  /** The /mcp endpoint's options (tests: `lean: false` serves every request through the SDK's per-request path). */
  mcp?: McpRoutesOptions
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/**
 * Builds the gateway app (not listening). Plugins and routes are registered explicitly, so the
 * wiring reads top to bottom; each plugin declares the plugins it needs (fastify-plugin
 * `dependencies`), and a wrong order fails here, at boot.
 */
export async function buildApp (config: Config, opts: BuildOptions = {}): Promise<FastifyInstance> {
  // First: a contradictory OAuth setting stops start-up before anything is opened.
  const oauth = oauthResourceOf(config, opts.oauth)
  const app = Fastify({
    logger: opts.logger ?? {
      level: config.logLevel,
      // The paths pino's `redact` took (req.headers authorization, x-api-key and the cluster
      // token; headers.authorization; *.headers.authorization, *.secretsKey, *.apiKeys), checked
      // per line and copied only when present: `redact` ran every value of every line through its redactor.
      formatters: { log: redactLogLine, bindings: redactLogLine },
      ...(opts.logStream !== undefined ? { stream: opts.logStream } : {})
    },
    // plugins/request-log.ts writes one line per request instead.
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: config.bodyLimitBytes,
    // A path parameter may be an MCP task handle (GET /users/{u}/tasks/{taskId}: a few hundred
    // characters, src/mcp-server/tasks.ts); each route's schema still bounds its own parameters.
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // A path that is not valid percent-encoding, or a parameter over that limit: the gateway's error shape, not Fastify's.
    frameworkErrors: frameworkErrorReply,
    // TRUST_PROXY: a hop count or the proxies' addresses; never `true` (any client could name its own address).
    trustProxy: trustProxyOf(config.trustProxy),
    // Slow or stalled uploads (slowloris) are cut off instead of holding a socket forever.
    // Node's own backstop (whole request); plugins/body-timeout.ts enforces the body deadline.
    requestTimeout: config.requestTimeoutMs * 2,
    // Node checks request timeouts every 30 s by default; check often enough to honour short ones.
    connectionTimeout: 0,
    keepAliveTimeout: 72_000,
    genReqId: (req) => {
      const header = req.headers['x-request-id']
      return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID()
    },
    ajv: { customOptions: { removeAdditional: false } },
    schemaErrorFormatter: (errors, dataVar) => new Error(formatValidationErrors(errors, dataVar))
  })

  // Query strings need type coercion (strict=true); bodies must not be coerced, or
  // `"arguments": 5` would silently become the string "5".
  const queryAjv = new Ajv({ coerceTypes: 'array', useDefaults: true, removeAdditional: false, allErrors: true, strict: false })
  const bodyAjv = new Ajv({ coerceTypes: false, useDefaults: true, removeAdditional: false, allErrors: true, strict: false })
  addFormats(queryAjv)
  addFormats(bodyAjv)
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : queryAjv).compile(schema))

  // An empty body with a JSON content type is no body; a malformed one 400 GW_MALFORMED_JSON.
  await app.register(jsonBodyPlugin)

  const services = opts.services ?? await createServices(config, app.log, opts.overrides)

  await app.register(routeConfigPlugin)
  await app.register(requestLogPlugin)
  await app.register(errorsPlugin)
  await app.register(docsPlugin)
  await app.register(servicesPlugin, { services })
  // The request's span, before anything that may refuse the request (auth, limits), so refusals are traced too.
  await app.register(tracingPlugin)
  await app.register(overheadPlugin)
  await app.register(bodyTimeoutPlugin, { timeoutMs: config.requestTimeoutMs })
  await app.register(authPlugin, {
    apiKeys: config.apiKeys,
    apiKeysFile: config.apiKeysFile,
    failuresPerMinute: config.authFailuresPerMinute,
    oauth
  })
  // DNS rebinding protection: after auth (which decides the mode), before anything that spends a budget.
  await app.register(hostCheckPlugin, {
    allowedHosts: config.allowedHosts,
    trustProxy: config.trustProxy !== undefined && config.trustProxy !== 'false'
  })
  await app.register(clusterAuthPlugin)
  await app.register(rateLimitPlugin, {
    perMinute: config.rateLimitPerMinute,
    maxConcurrent: config.maxConcurrentPerTenant,
    batchConcurrency: config.batchConcurrency,
    stores: services.limiterStores
  })

  await app.register(metricsPlugin, { requireKey: config.metricsRequireKey })
  // Routes last: the plugins above hook routes as they are added (each route module declares them).
  await app.register(healthRoutes)
  await app.register(whoamiRoutes)
  await app.register(oauthMetadataRoutes, { oauth })
  await app.register(toolsRoutes)
  await app.register(invokeRoutes)
  await app.register(registryRoutes)
  await app.register(pinRoutes)
  await app.register(oauthRoutes)
  await app.register(policyRoutes)
  await app.register(workspaceRoutes)
  await app.register(invocationRoutes)
  await app.register(taskRoutes)
  await app.register(approvalRoutes)
  await app.register(mcpRoutes, opts.mcp ?? {})
  await app.register(clusterRoutes)
  await app.register(consoleRoutes)
  return app
}

/** TRUST_PROXY as Fastify takes it: a hop count, the proxies' addresses, or nobody. */
function trustProxyOf (value: string | undefined): string | false | ((address: string, hop: number) => boolean) {
  if (value === undefined || value === 'false') return false
  if (!/^[0-9]+$/.test(value)) return value
  // The nearest `hops` addresses (the socket's, then X-Forwarded-For from the right) are proxies.
  const hops = Number(value)
  return (_address: string, hop: number) => hop < hops
}
