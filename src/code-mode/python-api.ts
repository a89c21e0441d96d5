/**
 * Code mode's API as Python stubs (SPEC 19): `class tools:` with one `def` per tool, called in a script as
 * `tools.name(**args)` with keyword-only arguments, or `tools.call("exact-name", {...})` for any tool. A def's
 * name is the tool's with every character that is not an identifier's replaced by '_' (the client library
 * maps `get-file` to `get_file`); a tool whose def name is taken (by an earlier tool or by `call`) gets a comment
 * instead. Docstrings escape backslashes and the quotes that could close them; names and string literals are
 * JSON strings (json-string.ts), which are Python string literals too.
 */
import { toolParts } from './api-tool.js'
import type { ApiTool } from './api-tool.js'
import { docLine } from './doc-line.js'
import { jsonString } from './json-string.js'
import type { ApiShape } from './listing-budget.js'
import { fitEntry } from './listing-budget.js'
import { NO_ARGS, readArgs } from './schema-type.js'
import type { Literal, Prop, SchemaType } from './schema-type.js'

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Words that cannot name a parameter or a def (`__debug__` cannot be assigned either). */
const KEYWORDS = new Set([
  'False', 'None', 'True', 'and', 'as', 'assert', 'async', 'await', 'break', 'class', 'continue', 'def', 'del', 'elif',
  'else', 'except', 'finally', 'for', 'from', 'global', 'if', 'import', 'in', 'is', 'lambda', 'nonlocal', 'not', 'or',
  'pass', 'raise', 'return', 'try', 'while', 'with', 'yield', '__debug__'
])

function isPythonName (name: string): boolean {
  return IDENTIFIER.test(name) && !KEYWORDS.has(name)
}

/** A tool's def name: non-identifier characters to '_', and '_' before a leading digit or a keyword. */
function defName (name: string): string {
  const plain = name.replace(/[^A-Za-z0-9_]/gu, '_')
  return plain === '' ? '_' : /^[0-9]/.test(plain) || KEYWORDS.has(plain) ? `_${plain}` : plain
}

/** A name as text in a comment or docstring: bare when it is an identifier, else a JSON string. */
function quotedName (name: string): string {
  return IDENTIFIER.test(name) ? name : jsonString(name)
}

/** A docstring holding `text`: backslashes doubled, and every quote that a quote or the end follows escaped. */
function docstring (text: string): string {
  return `"""${text.replace(/\\/g, '\\\\').replace(/"(?="|$)/g, '\\"')}"""`
}

function pyType (t: SchemaType): string {
  const members = t.kind === 'union' ? t.members : [t]
  const literals: string[] = []
  const others: string[] = []
  for (const m of members) {
    if (m.kind === 'literal' && pyLiteral(m.value) !== undefined) literals.push(pyLiteral(m.value) as string)
    else others.push(m.kind === 'literal' ? literalBase(m.value) : pyPlain(m))
  }
  const parts = [...new Set([...(literals.length > 0 ? [`Literal[${[...new Set(literals)].join(', ')}]`] : []), ...others])]
  return parts.includes('Any') ? 'Any' : parts.join(' | ')
}

/** A value `Literal[...]` may hold (str, int, bool), as Python source; undefined for null and non-integers. */
function pyLiteral (v: Literal): string | undefined {
  if (typeof v === 'string') return jsonString(v)
  if (typeof v === 'boolean') return v ? 'True' : 'False'
  if (typeof v === 'number' && Number.isSafeInteger(v)) return String(v)
  return undefined
}

function literalBase (v: Literal): string {
  return v === null ? 'None' : 'float'
}

function pyPlain (t: Exclude<SchemaType, { kind: 'literal' }>): string {
  switch (t.kind) {
    case 'any': return 'Any'
    case 'string': return 'str'
    case 'integer': return 'int'
    case 'number': return 'float'
    case 'boolean': return 'bool'
    case 'null': return 'None'
    case 'array': return `list[${pyType(t.items)}]`
    case 'object': return 'dict'
    case 'union': return pyType(t)
  }
}

/** The parameters (required first, then optional ones `= None`) and what the docstring adds. */
function pySignature (schema: unknown, detail: number): { params: string, note: string } {
  if (detail === NO_ARGS) return { params: '**args', note: '' }
  const { props, open } = readArgs(schema, detail)
  if (props.length === 0) return { params: open ? '**args' : '', note: '' }
  const ordered = [...props.filter((p) => p.required), ...props.filter((p) => !p.required)]
  const one = (p: Prop, name: string): string => `${name}: ${pyType(p.type)}${p.required ? '' : ' = None'}`
  const rest = ['kwargs', '_kwargs', '__kwargs'].find((k) => !props.some((p) => p.name === k)) as string
  if (ordered.every((p) => isPythonName(p.name))) {
    return { params: `*, ${ordered.map((p) => one(p, p.name)).join(', ')}${open ? `, **${rest}` : ''}`, note: '' }
  }
  const keys = ordered.map((p) => one(p, quotedName(p.name)))
  return { params: '**args', note: `Args: ${keys.join(', ')}${open ? ', ...' : ''}` }
}

/** The API's layout in Python for `tools`. */
export function pythonApiShape (tools: readonly ApiTool[]): ApiShape {
  const taken = new Set(['call'])
  return {
    head: 'from typing import Any, Literal\nclass tools:\n',
    tail: (body) => /^ {2}def /m.test(body) ? '' : '  pass\n',
    entry: (i) => {
      const { name, description, inputSchema } = toolParts(tools[i])
      const def = defName(name)
      const doc = docLine(description)
      if (taken.has(def)) {
        return `  # tools.call(${jsonString(name)}, {...}) only (no def: ${def} is taken)${doc === '' ? '' : `: ${doc}`}\n`
      }
      taken.add(def)
      return fitEntry((detail) => {
        const { params, note } = pySignature(inputSchema, detail)
        const text = [doc, note].filter((s) => s !== '').join(' ')
        return `  def ${def}(${params}) -> Any: ${text === '' ? '...' : docstring(text)}\n`
      })
    },
    footer: (more, names) => `  # ...and ${more} more ${more === 1 ? 'tool' : 'tools'}: ${names} (same calling convention)\n`,
    name: (i) => quotedName(toolParts(tools[i]).name)
  }
}
