// The import rules of docs/ARCHITECTURE.md, checked on the source text (type-only imports count:
// they are edges a reader follows too). Run by `npm run lint`; exits 1 on a violation.
//  1. No import cycle between modules of src/, plugins/ and routes/.
//  2. The domain (src/ except the composition root) never imports Fastify, routes/ or plugins/.
//  3. Each src/ folder imports only the folders its row in scripts/layers.json allows, and every
//     allowance is used (a row allowing more than the code imports hides which edges exist).
//  4. scripts/ and bench/ never import from test/ (test fixtures excepted for bench).
//  5. A folder of src/ with an index.ts is entered through it: modules outside that folder
//     import its index.ts, never its inner files (tests may reach inside).
//  6. A unit whose row has `layers` (sub-layers, listed bottom first) is layered inside too: a file
//     imports only files of its own sub-layer or of lower ones; every file of the unit is in one
//     sub-layer and every sub-layer has files.
// Usage: node scripts/check-imports.mjs [root] [--graph] (root defaults to the working directory;
// --graph prints which src unit imports which).
import { readFileSync, readdirSync, existsSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'

const root = resolve(process.argv.slice(2).find((a) => !a.startsWith('--')) ?? '.')

const LAYERS_FILE = JSON.parse(readFileSync(join(root, 'scripts/layers.json'), 'utf8'))
/** The composition root: the only src files that may import Fastify, plugins/ and routes/. */
const COMPOSITION_ROOT = new Set(LAYERS_FILE.compositionRoot?.files ?? [])
const FASTIFY = /^(fastify|fastify-plugin|@fastify\/.*)$/

/**
 * Which src units (first path segment under src/; a top-level file is its own unit) each unit may
 * import. Anything not listed may import nothing else in src/.
 */
const LAYERS = Object.fromEntries(Object.entries(LAYERS_FILE.units ?? {}).map(([unit, row]) => [unit, row.imports]))

/** The sub-layers of the units that have them, bottom first: each a list of paths inside src/<unit>/ (a folder ends in /). */
const SUB_LAYERS = Object.fromEntries(Object.entries(LAYERS_FILE.units ?? {})
  .filter(([, row]) => Array.isArray(row.layers))
  .map(([unit, row]) => [unit, row.layers.map((layer) => layer.paths)]))

function files (dir) {
  const out = []
  if (!existsSync(dir)) return out
  for (const name of readdirSync(dir)) {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) out.push(...files(full))
    else if (/\.(ts|mts|js|mjs)$/.test(name) && !name.endsWith('.d.ts')) out.push(full)
  }
  return out
}

const IMPORT_SPEC = /(?:^|[\s;])(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|(?:^|[\s;(])import\s*\(?\s*['"]([^'"]+)['"]/gm

function importsOf (file) {
  const text = readFileSync(file, 'utf8').replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '')
  const specs = []
  for (const m of text.matchAll(IMPORT_SPEC)) specs.push(m[1] ?? m[2])
  return specs
}

function resolveLocal (from, spec) {
  const base = resolve(dirname(from), spec)
  for (const candidate of [base, base.replace(/\.js$/, '.ts'), base.replace(/\.mjs$/, '.mts'), `${base}.ts`, join(base, 'index.ts')]) {
    if (existsSync(candidate) && statSync(candidate).isFile()) return candidate
  }
  return null
}

const rel = (f) => relative(root, f).split(sep).join('/')
const unitOf = (r) => {
  const parts = r.split('/')
  if (parts[0] !== 'src') return parts[0]
  return parts.length === 2 ? parts[1].replace(/\.ts$/, '') : parts[1]
}

/** The sub-layer of a src file in a layered unit: its index (0 = bottom) and name, or null when its unit has none. */
function subLayerOf (r) {
  const unit = unitOf(r)
  const layers = SUB_LAYERS[unit]
  if (!layers || !r.startsWith(`src/${unit}/`)) return null
  const inner = r.slice(`src/${unit}/`.length)
  const index = layers.findIndex((paths) => paths.some((p) => p.endsWith('/') ? inner.startsWith(p) : inner === p))
  return { unit, index, name: index < 0 ? null : `${unit}/${layers[index].join('+')}` }
}

/**
 * The public entry `from` must use to reach `to`: the index.ts of the outermost folder that holds
 * `to` but not `from`, if that folder has one (and `to` is not that index itself).
 */
function barrelOf (from, to) {
  if (!to.startsWith('src/')) return null
  const parts = to.split('/')
  for (let i = 2; i < parts.length; i++) {
    const dir = parts.slice(0, i).join('/')
    if (from.startsWith(`${dir}/`)) continue
    const index = `${dir}/index.ts`
    return index !== to && existsSync(join(root, index)) ? index : null
  }
  return null
}

const problems = []
const graph = new Map()
/** Sub-layers that have files, as `unit/index`. */
const subLayersSeen = new Set()
/** The src units that have files (outside the composition root), and the unit edges their imports use. */
const unitsSeen = new Set()
const unitEdges = new Map()
const scanned = ['src', 'plugins', 'routes', 'scripts', 'bench'].flatMap((d) => files(join(root, d)))
for (const file of scanned) {
  const from = rel(file)
  const edges = []
  if (from.startsWith('src/') && !COMPOSITION_ROOT.has(from)) unitsSeen.add(unitOf(from))
  const fromLayer = subLayerOf(from)
  if (fromLayer && fromLayer.index < 0) problems.push(`${from}: in no sub-layer of '${fromLayer.unit}' in scripts/layers.json; add it to one`)
  else if (fromLayer) subLayersSeen.add(`${fromLayer.unit}/${fromLayer.index}`)
  for (const spec of importsOf(file)) {
    if (!spec.startsWith('.')) {
      if (from.startsWith('src/') && !COMPOSITION_ROOT.has(from) && FASTIFY.test(spec)) {
        problems.push(`${from}: the domain imports '${spec}' (only the composition root, plugins/ and routes/ may)`)
      }
      continue
    }
    const target = resolveLocal(file, spec)
    if (!target) continue
    const to = rel(target)
    edges.push(to)
    if (from.startsWith('src/') && !COMPOSITION_ROOT.has(from) && /^(plugins|routes)\//.test(to)) {
      problems.push(`${from}: the domain imports ${to}`)
    }
    if (/^(scripts|bench)\//.test(from) && to.startsWith('test/') && !(from.startsWith('bench/') && to.startsWith('test/fixtures/'))) {
      problems.push(`${from}: imports ${to} (scripts and bench must not depend on the tests)`)
    }
    const entry = barrelOf(from, to)
    if (from.startsWith('src/') && entry) {
      problems.push(`${from}: imports ${to} from outside its folder; import ${entry} (the folder's public entry)`)
    }
    if (from.startsWith('src/') && to.startsWith('src/') && !COMPOSITION_ROOT.has(from)) {
      const a = unitOf(from)
      const b = unitOf(to)
      const toLayer = subLayerOf(to)
      if (a === b && fromLayer && toLayer && fromLayer.index >= 0 && toLayer.index > fromLayer.index) {
        problems.push(`${from}: the sub-layer '${fromLayer.name}' may not import '${toLayer.name}' (${to}), a higher one; scripts/layers.json lists them bottom first`)
      }
      if (a !== b) {
        if (!unitEdges.has(a)) unitEdges.set(a, new Set())
        unitEdges.get(a).add(b)
        const allowed = LAYERS[a]
        if (!allowed) problems.push(`${from}: src unit '${a}' has no row in scripts/layers.json`)
        else if (!allowed.includes(b) && !allowed.includes('*')) problems.push(`${from}: '${a}' may not import '${b}' (${to}); scripts/layers.json lists what it may`)
      }
    }
  }
  graph.set(from, edges)
}

// Rows and allowances nothing uses: the rule is as tight as the code (docs/ARCHITECTURE.md#layers).
for (const [unit, allowed] of Object.entries(LAYERS)) {
  if (!unitsSeen.has(unit)) {
    problems.push(`scripts/layers.json: the row '${unit}' names no src unit (no file in src/${unit}/ or src/${unit}.ts); remove it`)
    continue
  }
  for (const b of allowed) {
    if (b !== '*' && !unitEdges.get(unit)?.has(b)) problems.push(`scripts/layers.json: '${unit}' may import '${b}' but none of its files does; remove the allowance`)
  }
}

for (const [unit, layers] of Object.entries(SUB_LAYERS)) {
  layers.forEach((paths, i) => {
    if (!subLayersSeen.has(`${unit}/${i}`)) problems.push(`scripts/layers.json: the sub-layer '${unit}/${paths.join('+')}' has no file; remove it`)
  })
}

// Cycles: Tarjan's strongly connected components over the module graph.
let index = 0
const stack = []
const meta = new Map()
const cycles = []
function strongConnect (v) {
  meta.set(v, { index, low: index, onStack: true })
  index++
  stack.push(v)
  for (const w of graph.get(v) ?? []) {
    if (!graph.has(w)) continue
    if (!meta.has(w)) {
      strongConnect(w)
      meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).low)
    } else if (meta.get(w).onStack) {
      meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).index)
    }
  }
  if (meta.get(v).low === meta.get(v).index) {
    const component = []
    let w
    do {
      w = stack.pop()
      meta.get(w).onStack = false
      component.push(w)
    } while (w !== v)
    if (component.length > 1 || (graph.get(v) ?? []).includes(v)) cycles.push(component.sort())
  }
}
for (const v of graph.keys()) if (!meta.has(v)) strongConnect(v)
for (const c of cycles) problems.push(`import cycle: ${c.join(' <-> ')}`)

if (process.argv.includes('--graph')) {
  const units = new Map()
  for (const [from, edges] of graph) {
    if (!from.startsWith('src/')) continue
    for (const to of edges) {
      if (!to.startsWith('src/')) continue
      const a = unitOf(from); const b = unitOf(to)
      if (a === b) continue
      if (!units.has(a)) units.set(a, new Set())
      units.get(a).add(b)
    }
  }
  for (const [a, bs] of [...units].sort()) console.log(`${a}: ${[...bs].sort().join(', ')}`)
}

if (problems.length > 0) {
  for (const p of new Set(problems)) console.error(`check-imports: ${p}`)
  process.exit(1)
}
console.log(`check-imports: ${graph.size} modules, no cycle, layers and sub-layers respected, every allowance used`)
