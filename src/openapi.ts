import { stringify } from 'yaml'
import { buildApp } from './app.js'
import { loadConfig } from './config.js'

/** The OpenAPI document as YAML, generated from the routes of an app built on defaults. */
export async function renderOpenApiYaml (): Promise<string> {
  const app = await buildApp(loadConfig({ SANDBOX: 'none', LOG_LEVEL: 'silent' }), { logger: false })
  try {
    await app.ready()
    // Shared schema objects written out in full, not as YAML anchors and aliases (`tags: *a1`),
    // which some OpenAPI tools do not follow and readers cannot.
    return stringify(app.swagger(), { strict: false, aliasDuplicateObjects: false })
  } finally {
    await app.close()
  }
}
