import { defineFunction } from '../../src/authoring.js'

/**
 * A safe arithmetic evaluator: a small recursive-descent parser, never eval. Models are poor
 * at arithmetic; this gives them exact results.
 */
export const calculate = defineFunction<{ expression: string }>({
  name: 'calculate',
  description: 'Evaluate an arithmetic expression exactly. Supports + - * / % ^, parentheses, unary minus, the constants pi and e, and the functions sqrt, abs, round, floor, ceil, ln, log10, log2, exp, sin, cos, tan, min, max.',
  parameters: {
    type: 'object',
    properties: {
      expression: { type: 'string', minLength: 1, maxLength: 1000, description: 'For example: (2 + 3) * sqrt(16) / 4' }
    },
    required: ['expression'],
    additionalProperties: false
  },
  handler: ({ expression }) => {
    const value = evaluate(expression)
    if (!Number.isFinite(value)) throw new Error(`The result is not a finite number (${String(value)})`)
    return { expression, result: value }
  }
})

const FUNCTIONS: Record<string, (...args: number[]) => number> = {
  sqrt: Math.sqrt,
  abs: Math.abs,
  round: Math.round,
  floor: Math.floor,
  ceil: Math.ceil,
  ln: Math.log,
  log10: Math.log10,
  log2: Math.log2,
  exp: Math.exp,
  sin: Math.sin,
  cos: Math.cos,
  tan: Math.tan,
  min: Math.min,
  max: Math.max
}
const CONSTANTS: Record<string, number> = { pi: Math.PI, e: Math.E }

type Token = { kind: 'num', value: number } | { kind: 'id', value: string } | { kind: 'op', value: string }

function tokenize (text: string): Token[] {
  const tokens: Token[] = []
  const re = /\s*(?:(\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(\*\*|[-+*/%^(),]))/y
  let pos = 0
  while (pos < text.length) {
    if (/^\s*$/.test(text.slice(pos))) break
    re.lastIndex = pos
    const m = re.exec(text)
    if (!m) throw new Error(`Unexpected character '${text.slice(pos).trim()[0] ?? ''}' at position ${pos + 1}`)
    pos = re.lastIndex
    if (m[1] !== undefined) tokens.push({ kind: 'num', value: Number(m[1]) })
    else if (m[2] !== undefined) tokens.push({ kind: 'id', value: m[2].toLowerCase() })
    else tokens.push({ kind: 'op', value: m[3] === '**' ? '^' : String(m[3]) })
  }
  return tokens
}

export function evaluate (text: string): number {
  const tokens = tokenize(text)
  let i = 0
  const peek = (): Token | undefined => tokens[i]
  const isOp = (v: string): boolean => peek()?.kind === 'op' && peek()?.value === v
  const expect = (v: string): void => {
    if (!isOp(v)) throw new Error(`Expected '${v}'`)
    i++
  }
  let depth = 0
  // expr := term (('+'|'-') term)*
  const expr = (): number => {
    if (++depth > 200) throw new Error('Expression is nested too deeply')
    let v = term()
    while (isOp('+') || isOp('-')) {
      const op = tokens[i++]?.value
      const r = term()
      v = op === '+' ? v + r : v - r
    }
    depth--
    return v
  }
  // term := unary (('*'|'/'|'%') unary)*
  const term = (): number => {
    let v = unary()
    while (isOp('*') || isOp('/') || isOp('%')) {
      const op = tokens[i++]?.value
      const r = unary()
      if ((op === '/' || op === '%') && r === 0) throw new Error('Division by zero')
      v = op === '*' ? v * r : op === '/' ? v / r : v % r
    }
    return v
  }
  // unary := '-' unary | power ; power := atom ('^' unary)?  (right-associative, binds tighter than unary minus)
  const unary = (): number => {
    if (isOp('-')) { i++; return -unary() }
    if (isOp('+')) { i++; return unary() }
    const base = atom()
    if (isOp('^')) { i++; return base ** unary() }
    return base
  }
  const atom = (): number => {
    const t = peek()
    if (!t) throw new Error('Unexpected end of expression')
    if (t.kind === 'num') { i++; return t.value }
    if (isOp('(')) {
      i++
      const v = expr()
      expect(')')
      return v
    }
    if (t.kind === 'id') {
      i++
      const fn = FUNCTIONS[t.value]
      if (fn) {
        expect('(')
        const args = [expr()]
        while (isOp(',')) { i++; args.push(expr()) }
        expect(')')
        return fn(...args)
      }
      const c = CONSTANTS[t.value]
      if (c !== undefined) return c
      throw new Error(`Unknown name '${t.value}'`)
    }
    throw new Error(`Unexpected '${t.value}'`)
  }
  const value = expr()
  if (i < tokens.length) throw new Error(`Unexpected '${String(tokens[i]?.value)}' after the expression`)
  return value
}
