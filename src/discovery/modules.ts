import { readdir, stat } from 'node:fs/promises'
import { extname, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'

/** Start-up discovery failed: every problem found, each naming its file(s). */
export class DiscoveryError extends Error {
  readonly problems: string[]
  constructor (what: string, problems: string[]) {
    super(`${what}: ${problems.length} problem(s)\n  - ${problems.join('\n  - ')}`)
    this.name = 'DiscoveryError'
    this.problems = problems
  }
}

const MODULE_EXTENSIONS = new Set(['.js', '.mjs', '.ts', '.mts'])

/**
 * Module files directly inside each directory, sorted so discovery is deterministic.
 * Type declarations and test files are not modules to load.
 */
export async function listModuleFiles (dirs: readonly string[]): Promise<{ files: string[], problems: string[] }> {
  const files: string[] = []
  const problems: string[] = []
  for (const dir of new Set(dirs.map((d) => resolve(d)))) {
    const abs = dir
    let names: string[]
    try {
      if (!(await stat(abs)).isDirectory()) {
        problems.push(`${abs}: not a directory`)
        continue
      }
      names = await readdir(abs)
    } catch (err) {
      problems.push(`${abs}: cannot read directory (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`)
      continue
    }
    for (const name of names.sort()) {
      if (name.endsWith('.d.ts') || /\.test\.[mc]?[jt]s$/.test(name) || name.startsWith('.')) continue
      if (!MODULE_EXTENSIONS.has(extname(name))) continue
      files.push(join(abs, name))
    }
  }
  return { files, problems }
}

/** Imports a module; a syntax error or a throwing top level becomes a problem naming the file. */
export async function importModule (file: string): Promise<{ ok: true, module: Record<string, unknown> } | { ok: false, problem: string }> {
  try {
    const module = await import(pathToFileURL(file).href) as Record<string, unknown>
    return { ok: true, module }
  } catch (err) {
    const message = (err as Error)?.message?.split('\n')[0] ?? String(err)
    return { ok: false, problem: `${file}: failed to load (${message})` }
  }
}
