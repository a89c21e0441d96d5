import type { ErrorObject } from 'ajv'

/**
 * Request validation messages that name the field: `body/arguments must be an object or a
 * JSON string`, `body has unknown property 'extra'`. Clients fix requests from these.
 */
export function formatValidationErrors (errors: readonly ErrorObject[], dataVar: string): string {
  const first = errors[0]
  if (!first) return `${dataVar} is invalid`
  const where = (e: ErrorObject): string => `${dataVar}${e.instancePath}`
  const anyOf = errors.find((e) => e.keyword === 'anyOf')
  if (anyOf) {
    const types = errors
      .filter((e) => e.keyword === 'type' && e.instancePath === anyOf.instancePath)
      .map((e) => String(e.params.type))
    if (types.length > 0) return `${where(anyOf)} must be ${types.map((t) => (t === 'object' ? 'an object' : t === 'string' ? 'a JSON string' : `a ${t}`)).join(' or ')}`
  }
  switch (first.keyword) {
    case 'additionalProperties':
      return `${where(first)} has unknown property '${String(first.params.additionalProperty)}'`
    case 'required':
      return `${where(first)} must have property '${String(first.params.missingProperty)}'`
    case 'enum':
      return `${where(first)} must be one of ${(first.params.allowedValues as unknown[]).map(String).join(', ')}`
    default:
      return `${where(first)} ${first.message ?? 'is invalid'}`
  }
}
