import { Ajv } from 'ajv'
import { isReservedToolName } from '../naming/builtin-names.js'
import { DiscoveryError, importModule, listModuleFiles } from '../discovery/modules.js'
import { isWireName, parseUserToolName } from '../naming/names.js'
import type { FunctionTool } from './define.js'

export interface LoadedFunction {
  tool: FunctionTool
  /** The module file it came from (for error messages naming both files of a duplicate). */
  file: string
}

function looksLikeFunctionTool (value: unknown): value is FunctionTool {
  if (value === null || typeof value !== 'object') return false
  const v = value as Record<string, unknown>
  return typeof v.name === 'string' && typeof v.handler === 'function' && 'parameters' in v
}

/**
 * Discovers function tools (docs/ARCHITECTURE.md#tiers): every export shaped like a FunctionTool, in every
 * module of `dirs`. All problems are collected, then reported together: a broken module, an
 * invalid definition, or a duplicate name (naming both files) stops start-up.
 */
export async function loadFunctions (dirs: readonly string[]): Promise<LoadedFunction[]> {
  const { files, problems } = await listModuleFiles(dirs)
  const loaded: LoadedFunction[] = []
  const byName = new Map<string, string>()
  const ajv = new Ajv({ strict: false })
  for (const file of files) {
    const imported = await importModule(file)
    if (!imported.ok) {
      problems.push(imported.problem)
      continue
    }
    const exports = Object.values(imported.module).filter(looksLikeFunctionTool)
    for (const tool of exports) {
      const problem = checkDefinition(tool, ajv)
      if (problem) {
        problems.push(`${file}: function '${tool.name}' ${problem}`)
        continue
      }
      const previous = byName.get(tool.name)
      if (previous !== undefined) {
        if (previous === file) continue // the same object exported twice (default and named)
        problems.push(`duplicate function name '${tool.name}' in ${previous} and ${file}`)
        continue
      }
      byName.set(tool.name, file)
      loaded.push({ tool, file })
    }
  }
  if (problems.length > 0) throw new DiscoveryError('Function tools could not be loaded', problems)
  return loaded
}

function checkDefinition (tool: FunctionTool, ajv: Ajv): string | undefined {
  if (!isWireName(tool.name)) return 'has an invalid name (must match ^[a-zA-Z][a-zA-Z0-9_-]{0,63}$)'
  if (isReservedToolName(tool.name)) return 'uses a reserved name (a built-in tool or tool_search)'
  if (parseUserToolName(tool.name)) return 'uses the reserved user_{userId}_tool_ form'
  if (typeof tool.description !== 'string' || tool.description.trim() === '') return 'needs a description'
  const p = tool.parameters
  if (p === null || typeof p !== 'object' || Array.isArray(p) || (p as Record<string, unknown>).type !== 'object') {
    return 'needs parameters: a JSON Schema with type "object"'
  }
  try {
    ajv.compile(p)
  } catch (err) {
    return `has an invalid parameters schema (${(err as Error).message})`
  }
  if (tool.timeoutMs !== undefined && (!Number.isInteger(tool.timeoutMs) || tool.timeoutMs <= 0)) return 'has an invalid timeoutMs'
  return undefined
}
