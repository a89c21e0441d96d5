/**
 * Code mode's API as TypeScript declarations (SPEC 19): `declare const tools: { ... }` with one method per
 * tool, called in a script as `await tools.name(args)` (or `tools["name-x"](args)`). Names and literals are
 * printed as JSON strings (json-string.ts), so no text from a tool server can end a string or a `//` comment;
 * the one-line doc comment has its closing sequence broken up.
 */
import type { ApiShape } from './listing-budget.js'
import { fitEntry } from './listing-budget.js'
import { NO_ARGS, readArgs } from './schema-type.js'
import type { Literal, Prop, SchemaType } from './schema-type.js'
import { toolParts } from './api-tool.js'
import { docLine } from './doc-line.js'
import { jsonString } from './json-string.js'
import type { ApiTool } from './api-tool.js'

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/

/** A member or property name: bare when it is an identifier, else quoted. */
function tsKey (name: string): string {
  return IDENTIFIER.test(name) ? name : jsonString(name)
}

function tsLiteral (v: Literal): string {
  return typeof v === 'string' ? jsonString(v) : String(v)
}

function tsType (t: SchemaType): string {
  switch (t.kind) {
    case 'any': case 'string': case 'boolean': case 'null': return t.kind
    case 'number': case 'integer': return 'number'
    case 'literal': return tsLiteral(t.value)
    case 'array': {
      const items = tsType(t.items)
      return t.items.kind === 'union' && items.includes(' | ') ? `(${items})[]` : `${items}[]`
    }
    case 'object':
      if (t.props === null || (t.props.length === 0 && !t.open)) return 'object'
      return tsObject(t.props, t.open)
    case 'union': {
      const members = [...new Set(t.members.map(tsType))]
      return members.includes('any') ? 'any' : members.join(' | ')
    }
  }
}

function tsObject (props: readonly Prop[], open: boolean): string {
  const members = props.map((p) => `${tsKey(p.name)}${p.required ? '' : '?'}: ${tsType(p.type)}`)
  if (open) members.push('[k: string]: any')
  return `{ ${members.join(', ')} }`
}

function tsParameter (schema: unknown, detail: number): string {
  if (detail === NO_ARGS) return 'args?: any'
  const { props, open } = readArgs(schema, detail)
  if (props.length === 0 && !open) return 'args?: {}'
  return `args${props.some((p) => p.required) ? '' : '?'}: ${tsObject(props, open)}`
}

/** The API's layout in TypeScript for `tools`; a name listed twice is declared once (the first). */
export function typescriptApiShape (tools: readonly ApiTool[]): ApiShape {
  const declared = new Set<string>()
  return {
    head: 'declare const tools: {\n',
    tail: () => '}\n',
    entry: (i) => {
      const { name, description, inputSchema } = toolParts(tools[i])
      if (declared.has(name)) return ''
      declared.add(name)
      const doc = docLine(description).replaceAll('*/', '*\\/')
      const docLines = doc === '' ? '' : `  /** ${doc} */\n`
      return fitEntry((detail) => `${docLines}  ${tsKey(name)}(${tsParameter(inputSchema, detail)}): Promise<any>\n`)
    },
    footer: (more, names) => `  // ...and ${more} more ${more === 1 ? 'tool' : 'tools'}: ${names} (same calling convention)\n`,
    name: (i) => tsKey(toolParts(tools[i]).name)
  }
}
