// Regenerates the generated parts of the repo: the README's configuration and error tables,
// the layers table of docs/ARCHITECTURE.md and openapi.yaml. `npm run docs`; tests fail when any of them drifts.
import { readFile, writeFile } from 'node:fs/promises'
import { fileURLToPath } from 'node:url'
import { renderConfigTable } from '../src/config.js'
import { renderErrorTable } from '../src/errors.js'
import { renderOpenApiYaml } from '../src/openapi.js'
import { renderRepoLayersTable, withLayersTable } from './lib/layers.js'

const readmeUrl = new URL('../README.md', import.meta.url)
const readme = await readFile(readmeUrl, 'utf8')
const updated = readme
  .replace(/<!-- config:start -->[\s\S]*<!-- config:end -->/, `<!-- config:start -->\n${renderConfigTable()}\n<!-- config:end -->`)
  .replace(/<!-- errors:start -->[\s\S]*<!-- errors:end -->/, `<!-- errors:start -->\n${renderErrorTable()}\n<!-- errors:end -->`)
await writeFile(readmeUrl, updated)
const architectureUrl = new URL('../docs/ARCHITECTURE.md', import.meta.url)
const table = renderRepoLayersTable(fileURLToPath(new URL('..', import.meta.url)))
await writeFile(architectureUrl, withLayersTable(await readFile(architectureUrl, 'utf8'), table))
await writeFile(new URL('../openapi.yaml', import.meta.url), await renderOpenApiYaml())
console.log('README.md configuration and error tables, the docs/ARCHITECTURE.md layers table and openapi.yaml written')
