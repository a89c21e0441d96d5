// Regenerates the generated parts of the repo: the README's configuration and error tables
// and openapi.yaml. `npm run docs`; tests fail when any of them drifts.
import { readFile, writeFile } from 'node:fs/promises'
import { renderConfigTable } from '../src/config.js'
import { renderErrorTable } from '../src/errors.js'
import { renderOpenApiYaml } from '../src/openapi.js'

const readmeUrl = new URL('../README.md', import.meta.url)
const readme = await readFile(readmeUrl, 'utf8')
const updated = readme
  .replace(/<!-- config:start -->[\s\S]*<!-- config:end -->/, `<!-- config:start -->\n${renderConfigTable()}\n<!-- config:end -->`)
  .replace(/<!-- errors:start -->[\s\S]*<!-- errors:end -->/, `<!-- errors:start -->\n${renderErrorTable()}\n<!-- errors:end -->`)
await writeFile(readmeUrl, updated)
await writeFile(new URL('../openapi.yaml', import.meta.url), await renderOpenApiYaml())
console.log('README.md configuration and error tables and openapi.yaml written')
