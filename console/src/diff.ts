// A small token diff for the pins panel (SPEC 18): what changed between a pinned tool definition and
// the one offered now. Longest common subsequence over words (a description) or lines (pretty-printed
// JSON); no dependency. The parts are plain strings: the views render them as text, never as HTML.

export interface Part {
  op: 'same' | 'del' | 'add'
  text: string
}

/** Past this many cells (tokens × tokens) the LCS table is not built: the whole old text goes, the new comes. */
const MAX_CELLS = 4_000_000

/** The diff of two token lists, runs of one op merged. */
export function diffTokens (a: string[], b: string[]): Part[] {
  // The common head and tail need no table.
  let head = 0
  while (head < a.length && head < b.length && a[head] === b[head]) head++
  let tail = 0
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++
  const x = a.slice(head, a.length - tail)
  const y = b.slice(head, b.length - tail)
  const parts: Part[] = []
  const push = (op: Part['op'], text: string): void => {
    const last = parts[parts.length - 1]
    if (last !== undefined && last.op === op) last.text += text
    else if (text !== '') parts.push({ op, text })
  }
  push('same', a.slice(0, head).join(''))
  if (x.length * y.length > MAX_CELLS) {
    push('del', x.join(''))
    push('add', y.join(''))
  } else {
    // lcs[i][j]: the LCS length of x[i:] and y[j:], one flat array.
    const w = y.length + 1
    const lcs = new Uint32Array((x.length + 1) * w)
    for (let i = x.length - 1; i >= 0; i--) {
      for (let j = y.length - 1; j >= 0; j--) {
        lcs[i * w + j] = x[i] === y[j] ? (lcs[(i + 1) * w + j + 1] ?? 0) + 1 : Math.max(lcs[(i + 1) * w + j] ?? 0, lcs[i * w + j + 1] ?? 0)
      }
    }
    let i = 0
    let j = 0
    while (i < x.length && j < y.length) {
      if (x[i] === y[j]) {
        push('same', x[i] ?? '')
        i++
        j++
      } else if ((lcs[(i + 1) * w + j] ?? 0) >= (lcs[i * w + j + 1] ?? 0)) {
        push('del', x[i] ?? '')
        i++
      } else {
        push('add', y[j] ?? '')
        j++
      }
    }
    push('del', x.slice(i).join(''))
    push('add', y.slice(j).join(''))
  }
  push('same', a.slice(a.length - tail).join(''))
  return parts
}

/** Words and the whitespace between them, so the parts join back to the texts. */
export function words (text: string): string[] {
  return text.split(/(\s+)/).filter((t) => t !== '')
}

/** Lines, each with its newline. */
export function lines (text: string): string[] {
  return text === '' ? [] : text.split(/(?<=\n)/)
}

/** Objects' keys in code-point order at every depth: the pinned definition is kept canonical, the offered one as sent. */
function sorted (value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sorted)
  if (value === null || typeof value !== 'object') return value
  const keys = Object.keys(value).sort((x, y) => x < y ? -1 : x > y ? 1 : 0)
  return Object.fromEntries(keys.map((k) => [k, sorted((value as Record<string, unknown>)[k])]))
}

/**
 * A field's value as the diff shows it: a string as is, anything else as pretty-printed JSON with
 * sorted keys, so the order a server sends keys in is no change ('' when absent).
 */
export function shown (value: unknown): string {
  if (value === undefined) return ''
  return typeof value === 'string' ? value : `${JSON.stringify(sorted(value), null, 2)}\n`
}
