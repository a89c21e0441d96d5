// scripts/layers.json, the import rule's one source: read by scripts/check-imports.mjs (which enforces
// it) and rendered here as the table of docs/ARCHITECTURE.md#layers (`npm run docs`; a test fails on drift).
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

export interface LayersFile {
  compositionRoot: { files: string[], job: string, imports: string }
  /** One row per src unit (a folder of src/, or a top-level file without .ts): what it is for, which units it may import. */
  units: Record<string, { imports: string[], job: string, layers?: SubLayer[] }>
  /** Rows of the table for folders outside src/, which the rule sees from the outside. */
  outside: Record<string, { job: string, imports: string }>
}

/** A sub-layer of a unit layered inside (listed bottom first): paths inside `src/<unit>/` (a folder ends in `/`). */
interface SubLayer { paths: string[], job: string }

export function readLayers (root: string): LayersFile {
  return JSON.parse(readFileSync(join(root, 'scripts', 'layers.json'), 'utf8')) as LayersFile
}

const cell = (text: string): string => text.replaceAll('|', '\\|')

/**
 * The Markdown table of the units in layers.json's order. `isFolder(unit)` says whether the unit is
 * `src/<unit>/` (else it is `src/<unit>.ts`).
 */
export function renderLayersTable (layers: LayersFile, isFolder: (unit: string) => boolean): string {
  const rows = Object.entries(layers.units).flatMap(([unit, row]) => {
    const may = row.imports.includes('*') ? 'any domain unit' : row.imports.length === 0 ? 'nothing' : row.imports.join(', ')
    return [`| \`src/${unit}${isFolder(unit) ? '/' : '.ts'}\` | ${cell(row.job)} | ${may} |`, ...subLayerRows(unit, row.layers ?? [])]
  })
  const root = layers.compositionRoot
  rows.push(`| ${root.files.map((f) => `\`${f}\``).join(', ')} | ${cell(root.job)} | ${cell(root.imports)} |`)
  for (const [folder, row] of Object.entries(layers.outside)) rows.push(`| \`${folder}\` | ${cell(row.job)} | ${cell(row.imports)} |`)
  return ['| folder | its job | may import (inside `src/`) |', '|---|---|---|', ...rows].join('\n')
}

/** A unit's sub-layers, bottom first, each allowed the ones before it (inside the unit; outside, the unit's row holds). */
function subLayerRows (unit: string, layers: SubLayer[]): string[] {
  const name = (layer: SubLayer): string => layer.paths.map((p) => `\`${p}\``).join(', ')
  return layers.map((layer, i) => {
    const below = layers.slice(0, i).map(name).join(', ')
    return `| ↳ ${name(layer)} | ${cell(layer.job)} | ${i === 0 ? `nothing in \`${unit}/\`` : below} |`
  })
}

/** The table for the repository at root (a unit is a folder when src/<unit> is a directory). */
export function renderRepoLayersTable (root: string): string {
  return renderLayersTable(readLayers(root), (unit) => {
    const path = join(root, 'src', unit)
    return existsSync(path) && statSync(path).isDirectory()
  })
}

/** Replaces the generated table between the layers markers of ARCHITECTURE.md's text. */
export function withLayersTable (architecture: string, table: string): string {
  const markers = /<!-- layers:start -->[\s\S]*<!-- layers:end -->/
  if (!markers.test(architecture)) throw new Error('docs/ARCHITECTURE.md: the <!-- layers:start --> / <!-- layers:end --> markers are missing')
  return architecture.replace(markers, () => `<!-- layers:start -->\n${table}\n<!-- layers:end -->`)
}
