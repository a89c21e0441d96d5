// Writes openapi.yaml from the route schemas: `npm run openapi`. A test fails when the
// committed file drifts from what the routes declare.
import { writeFile } from 'node:fs/promises'
import { renderOpenApiYaml } from '../src/openapi.js'

await writeFile(new URL('../openapi.yaml', import.meta.url), await renderOpenApiYaml())
console.log('openapi.yaml written')
