import { readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/**
 * The nearest package.json named tool-gateway above this file. Walked up to, not a fixed
 * relative path: this module runs from src/ (tsx) and from dist/src/ (the build).
 */
function readPackageVersion (): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  for (;;) {
    try {
      const pkg = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { name?: unknown, version?: unknown }
      if (pkg.name === 'tool-gateway' && typeof pkg.version === 'string') return pkg.version
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
    const parent = dirname(dir)
    if (parent === dir) throw new Error('package.json of tool-gateway not found above ' + fileURLToPath(import.meta.url))
    dir = parent
  }
}

/** The gateway's version (package.json), read once: the MCP client and server info and the OpenAPI document. */
export const VERSION: string = readPackageVersion()
