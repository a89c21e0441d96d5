// scripts/layers.json, the import rule's one source: read by scripts/check-imports.mjs (which enforces
// it) and rendered here as the table of docs/ARCHITECTURE.md#layers (`npm run docs`; a test fails on drift).
import { existsSync, readFileSync, statSync } from 'node:fs'
import { join } from 'node:path'

export interface LayersFile {
  compositionRoot: { files: string[], job: string, imports: string }
  /** One row per src unit (a folder of src/, or a top-level file without .ts): what it is for, which units it may import. */
  units: Record<string, { imports: string[], job: string }>
  /** Rows of the table for folders outside src/, which the rule sees from the outside. */
  outside: Record<string, { job: string, imports: string }>
}

export function readLayers (root: string): LayersFile {
  return JSON.parse(readFileSync(join(root, 'scripts', 'layers.json'), 'utf8')) as LayersFile
}

const cell = (text: string): string => text.replaceAll('|', '\\|')

/**
 * The Markdown table of the units in layers.json's order. `isFolder(unit)` says whether the unit is
 * `src/<unit>/` (else it is `src/<unit>.ts`).
 */
export function renderLayersTable (layers: LayersFile, isFolder: (unit: string) => boolean): string {
  const rows = Object.entries(layers.units).map(([unit, row]) => {
    const may = row.imports.includes('*') ? 'any domain unit' : row.imports.length === 0 ? 'nothing' : row.imports.join(', ')
    return `| \`src/${unit}${isFolder(unit) ? '/' : '.ts'}\` | ${cell(row.job)} | ${may} |`
  })
  const root = layers.compositionRoot
  rows.push(`| ${root.files.map((f) => `\`${f}\``).join(', ')} | ${cell(root.job)} | ${cell(root.imports)} |`)
  for (const [folder, row] of Object.entries(layers.outside)) rows.push(`| \`${folder}\` | ${cell(row.job)} | ${cell(row.imports)} |`)
  return ['| folder | its job | may import (inside `src/`) |', '|---|---|---|', ...rows].join('\n')
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
