import { defineFunction } from '../../src/authoring.js'

/** Queries a JSON document with a JSONPath subset, so a model can pick values out of large data. */
export const jsonQuery = defineFunction<{ json: unknown, path: string, limit?: number }>({
  name: 'json_query',
  description: "Select values from a JSON document with a JSONPath expression. Supports $, .key, ['key'], [index] (negative counts from the end), [*], .*, and ..key (recursive). Example: $.orders[*].items[0].sku",
  parameters: {
    type: 'object',
    properties: {
      json: { description: 'The document: any JSON value, or a string holding JSON' },
      path: { type: 'string', minLength: 1, maxLength: 1000, description: 'JSONPath expression starting with $' },
      limit: { type: 'integer', minimum: 1, maximum: 10000, description: 'Maximum number of matches (default 100)' }
    },
    required: ['json', 'path'],
    additionalProperties: false
  },
  handler: ({ json, path, limit = 100 }) => {
    let doc = json
    if (typeof json === 'string') {
      try {
        doc = JSON.parse(json)
      } catch {
        doc = json // a plain string document
      }
    }
    const all = query(doc, path)
    return { path, count: all.length, truncated: all.length > limit, matches: all.slice(0, limit) }
  }
})

type Step = { kind: 'key', key: string } | { kind: 'index', index: number } | { kind: 'wildcard' } | { kind: 'descend', key: string | null }

export function parsePath (path: string): Step[] {
  if (!path.startsWith('$')) throw new Error("A JSONPath starts with '$'")
  const steps: Step[] = []
  let i = 1
  const ident = /[A-Za-z_$][\w$-]*/y
  while (i < path.length) {
    if (path.startsWith('..', i)) {
      i += 2
      if (path[i] === '*') { i++; steps.push({ kind: 'descend', key: null }); continue }
      ident.lastIndex = i
      const m = ident.exec(path)
      if (!m) throw new Error(`Expected a name after '..' at position ${i + 1}`)
      steps.push({ kind: 'descend', key: m[0] })
      i = ident.lastIndex
    } else if (path[i] === '.') {
      i++
      if (path[i] === '*') { i++; steps.push({ kind: 'wildcard' }); continue }
      ident.lastIndex = i
      const m = ident.exec(path)
      if (!m) throw new Error(`Expected a name after '.' at position ${i + 1}`)
      steps.push({ kind: 'key', key: m[0] })
      i = ident.lastIndex
    } else if (path[i] === '[') {
      const end = path.indexOf(']', i)
      if (end < 0) throw new Error(`Unclosed '[' at position ${i + 1}`)
      const inner = path.slice(i + 1, end).trim()
      i = end + 1
      if (inner === '*') steps.push({ kind: 'wildcard' })
      else if (/^-?\d+$/.test(inner)) steps.push({ kind: 'index', index: Number(inner) })
      else if (/^'.*'$|^".*"$/.test(inner)) steps.push({ kind: 'key', key: inner.slice(1, -1) })
      else throw new Error(`Unsupported selector [${inner}]`)
    } else {
      throw new Error(`Unexpected '${path[i] ?? ''}' at position ${i + 1}`)
    }
  }
  return steps
}

function children (value: unknown): unknown[] {
  if (Array.isArray(value)) return value
  if (value !== null && typeof value === 'object') return Object.values(value)
  return []
}

function descendants (value: unknown, out: unknown[]): void {
  for (const child of children(value)) {
    out.push(child)
    descendants(child, out)
  }
}

export function query (doc: unknown, path: string): unknown[] {
  let current: unknown[] = [doc]
  for (const step of parsePath(path)) {
    const next: unknown[] = []
    for (const value of current) {
      switch (step.kind) {
        case 'key':
          if (value !== null && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, step.key)) {
            next.push((value as Record<string, unknown>)[step.key])
          }
          break
        case 'index':
          if (Array.isArray(value)) {
            const idx = step.index < 0 ? value.length + step.index : step.index
            if (idx >= 0 && idx < value.length) next.push(value[idx])
          }
          break
        case 'wildcard':
          next.push(...children(value))
          break
        case 'descend': {
          const all: unknown[] = [value]
          descendants(value, all)
          if (step.key === null) {
            next.push(...all.slice(1))
          } else {
            for (const v of all) {
              if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.hasOwn(v, step.key)) next.push((v as Record<string, unknown>)[step.key])
            }
          }
          break
        }
      }
    }
    current = next
  }
  return current
}
