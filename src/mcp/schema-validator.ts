import { Ajv } from 'ajv'
import type { ValidateFunction } from 'ajv'
import { Ajv2019 } from 'ajv/dist/2019.js'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import { linearRegExp } from './linear-regexp.js'
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/types.js'

// ajv-formats is CommonJS with a default export; under NodeNext its default import is the module object.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv

/**
 * The SDK's `Client` validates `structuredContent` against each tool's `outputSchema`, and by
 * default builds a new Ajv instance per client and compiles every output schema again on every
 * listing: about 1 ms of CPU per server connected, most of a first listing's own work.
 *
 * One instance of this class is shared by every MCP client of the gateway. Validators are cached
 * by the schema's JSON text, so the same server listed by many tenants compiles each schema once.
 * Tenants never share anything else: a validator is a pure function of its schema's text.
 *
 * - Schemas without any `$id` compile on one shared Ajv (`addUsedSchema: false`, nothing is
 *   registered by name), and leave its cache (`removeSchema`) when they leave ours.
 * - A schema with an `$id` anywhere would register that id on a shared instance, where another
 *   tenant's schema with the same id would resolve to it (or fail as a duplicate): it gets an Ajv
 *   instance of its own, as the SDK's default does, cached with it.
 * - The cache is bounded (least recently used out first), so tenant schemas cannot grow memory.
 * - Options match the SDK's default validator (formats validated, all errors, not strict), and so
 *   does the dialect: a schema without `$schema` or declaring 2020-12 is read as JSON Schema
 *   2020-12 (MCP's default dialect since 2025-11-25: `prefixItems`, `$defs`, `dependentRequired`),
 *   2019-09 as 2019-09, anything else (draft-07 and older) as draft-07. One shared instance per
 *   dialect.
 */
export class SharedSchemaValidator implements jsonSchemaValidator {
  readonly #max: number
  readonly #cache = new Map<string, CacheEntry>()
  /** One shared instance per dialect, and what each holds before any tenant schema (its meta-schemas). */
  readonly #shared = new Map<Dialect, { ajv: Ajv, base: number }>()
  #compiled = 0

  constructor (maxSchemas = 1000) {
    this.#max = Math.max(1, maxSchemas)
  }

  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const text = JSON.stringify(schema)
    let entry = this.#cache.get(text)
    if (entry !== undefined) {
      // Most recently used last: Map keeps insertion order.
      this.#cache.delete(text)
      this.#cache.set(text, entry)
    } else {
      entry = this.#compile(text)
      this.#cache.set(text, entry)
      if (this.#cache.size > this.#max) this.#evictOldest()
    }
    const { validate, ajv } = entry
    return (input: unknown) => validate(input)
      ? { valid: true, data: input as T, errorMessage: undefined }
      : { valid: false, data: undefined, errorMessage: ajv.errorsText(validate.errors) }
  }

  /**
   * Cached validators, schemas compiled so far (a hit compiles nothing), and schemas the shared Ajv
   * instance holds (read from Ajv's own cache; -1 if a later Ajv names it differently).
   */
  stats (): { cached: number, compiled: number, sharedAjvSchemas: number } {
    let held = 0
    for (const { ajv, base } of this.#shared.values()) {
      const size = ajvCacheSize(ajv)
      if (size < 0) return { cached: this.#cache.size, compiled: this.#compiled, sharedAjvSchemas: -1 }
      held += size - base
    }
    return { cached: this.#cache.size, compiled: this.#compiled, sharedAjvSchemas: held }
  }

  #compile (text: string): CacheEntry {
    // A private copy: the compiled function and Ajv's cache never hold the caller's object.
    const own = JSON.parse(text) as object
    this.#compiled++
    const dialect = dialectOf(own)
    if (text.includes('"$id"')) {
      const ajv = newAjv(dialect, true)
      return { ajv, schema: own, validate: ajv.compile(own), shared: false }
    }
    let held = this.#shared.get(dialect)
    if (held === undefined) {
      const ajv = newAjv(dialect, false)
      held = { ajv, base: Math.max(0, ajvCacheSize(ajv)) }
      this.#shared.set(dialect, held)
    }
    const shared = held.ajv
    try {
      return { ajv: shared, schema: own, validate: shared.compile(own), shared: true }
    } catch (err) {
      // Ajv keeps a schema it failed to compile in its own cache: a tenant listing a broken
      // schema again and again must not grow the shared instance.
      shared.removeSchema(own)
      throw err
    }
  }

  #evictOldest (): void {
    const oldest = this.#cache.keys().next()
    if (oldest.done === true) return
    const entry = this.#cache.get(oldest.value)
    this.#cache.delete(oldest.value)
    if (entry?.shared === true) entry.ajv.removeSchema(entry.schema)
  }
}

interface CacheEntry {
  ajv: Ajv
  /** The object Ajv compiled (its cache key inside the shared instance). */
  schema: object
  validate: ValidateFunction
  shared: boolean
}

function ajvCacheSize (ajv: Ajv): number {
  return (ajv as unknown as { _cache?: Map<unknown, unknown> })._cache?.size ?? -1
}

type Dialect = '2020-12' | '2019-09' | 'draft-07'

/** The JSON Schema dialect a schema declares (`$schema`); none means 2020-12, MCP's default. */
function dialectOf (schema: object): Dialect {
  const declared = (schema as { $schema?: unknown }).$schema
  if (typeof declared !== 'string' || declared.includes('/draft/2020-12/')) return '2020-12'
  if (declared.includes('/draft/2019-09/')) return '2019-09'
  return 'draft-07'
}

function newAjv (dialect: Dialect, addUsedSchema: boolean): Ajv {
  // Patterns in RE2's linear time: the server chose the schema and sends the data (linear-regexp.ts).
  const options = { strict: false, validateFormats: true, validateSchema: false, allErrors: true, addUsedSchema, code: { regExp: linearRegExp } }
  const ajv = dialect === '2020-12' ? new Ajv2020(options) : dialect === '2019-09' ? new Ajv2019(options) : new Ajv(options)
  addFormats(ajv)
  return ajv
}
