// Builds the web console (console/src, Preact) into console/dist: index.html and content-hashed
// assets under console/dist/assets, which routes/console.ts serves at /console. Run by `npm ci`
// (the package's prepare script) and `npm run build:console`. esbuild is a devDependency (tsx uses it too).
// Usage: node scripts/build-console.mjs [--out DIR] (DIR defaults to console/dist)
import { build } from 'esbuild'
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { basename, dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..')
const outFlag = process.argv.indexOf('--out')
const dist = outFlag > 0 ? resolve(process.argv[outFlag + 1] ?? '') : join(root, 'console', 'dist')
const assets = join(dist, 'assets')

await rm(dist, { recursive: true, force: true })
await mkdir(assets, { recursive: true })

const result = await build({
  absWorkingDir: root,
  entryPoints: { console: 'console/src/main.tsx' },
  bundle: true,
  format: 'esm',
  target: ['es2022', 'chrome110', 'firefox110', 'safari16'],
  platform: 'browser',
  minify: true,
  sourcemap: false,
  legalComments: 'none',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  outdir: assets,
  entryNames: '[name]-[hash]',
  assetNames: '[name]-[hash]',
  metafile: true,
  logLevel: 'warning'
})

let script
let style
for (const [file, info] of Object.entries(result.metafile.outputs)) {
  if (info.entryPoint === undefined && !file.endsWith('.css')) continue
  if (file.endsWith('.js')) script = basename(file)
  if (file.endsWith('.css')) style = basename(file)
}
if (script === undefined || style === undefined) throw new Error('build-console: esbuild produced no script or no stylesheet')

const template = await readFile(join(root, 'console', 'index.html'), 'utf8')
const html = template
  .replace('<!-- console:style -->', `<link rel="stylesheet" href="/console/assets/${style}">`)
  .replace('<!-- console:script -->', `<script type="module" src="/console/assets/${script}"></script>`)
if (!html.includes(script) || !html.includes(style)) throw new Error('build-console: console/index.html lacks the console:style or console:script marker')
await writeFile(join(dist, 'index.html'), html)
console.log(`console built: ${relative(root, dist)}/index.html, assets/${script}, assets/${style}`)
