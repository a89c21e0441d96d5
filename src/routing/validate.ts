import { Ajv2020 } from 'ajv/dist/2020.js'
import { Ajv } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { ErrorObject, ValidateFunction } from 'ajv'
import { linearRegExp } from '../mcp/linear-regexp.js'
import type { JsonSchema } from './types.js'

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv | Ajv2020) => void

/** Options of {@link ArgumentValidator}. */
export interface ArgumentValidatorOptions {
  /** Distinct schemas kept compiled (least recently used dropped first). Default 5000. */
  maxSchemas?: number
}

/**
 * Validates tool arguments against the tool's own JSON Schema before anything runs (docs/ARCHITECTURE.md#result-and-trace).
 * MCP servers publish draft-07 and 2020-12 schemas, so both dialects are supported. A schema
 * Ajv cannot compile is not the caller's fault: the call proceeds and the tool validates.
 *
 * Memory stays bounded: every MCP connect and tool-list refresh brings new schema objects, so
 * compiled validators are shared by schema content, and Ajv (which keeps every schema it ever
 * compiled, even after removeSchema) is replaced once it has compiled 2 x maxSchemas of them.
 */
export class ArgumentValidator {
  readonly #maxSchemas: number
  #draft07!: Ajv
  #draft2020!: Ajv2020
  #compilesOnAjv = 0
  #compiles = 0
  /** Fast path by object identity; entries die with their schema objects. */
  #byObject = new WeakMap<JsonSchema, ValidateFunction | null>()
  /** By content, least recently used first. */
  readonly #byContent = new Map<string, ValidateFunction | null>()

  constructor (options: ArgumentValidatorOptions = {}) {
    this.#maxSchemas = options.maxSchemas ?? 5000
    this.#freshAjv()
  }

  /** `{ ok: true }`, or a message naming each failing field, written for a model to act on. */
  validate (schema: JsonSchema, args: Record<string, unknown>): { ok: true } | { ok: false, message: string } {
    const fn = this.#compile(schema)
    if (fn === null || fn(args)) return { ok: true }
    return { ok: false, message: formatErrors(fn.errors ?? []) }
  }

  /** Compiles so far, schemas cached now, and compiles held by the current Ajv instances. */
  stats (): { compiles: number, cached: number, compilesOnCurrentAjv: number } {
    return { compiles: this.#compiles, cached: this.#byContent.size, compilesOnCurrentAjv: this.#compilesOnAjv }
  }

  #freshAjv (): void {
    // A server's schema and a tenant's arguments: patterns in RE2's linear time (src/mcp/linear-regexp.ts).
    this.#draft07 = new Ajv({ strict: false, allErrors: true, validateFormats: true, code: { regExp: linearRegExp } })
    this.#draft2020 = new Ajv2020({ strict: false, allErrors: true, validateFormats: true, code: { regExp: linearRegExp } })
    addFormats(this.#draft07)
    addFormats(this.#draft2020)
    this.#compilesOnAjv = 0
  }

  #compile (schema: JsonSchema): ValidateFunction | null {
    const known = this.#byObject.get(schema)
    if (known !== undefined) return known
    const key = contentKey(schema)
    if (key === undefined) {
      // Not plain JSON (a cycle, a BigInt): cached by identity only.
      const fn = this.#compileNew(schema)
      this.#byObject.set(schema, fn)
      return fn
    }
    let fn = this.#byContent.get(key)
    if (fn !== undefined) {
      this.#byContent.delete(key)
    } else {
      if (this.#compilesOnAjv >= 2 * this.#maxSchemas) {
        // The old instances are garbage once the validators compiled by them are dropped.
        this.#freshAjv()
        this.#byContent.clear()
        this.#byObject = new WeakMap()
      }
      fn = this.#compileNew(schema)
    }
    this.#byContent.set(key, fn)
    while (this.#byContent.size > this.#maxSchemas) {
      const oldest = this.#byContent.keys().next().value as string
      this.#byContent.delete(oldest)
    }
    this.#byObject.set(schema, fn)
    return fn
  }

  #compileNew (schema: JsonSchema): ValidateFunction | null {
    this.#compiles++
    this.#compilesOnAjv++
    try {
      const dialect = typeof schema.$schema === 'string' && schema.$schema.includes('2020-12') ? this.#draft2020 : this.#draft07
      // $id would register globally in Ajv and clash between servers publishing the same id.
      const { $id: _ignored, ...rest } = schema
      return dialect.compile(rest)
    } catch {
      return null
    }
  }
}

function contentKey (schema: JsonSchema): string | undefined {
  try {
    return JSON.stringify(schema)
  } catch {
    return undefined
  }
}

function formatErrors (errors: ErrorObject[]): string {
  const parts = errors.slice(0, 10).map((e) => {
    const where = e.instancePath === '' ? 'arguments' : `arguments${e.instancePath.replace(/\//g, '.')}`
    if (e.keyword === 'additionalProperties') return `${where} has unknown property '${String(e.params.additionalProperty)}'`
    if (e.keyword === 'required') return `${where} is missing required property '${String(e.params.missingProperty)}'`
    if (e.keyword === 'enum') return `${where} must be one of ${JSON.stringify(e.params.allowedValues)}`
    return `${where} ${e.message ?? 'is invalid'}`
  })
  const more = errors.length > 10 ? ` (and ${errors.length - 10} more)` : ''
  return `Invalid arguments: ${parts.join('; ')}${more}`
}
