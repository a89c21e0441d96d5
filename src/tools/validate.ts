import { Ajv2020 } from 'ajv/dist/2020.js'
import { Ajv } from 'ajv'
import addFormatsModule from 'ajv-formats'
import type { ErrorObject, ValidateFunction } from 'ajv'
import type { JsonSchema } from './types.js'

// ajv-formats is CommonJS; under NodeNext its default export arrives wrapped.
const addFormats = addFormatsModule as unknown as (ajv: Ajv | Ajv2020) => void

/**
 * Validates tool arguments against the tool's own JSON Schema before anything runs (SPEC 3).
 * MCP servers publish draft-07 and 2020-12 schemas, so both dialects are supported. A schema
 * Ajv cannot compile is not the caller's fault: the call proceeds and the tool validates.
 */
export class ArgumentValidator {
  readonly #draft07 = new Ajv({ strict: false, allErrors: true, validateFormats: true })
  readonly #draft2020 = new Ajv2020({ strict: false, allErrors: true, validateFormats: true })
  readonly #cache = new WeakMap<JsonSchema, ValidateFunction | null>()

  constructor () {
    addFormats(this.#draft07)
    addFormats(this.#draft2020)
  }

  /** `{ ok: true }`, or a message naming each failing field, written for a model to act on. */
  validate (schema: JsonSchema, args: Record<string, unknown>): { ok: true } | { ok: false, message: string } {
    const fn = this.#compile(schema)
    if (fn === null || fn(args)) return { ok: true }
    return { ok: false, message: formatErrors(fn.errors ?? []) }
  }

  #compile (schema: JsonSchema): ValidateFunction | null {
    const cached = this.#cache.get(schema)
    if (cached !== undefined) return cached
    let fn: ValidateFunction | null
    try {
      const dialect = typeof schema.$schema === 'string' && schema.$schema.includes('2020-12') ? this.#draft2020 : this.#draft07
      // $id would register globally in Ajv and clash between servers publishing the same id.
      const { $id: _ignored, ...rest } = schema
      fn = dialect.compile(rest)
    } catch {
      fn = null
    }
    this.#cache.set(schema, fn)
    return fn
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
