import { buildApp } from './app.js'
import { loadConfig } from './config.js'

/** The OpenAPI document as YAML, generated from the routes of an app built on defaults. */
export async function renderOpenApiYaml (): Promise<string> {
  const app = await buildApp(loadConfig({ SANDBOX: 'none', LOG_LEVEL: 'silent' }), { logger: false })
  try {
    await app.ready()
    return app.swagger({ yaml: true })
  } finally {
    await app.close()
  }
}
