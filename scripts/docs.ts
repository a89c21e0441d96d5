// Regenerates the generated parts of the repo: the README's configuration table and
// openapi.yaml. `npm run docs`; tests fail when either drifts.
import { readFile, writeFile } from 'node:fs/promises'
import { renderConfigTable } from '../src/config.js'
import { renderOpenApiYaml } from '../src/openapi.js'

const readmeUrl = new URL('../README.md', import.meta.url)
const readme = await readFile(readmeUrl, 'utf8')
const updated = readme.replace(/<!-- config:start -->[\s\S]*<!-- config:end -->/, `<!-- config:start -->\n${renderConfigTable()}\n<!-- config:end -->`)
await writeFile(readmeUrl, updated)
await writeFile(new URL('../openapi.yaml', import.meta.url), await renderOpenApiYaml())
console.log('README.md configuration table and openapi.yaml written')
