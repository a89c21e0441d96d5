import { createHash } from 'node:crypto'
import type { JsonSchema, ToolSpec } from '../routing/types.js'

/**
 * What a pin covers of a tool (SPEC 18): everything a model reads of it and everything its calls
 * are shaped by. `execution` is left out: it says how the gateway runs the tool, not what the model sees.
 */
export interface Definition {
  name: string
  title?: string
  description: string
  inputSchema: JsonSchema
  outputSchema?: JsonSchema
  annotations?: Record<string, unknown>
}

/** A definition's digest (`sha256:<hex>` of its canonical JSON) and that JSON. */
export interface Digested {
  digest: string
  /** Canonical JSON (keys sorted at every level): what the digest is of, and what a pin keeps. */
  json: string
}

const DEFINITION_FIELDS = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations'] as const

/** Digests per spec object: sources keep their entries (and specs) while a server's tools are unchanged. */
const digests = new WeakMap<ToolSpec, Digested>()

export function definitionOf (spec: ToolSpec): Definition {
  const out: Definition = { name: spec.name, description: spec.description, inputSchema: spec.inputSchema }
  if (spec.title !== undefined) out.title = spec.title
  if (spec.outputSchema !== undefined) out.outputSchema = spec.outputSchema
  if (spec.annotations !== undefined) out.annotations = spec.annotations
  return out
}

/**
 * JSON with every object's keys in code-unit order, at every depth: the same definition gives the
 * same text whatever order a server sends its keys in. JSON.stringify walks the value (no recursion
 * of ours to overflow); the copies have no prototype, so a key `__proto__` is an ordinary key.
 */
export function canonicalJson (value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => {
    if (v === null || typeof v !== 'object' || Array.isArray(v)) return v
    const sorted = Object.create(null) as Record<string, unknown>
    for (const key of Object.keys(v).sort()) sorted[key] = (v as Record<string, unknown>)[key]
    return sorted
  })
}

/** The spec's definition digest, computed once per spec object. */
export function digestOf (spec: ToolSpec): Digested {
  let known = digests.get(spec)
  if (known === undefined) {
    const json = canonicalJson(definitionOf(spec))
    known = { digest: `sha256:${createHash('sha256').update(json).digest('hex')}`, json }
    digests.set(spec, known)
  }
  return known
}

/** The top-level fields in which two definitions differ, in DEFINITION_FIELDS order. */
export function changedFields (before: Definition, after: Definition): string[] {
  return DEFINITION_FIELDS.filter((field) => canonicalJson(before[field] ?? null) !== canonicalJson(after[field] ?? null))
}
