/**
 * Whether a URI can be an expansion of an RFC 6570 URI template, in time linear in the URI's
 * length times the template's (no regular expression): which server of the exchange a
 * `resources/read` of a templated URI goes to. Templates come from upstream servers a tenant
 * registers and URIs from its clients, so a matcher that backtracks (the SDK's `UriTemplate.match`
 * builds `^(.+)(.+)...$` for `{+a}{+b}...`, exponential in the expressions) would let one tenant
 * stall the event loop for everyone.
 *
 * An expression may expand to anything but the characters its operator cannot produce:
 * simple, `.` and `;` expansions stop at `/`, `?` and `#`; `/` expansions at `?` and `#`; `?` and
 * `&` at `#`; `+` and `#` at nothing. (The expansion is not parsed: the server that owns the
 * template does that.) Literal text must appear as written. Because every expression's allowed
 * set only shrinks as a span grows, taking each literal at its first position where the span
 * before it is allowed is as good as any later one, so one left-to-right pass decides.
 */

/** Longer templates and URIs are not matched (a read of such a URI is answered "not found"). */
const MAX_TEMPLATE = 8192
const MAX_URI = 65_536

const STOPS: Readonly<Record<string, string>> = { '': '/?#', '.': '/?#', ';': '/?#', '/': '?#', '?': '#', '&': '#', '+': '', '#': '' }

interface Literal { kind: 'literal', text: string }
interface Span { kind: 'span', stops: string }
type Token = Literal | Span

/** The template as literals and spans (adjacent expressions merged: a span stops where all of them would). */
function tokensOf (template: string): Token[] | undefined {
  const tokens: Token[] = []
  let i = 0
  while (i < template.length) {
    const open = template.indexOf('{', i)
    if (open < 0) {
      tokens.push({ kind: 'literal', text: template.slice(i) })
      break
    }
    if (open > i) tokens.push({ kind: 'literal', text: template.slice(i, open) })
    const close = template.indexOf('}', open + 1)
    if (close < 0) return undefined
    const expression = template.slice(open + 1, close)
    const first = expression.charAt(0)
    const op = first !== '' && '+#./;?&'.includes(first) ? first : ''
    let stops = STOPS[op] ?? ''
    const last = tokens[tokens.length - 1]
    if (last?.kind === 'span') {
      // Two expressions in a row: a character either may produce is allowed.
      stops = [...last.stops].filter((c) => stops.includes(c)).join('')
      tokens.pop()
    }
    tokens.push({ kind: 'span', stops })
    i = close + 1
  }
  return tokens
}

function allowed (uri: string, from: number, to: number, stops: string): boolean {
  for (let k = from; k < to; k++) if (stops.includes(uri[k] as string)) return false
  return true
}

export function templateMatches (template: string, uri: string): boolean {
  if (template.length > MAX_TEMPLATE || uri.length > MAX_URI) return false
  const tokens = tokensOf(template)
  if (tokens === undefined) return false
  let pos = 0
  let pending: Span | undefined
  for (const token of tokens) {
    if (token.kind === 'span') {
      pending = token
      continue
    }
    if (pending === undefined) {
      if (!uri.startsWith(token.text, pos)) return false
      pos += token.text.length
      continue
    }
    // The first occurrence: a later one would only add characters to the span before it.
    const at = uri.indexOf(token.text, pos)
    if (at < 0 || !allowed(uri, pos, at, pending.stops)) return false
    pos = at + token.text.length
    pending = undefined
  }
  return pending === undefined ? pos === uri.length : allowed(uri, pos, uri.length, pending.stops)
}
