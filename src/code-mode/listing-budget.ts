/**
 * The length budget of code mode's typed API (SPEC 19): the API rides in a tool description a model reads on
 * every turn. Tools are added in the listing's order while they fit in `maxChars`; the rest are named on one
 * footer line (as many names as fit in {@link MAX_FOOTER_NAMES} characters), so the model knows they exist
 * and calls them the same way. One tool's entry is held to {@link MAX_ENTRY} characters by showing less of
 * its schema, so one huge schema cannot push every later tool out of the API.
 */
import { DETAILS } from './schema-type.js'

/** Default `maxChars`: about 1,500 tokens. */
const DEFAULT_MAX_CHARS = 6000

/** Longest entry of one tool, when its schema can be shown with less detail. */
const MAX_ENTRY = 1000

const MAX_FOOTER_NAMES = 300

/** How one language lays out the API; entries and the footer end in a newline. */
export interface ApiShape {
  head: string
  /** The lines that close the API after `body` (Python's class needs a statement when no def made it in). */
  tail: (body: string) => string
  /** Tool `i`'s lines, '' to leave it out; called once per tool, in order. */
  entry: (i: number) => string
  /** One comment line: `more` tools left out, then `names`. */
  footer: (more: number, names: string) => string
  /** Tool `i`'s name as the footer prints it. */
  name: (i: number) => string
}

/** The first of `render`'s texts, from the most detailed, that fits in one tool's cap (else the least detailed). */
export function fitEntry (render: (detail: number) => string): string {
  let text = ''
  for (const detail of DETAILS) {
    text = render(detail)
    if (text.length <= MAX_ENTRY) break
  }
  return text
}

/**
 * The API for `count` tools within `maxChars` (negative or not a number: the default). Never shorter than
 * head, footer and tail: those are what a model needs to know that tools exist at all.
 */
export function assembleApi (count: number, maxChars: number | undefined, shape: ApiShape): string {
  const max = typeof maxChars === 'number' && maxChars >= 0 ? maxChars : DEFAULT_MAX_CHARS
  const entries: string[] = []
  let used = shape.head.length + shape.tail('').length
  let shown = 0
  for (; shown < count; shown++) {
    const entry = shape.entry(shown)
    if (used + entry.length > max) break
    entries.push(entry)
    used += entry.length
  }
  if (shown < count) {
    let footer = footerLine(shape, shown, count)
    while (entries.length > 0 && used + footer.length > max) {
      used -= (entries.pop() as string).length
      footer = footerLine(shape, --shown, count)
    }
    entries.push(footer)
  }
  const body = entries.join('')
  return shape.head + body + shape.tail(body)
}

function footerLine (shape: ApiShape, from: number, count: number): string {
  let names = ''
  for (let i = from; i < count; i++) {
    const next = names === '' ? shape.name(i) : `${names}, ${shape.name(i)}`
    if (next.length > MAX_FOOTER_NAMES) {
      names = names === '' ? '...' : `${names}, ...`
      break
    }
    names = next
  }
  return shape.footer(count - from, names)
}
