import { randomUUID } from 'node:crypto'
import Fastify from 'fastify'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { Ajv } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { Config } from './config.js'
import { formatValidationErrors } from './schemas/error-format.js'
import { createServices } from './services.js'
import type { ServiceOverrides, Services } from './services.js'
import callerPlugin from '../plugins/caller.js'
import docsPlugin from '../plugins/docs.js'
import errorsPlugin from '../plugins/errors.js'
import gatewayPlugin from '../plugins/gateway.js'
import overheadPlugin from '../plugins/overhead.js'
import healthRoutes from '../routes/health.js'
import invokeRoutes from '../routes/invoke.js'
import toolsRoutes from '../routes/tools.js'

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => void

export interface BuildOptions {
  /** Fastify logger option; tests pass false. */
  logger?: FastifyServerOptions['logger']
  /** Prebuilt services (tests), or overrides for the ones built from the config. */
  services?: Services
  overrides?: ServiceOverrides
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

/**
 * Builds the gateway app (not listening). Plugins and routes are registered explicitly, in
 * dependency order, so the wiring reads top to bottom.
 */
export async function buildApp (config: Config, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    logger: opts.logger ?? {
      level: config.logLevel,
      redact: { paths: ['req.headers.authorization', 'req.headers["x-api-key"]', 'headers.authorization', '*.headers.authorization', '*.secretsKey', '*.apiKeys'], censor: '[redacted]' }
    },
    bodyLimit: config.bodyLimitBytes,
    // Slow or stalled uploads (slowloris) are cut off instead of holding a socket forever.
    requestTimeout: 60_000,
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

  const services = opts.services ?? await createServices(config, app.log, opts.overrides)

  await app.register(errorsPlugin)
  await app.register(docsPlugin)
  await app.register(gatewayPlugin, { services })
  await app.register(callerPlugin)
  await app.register(overheadPlugin)

  await app.register(healthRoutes)
  await app.register(toolsRoutes)
  await app.register(invokeRoutes)
  return app
}
