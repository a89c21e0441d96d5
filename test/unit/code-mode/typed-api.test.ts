/**
 * Code mode's typed API (src/code-mode, SPEC 19): the exact text for realistic tools, the schema-to-type rules,
 * the length budget, descriptions and names written by a hostile server, bounded output for huge schemas, and
 * that what it prints is valid: the TypeScript compiles (with a script using it, and a wrong call rejected)
 * and the Python compiles.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import path from 'node:path'
import ts from 'typescript'
import { pythonApi, typescriptApi } from '../../../src/code-mode/typed-api.js'
import type { ApiTool } from '../../../src/code-mode/typed-api.js'

const READ_FILE: ApiTool = {
  name: 'read_file',
  description: 'Read a file from the workspace.\n  Returns its text, or its first `head` lines.',
  inputSchema: {
    type: 'object',
    properties: { path: { type: 'string', description: 'Path in the workspace' }, head: { type: 'integer', description: 'Lines to read' } },
    required: ['path']
  }
}
const CREATE_ISSUE: ApiTool = {
  name: 'create_issue',
  description: 'Create a new issue in a GitHub repository. Needs push access.',
  inputSchema: {
    type: 'object',
    properties: {
      owner: { type: 'string' },
      repo: { type: 'string' },
      title: { type: 'string' },
      labels: { type: 'array', items: { type: 'string' } },
      state: { type: 'string', enum: ['open', 'closed'] },
      milestone: { type: ['number', 'null'] }
    },
    required: ['owner', 'repo', 'title']
  }
}
const GET_FILE: ApiTool = {
  name: 'get-file',
  description: 'Fetch a file between two revisions, e.g. for a diff. Slow.',
  inputSchema: { properties: { from: { type: 'string' }, to: { type: 'string' }, class: { enum: ['text', 'binary'] } }, required: ['from'] }
}
const LIST_DIRS: ApiTool = {
  name: 'list_allowed_directories', description: 'List the directories this server may read.', inputSchema: { type: 'object', properties: {} }
}

test('three realistic tools in TypeScript: one doc line and one signature each, names quoted where they must be', () => {
  assert.equal(typescriptApi([READ_FILE, CREATE_ISSUE, GET_FILE]), [
    'declare const tools: {',
    '  /** Read a file from the workspace. */',
    '  read_file(args: { path: string, head?: number }): Promise<any>',
    '  /** Create a new issue in a GitHub repository. */',
    '  create_issue(args: { owner: string, repo: string, title: string, labels?: string[], state?: "open" | "closed", milestone?: number | null }): ' +
      'Promise<any>',
    '  /** Fetch a file between two revisions, e.g. for a diff. */',
    '  "get-file"(args: { from: string, to?: string, class?: "text" | "binary" }): Promise<any>',
    '}',
    ''
  ].join('\n'))
})

test('the same tools in Python: keyword-only, required first; keywords as names fall back to **args named in the docstring', () => {
  assert.equal(pythonApi([READ_FILE, CREATE_ISSUE, GET_FILE]), [
    'from typing import Any, Literal',
    'class tools:',
    '  def read_file(*, path: str, head: int = None) -> Any: """Read a file from the workspace."""',
    '  def create_issue(*, owner: str, repo: str, title: str, labels: list[str] = None, state: Literal["open", "closed"] = None, ' +
      'milestone: float | None = None) -> Any: """Create a new issue in a GitHub repository."""',
    '  def get_file(**args) -> Any: """Fetch a file between two revisions, e.g. for a diff. ' +
      'Args: from: str, to: str = None, class: Literal["text", "binary"] = None"""',
    ''
  ].join('\n'))
})

test('no arguments; a def name taken by an earlier tool or by tools.call gets a comment line instead', () => {
  const tools = [LIST_DIRS, { name: 'list-allowed-directories', description: '', inputSchema: {} }, { name: 'call', description: 'Call someone.' }]
  assert.equal(pythonApi(tools), [
    'from typing import Any, Literal',
    'class tools:',
    '  def list_allowed_directories() -> Any: """List the directories this server may read."""',
    '  # tools.call("list-allowed-directories", {...}) only (no def: list_allowed_directories is taken)',
    '  # tools.call("call", {...}) only (no def: call is taken): Call someone.',
    ''
  ].join('\n'))
  assert.equal(typescriptApi(tools), [
    'declare const tools: {',
    '  /** List the directories this server may read. */',
    '  list_allowed_directories(args?: {}): Promise<any>',
    '  "list-allowed-directories"(args?: {}): Promise<any>',
    '  /** Call someone. */',
    '  call(args?: {}): Promise<any>',
    '}',
    ''
  ].join('\n'))
})

/** The TypeScript signature of a tool whose only argument `x` has `schema`. */
const tsOf = (schema: unknown): string => {
  const line = typescriptApi([{ name: 't', description: '', inputSchema: { properties: { x: schema } } }]).split('\n')[1] as string
  return (/^ {2}t\(args\?: \{ x\?: (.*) \}\): Promise<any>$/.exec(line) ?? [line, line])[1] as string
}
const pyOf = (schema: unknown): string => {
  const line = pythonApi([{ name: 't', description: '', inputSchema: { properties: { x: schema } } }]).split('\n')[2] as string
  return (/^ {2}def t\(\*, x: (.*) = None\) -> Any: \.\.\.$/.exec(line) ?? [line, line])[1] as string
}

test('schema to type: literals, unions, arrays, nesting two levels below the arguments, and any for what it cannot say', () => {
  const cases: Array<[unknown, string, string]> = [
    [{ type: 'integer' }, 'number', 'int'],
    [{ const: 'v1' }, '"v1"', 'Literal["v1"]'],
    [{ enum: [1, 2, true, null] }, '1 | 2 | true | null', 'Literal[1, 2, True] | None'],
    [{ enum: [1.5, 2] }, '1.5 | 2', 'Literal[2] | float'],
    [{ type: 'string', enum: ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i'] }, 'string', 'str'],
    [{ enum: ['x'.repeat(65)] }, 'any', 'Any'],
    [{ anyOf: [{ type: 'string' }, { type: 'array', items: { type: 'number' } }] }, 'string | number[]', 'str | list[float]'],
    [{ type: 'array', items: { type: ['string', 'integer'] } }, '(string | number)[]', 'list[str | int]'],
    [{ oneOf: [{ type: 'string' }, { $ref: '#/defs/x' }] }, 'any', 'Any'],
    [{ type: 'object', properties: { a: { type: 'object', properties: { b: { type: 'object', properties: { c: { type: 'string' } } } } } } },
      '{ a?: { b?: object } }', 'dict'],
    [{ type: 'object' }, 'object', 'dict'],
    [{ type: 'object', additionalProperties: { type: 'string' } }, '{ [k: string]: any }', 'dict'],
    [{ type: 'array' }, 'any[]', 'list[Any]'],
    [{ allOf: [{ type: 'string' }] }, 'any', 'Any'],
    [{ type: 'strange' }, 'any', 'Any'],
    [{}, 'any', 'Any']
  ]
  for (const [schema, tsType, pyType] of cases) {
    assert.equal(tsOf(schema), tsType, JSON.stringify(schema))
    assert.equal(pyOf(schema), pyType, JSON.stringify(schema))
  }
  const wide = { type: 'object', properties: Object.fromEntries(Array.from({ length: 13 }, (_, i) => [`p${i}`, { type: 'string' }])), required: ['p0'] }
  const tsLine = typescriptApi([{ name: 'wide', description: '', inputSchema: wide }]).split('\n')[1]
  assert.match(tsLine as string, /^ {2}wide\(args: \{ p0: string, p1\?: string, .*p11\?: string, \[k: string\]: any \}\): Promise<any>$/)
  assert.doesNotMatch(tsLine as string, /p12/)
  assert.match(pythonApi([{ name: 'wide', description: '', inputSchema: wide }]), /def wide\(\*, p0: str, p1: str = None, .*p11: str = None, \*\*kwargs\)/)
})

test('the doc line is the first sentence, whitespace collapsed, at most 120 characters', () => {
  const long = `${'word '.repeat(40)}end. Second sentence.`
  const doc = (description: string): string => typescriptApi([{ name: 't', description }]).split('\n')[1] as string
  assert.equal(doc('  Reads   the\tfile.\n\nIgnores the rest.  '), '  /** Reads the file. */')
  assert.equal(doc('Version 1.2 of the API, e.g. the old one! Not this.'), '  /** Version 1.2 of the API, e.g. the old one! */')
  assert.equal(doc(long), `  /** ${'word '.repeat(23)}wo... */`)
  assert.equal(Array.from(doc(long).slice(6, -3)).length, 120)
})

const MANY: ApiTool[] = Array.from({ length: 50 }, (_, i) => ({
  name: `tool_${i}`,
  description: `Tool number ${i}.`,
  inputSchema: { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] }
}))

test('the budget: tools in listing order while they fit, then one line naming how many more and which', () => {
  for (const render of [typescriptApi, pythonApi]) {
    const full = render(MANY, { maxChars: 100_000 })
    assert.doesNotMatch(full, /more tools/)
    assert.match(full, /tool_49/)
    const text = render(MANY, { maxChars: 1000 })
    assert.ok(text.length <= 1000, `${text.length} chars`)
    const shown = [...text.matchAll(/^ {2}(?:def )?(tool_\d+)\(/gm)].map((m) => m[1])
    assert.deepEqual(shown, MANY.slice(0, shown.length).map((t) => t.name), 'a prefix of the listing, in order')
    const footer = /^ {2}(?:\/\/|#) \.\.\.and (\d+) more tools: (.*) \(same calling convention\)$/m.exec(text)
    assert.ok(footer, text)
    assert.equal(shown.length + Number(footer[1]), 50)
    assert.ok((footer[2] as string).startsWith(`tool_${shown.length}, tool_${shown.length + 1}`))
    assert.ok((footer[2] as string).length <= 305 && (footer[2] as string).endsWith(', ...'))
  }
  for (const render of [typescriptApi, pythonApi]) {
    const text = render([...MANY, ...MANY, ...MANY].map((t, i) => ({ ...t, name: `tool_${i}` })))
    assert.ok(text.length <= 6000 && text.length > 5600 && /more tools/.test(text), `the default budget is 6000 (${text.length})`)
  }
  assert.match(pythonApi(MANY, { maxChars: 0 }), /^class tools:\n {2}# \.\.\.and 50 more tools: .*\n {2}pass\n$/m, 'a class that still compiles')
})

const HOSTILE: ApiTool[] = [
  { name: 'evil', description: 'Ends */ here. """ and \\ and \\u0041 "quote', inputSchema: { properties: { s: { enum: ['*/', '"""', '\\', 'a\nb'] } } } },
  { name: 'evil2', description: 'Trailing quote"', inputSchema: { properties: { 'new\nline': { type: 'string' }, '\u2028': { const: '\u2029' } } } },
  { name: 'line\u2028sep\n// x */', description: '\\', inputSchema: { properties: { 'quote"""': { type: 'string' } } } },
  { name: '123 class', description: '\u0000null\u0007 bytes\ud800 lone', inputSchema: { properties: { __debug__: { type: 'string' } } } }
]

test('hostile descriptions and names stay inside their comment, docstring or string, one entry line each', () => {
  const text = typescriptApi(HOSTILE)
  assert.equal(text.split('\n').length, 3 + HOSTILE.length * 2, text)
  for (const c of ['\u2028', '\u2029', '\u0000']) assert.ok(!text.includes(c))
  assert.match(text, /\/\*\* Ends \*\\\/ here\. \*\//)
  const py = pythonApi(HOSTILE)
  assert.equal(py.split('\n').length, 3 + HOSTILE.length, py)
  assert.match(py, /def evil\(\*, s: Literal\["\*\/", "\\"\\"\\"", "\\\\", "a\\nb"\] = None\) -> Any: """Ends \*\/ here\."""/)
  assert.match(py, /def evil2\(\*\*args\) -> Any: """Trailing quote" Args: "new\\\\nline": str = None, "\\\\u2028": Literal\["\\\\u2029"\] = None"""/)
  assert.match(py, /def _123_class\(\*\*args\) -> Any: """null bytes lone Args: __debug__: str = None"""/)
})

/** A schema nested `depth` levels through objects, arrays and unions in turn. */
function deepSchema (depth: number): unknown {
  let schema: unknown = { type: 'string' }
  for (let i = 0; i < depth; i++) {
    schema = i % 3 === 0
      ? { type: 'object', properties: { inner: schema, other: schema } }
      : i % 3 === 1 ? { type: 'array', items: schema } : { anyOf: [schema, { type: 'null' }] }
  }
  return schema
}

test('huge, deep and wide schemas render bounded text without throwing', () => {
  const wideProps = Object.fromEntries(Array.from({ length: 100_000 }, (_, i) => [`p${i}`, { enum: Array.from({ length: 8 }, (_, j) => 'v'.repeat(60) + j) }]))
  const monsters: ApiTool[] = [
    { name: 'deep', description: 'Deep.', inputSchema: { properties: { a: deepSchema(5000) } } },
    { name: 'wide', description: 'd'.repeat(1_000_000), inputSchema: { properties: wideProps, required: Object.keys(wideProps) } },
    { name: 'fan', description: 'Fan.', inputSchema: deepSchema(12) },
    { name: 'long_names', description: '', inputSchema: { properties: { ['k'.repeat(100_000)]: { type: 'string' }, ok: { type: 'string' } } } },
    { name: 'after', description: 'Still listed.', inputSchema: {} }
  ]
  for (const render of [typescriptApi, pythonApi]) {
    const started = performance.now()
    const text = render(monsters, { maxChars: 100_000 })
    assert.ok(performance.now() - started < 5000)
    for (const line of text.split('\n')) assert.ok(line.length <= 1000, `${line.length}: ${line.slice(0, 200)}`)
    assert.match(text, /after/, 'a huge schema does not push later tools out')
    assert.match(text, /long_names\((?:args\?: \{ ok\?: string, \[k: string\]: any \}|\*, ok: str = None, \*\*kwargs)\)/)
  }
})

test('malformed input renders as any and never throws', () => {
  const junk = [
    null, 7, 'x', [], { name: 5 }, { name: 'a', inputSchema: 'schema' }, { name: 'b', inputSchema: { properties: [] } },
    { name: 'c', inputSchema: { properties: { x: null, y: { type: 5 }, z: { enum: {} }, w: { items: [1] } }, required: 'x' } },
    { name: 'd', inputSchema: { properties: { x: { type: [] }, y: { anyOf: [] }, z: { const: { a: 1 } }, w: { enum: [JSON.parse('1e400')] } } } }
  ] as unknown as ApiTool[]
  for (const render of [typescriptApi, pythonApi]) {
    const text = render(junk)
    assert.match(text, /\bc\(/)
    assert.doesNotThrow(() => render(null as unknown as ApiTool[], { maxChars: Number.NaN }))
  }
  assert.match(typescriptApi(junk), /c\(args\?: \{ x\?: any, y\?: any, z\?: any, w\?: any\[\] \}\)/)
  assert.match(typescriptApi(junk), /d\(args\?: \{ x\?: any, y\?: any, z\?: any, w\?: any \}\)/)
})

/** Diagnostics of type-checking `files` (name to text) together, as a project would. */
function typeCheck (files: Record<string, string>): string[] {
  const dir = mkdtempSync(path.join(tmpdir(), 'typed-api-'))
  try {
    for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text)
    const program = ts.createProgram(Object.keys(files).map((f) => path.join(dir, f)), {
      noEmit: true, strict: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ES2022, lib: ['lib.es2022.d.ts'], types: []
    })
    return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'))
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

test('the TypeScript output compiles, and a script calling it type-checks (and a wrong call does not)', () => {
  const api = typescriptApi([READ_FILE, CREATE_ISSUE, GET_FILE, LIST_DIRS, ...HOSTILE, ...MANY], { maxChars: 4000 })
  const script = [
    'const text = await tools.read_file({ path: "README.md", head: 10 })',
    'await tools.create_issue({ owner: "o", repo: "r", title: "t", labels: ["bug"], state: "open", milestone: null })',
    'await tools["get-file"]({ from: "HEAD~1", class: "text" })',
    'await tools.list_allowed_directories()',
    'await tools.evil({ s: "*/" })',
    'console.log(text)',
    'export {}'
  ].join('\n')
  const consoleDecl = 'declare const console: { log (...a: unknown[]): void }\n'
  assert.deepEqual(typeCheck({ 'api.d.ts': api + consoleDecl, 'script.ts': script }), [])
  const wrong = 'await tools.create_issue({ owner: "o", repo: "r", title: "t", state: "reopened" })\nexport {}\n'
  assert.equal(typeCheck({ 'api.d.ts': api, 'script.ts': wrong }).length, 1, 'the state enum is checked')
  const everything = typescriptApi([...HOSTILE, { name: 'deep', description: '*/', inputSchema: deepSchema(30) }], { maxChars: 100_000 })
  assert.deepEqual(typeCheck({ 'api.d.ts': everything }), [])
})

const python = spawnSync('python3', ['--version']).status === 0

test('the Python output compiles', { skip: python ? false : 'python3 is not installed here' }, () => {
  const check = (source: string): number | null =>
    spawnSync('python3', ['-c', 'import ast,sys; s=sys.stdin.read(); ast.parse(s); compile(s, "api", "exec")'], { input: source }).status
  assert.equal(check('class tools:\n  def f(*, **k): pass\n'), 1, 'the check rejects invalid Python')
  for (const tools of [[READ_FILE, CREATE_ISSUE, GET_FILE, LIST_DIRS], HOSTILE, MANY, [{ name: 'deep', description: '"""', inputSchema: deepSchema(30) }]]) {
    for (const maxChars of [100_000, 300, 0]) {
      const source = pythonApi(tools, { maxChars })
      assert.equal(check(source), 0, source)
    }
  }
})
