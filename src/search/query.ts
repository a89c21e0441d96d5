import { processTerm, tokenize } from './text.js'

/**
 * What a query says beyond its words (README "Tool search"): the shapes of its arguments and what
 * kind of answer it asks for. A model's query often carries the call's arguments ("read
 * config.yaml", "open example.com") and names the tool's subject only through them.
 */

const IMAGE = 'png|jpe?g|gif|webp|svg|bmp|tiff?|ico|heic'
const AUDIO = 'wav|mp3|ogg|flac|m4a|aac|opus'
const VIDEO = 'mp4|mov|avi|mkv|webm'
const FILE = [
  'txt|md|markdown|rst|json|ya?ml|toml|ini|cfg|conf|env|csv|tsv|xml|html?|css|s?js|mjs|cjs|tsx?|jsx|py|rb|go|rs|java|kt',
  'c|h|cpp|hpp|cs|sh|sql|log|lock|pdf|docx?|xlsx?|pptx?|zip|tar|gz|tgz'
].join('|')
const TLD = 'com|org|net|io|dev|app|co|ai|edu|gov'
/** An address: a URL, or a host name ending in a common top-level domain (not an e-mail address's). */
const ADDRESS = new RegExp(`\\bhttps?://\\S+|\\bwww\\.\\S+|(?<![@\\w.-])[a-z0-9-]+(?:\\.[a-z0-9-]+)*\\.(?:${TLD})\\b\\S*`, 'gi')
const EMAIL = /[\w.+-]+@[\w-]+(?:\.[\w-]+)+/g

/** Shapes and the words they imply. */
const SHAPES: ReadonlyArray<readonly [RegExp, readonly string[]]> = [
  [new RegExp(`\\.(?:${IMAGE})\\b`, 'i'), ['file', 'image', 'media']],
  [new RegExp(`\\.(?:${AUDIO})\\b`, 'i'), ['file', 'audio', 'media']],
  [new RegExp(`\\.(?:${VIDEO})\\b`, 'i'), ['file', 'video', 'media']],
  [new RegExp(`\\w\\.(?:${FILE})\\b`, 'i'), ['file']],
  [/(?:^|\s)(?:~|\.{1,2})?\/[\w.-]+/, ['file', 'path']],
  [new RegExp(EMAIL.source), ['email', 'mail']],
  [new RegExp(ADDRESS.source, 'i'), ['url', 'web']],
  [/\b\d{1,2}(?::\d\d\s*(?:am|pm)?|\s*(?:am|pm))\b/i, ['time']],
  // What a question asks for (the answer's type): "how far" is a distance, "how big" a size.
  [/\bhow (?:big|large|small|heavy)\b/i, ['size']],
  [/\bhow far\b/i, ['distance']],
  [/\bhow (?:high|tall|low)\b/i, ['height', 'elevation']],
  [/\bhow (?:many|much)\b/i, ['count', 'number']],
  [/\bhow long\b/i, ['duration', 'time']],
  [/\bwhere\b/i, ['location', 'place']],
  [/\bwho\b/i, ['user']]
]

/**
 * The words a query's shapes imply, one group per shape: a file name's extension says "file"
 * (and "image" for a .png), an address "url", an e-mail address "email", "10am" "time", "how
 * far" "distance". The search counts each group as one more word of the query, answered by any
 * of its terms (stems). A query of addresses alone still has these.
 */
export function queryHints (query: string): string[][] {
  const hints: string[][] = []
  const seen = new Set<string>()
  for (const [shape, words] of SHAPES) {
    if (!shape.test(query)) continue
    // A term said by an earlier shape is not said twice ("~/notes/todo.md" is one file, not two).
    const terms = words.map((w) => processTerm(w) ?? w).filter((t) => !seen.has(t))
    for (const t of terms) seen.add(t)
    if (terms.length > 0) hints.push(terms)
  }
  return hints
}

/** A query without its addresses and e-mail addresses: their words (example, com, posts) are a call's arguments, not what a tool does. */
export function withoutAddresses (query: string): string {
  return query.replace(EMAIL, ' ').replace(ADDRESS, ' ')
}

/**
 * A question ("what did I commit", "which PRs", "is there an issue about...", "how big is it?")
 * asks to be told something: a tool that reads answers it, one that changes things rarely does.
 * An indirect request ("can you add...", "how do I create...") is no question here.
 */
export function isQuestion (query: string): boolean {
  const q = query.trim().toLowerCase()
  if (/^(?:can|could|would|will|please)\b|^how (?:do|can|should|would) (?:i|we|you)\b|^how to\b/.test(q)) return false
  return q.endsWith('?') || /^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|does|did|has|have|had)\b/.test(q)
}

const stems = (words: readonly string[]): ReadonlySet<string> => new Set(words.map((w) => processTerm(w) ?? w))

/** Verbs of a tool's name that only read (get_commit, list_pull_requests, slack_get_users). */
const READ_VERBS = stems(['get', 'list', 'search', 'read', 'find', 'show', 'describe', 'fetch', 'query', 'view', 'count', 'check', 'download', 'export'])

/** Verbs of a tool's name that change something (create_issue, git_commit, browser_click). */
const WRITE_VERBS = stems([
  'create', 'add', 'insert', 'new', 'delete', 'remove', 'drop', 'destroy', 'update', 'edit', 'modify', 'set', 'patch',
  'write', 'put', 'post', 'send', 'push', 'merge', 'move', 'rename', 'upload', 'append', 'assign', 'close', 'reopen',
  'submit', 'request', 'reply', 'fork', 'star', 'unstar', 'dismiss', 'approve', 'cancel', 'trigger', 'rerun', 'toggle',
  'commit', 'reset', 'checkout', 'click', 'type', 'fill', 'drag', 'press', 'select', 'navigate', 'reprioritize', 'archive',
  'manage', 'mark', 'copy', 'transition'
])

/**
 * A request that starts with a verb that changes something ("add alice as a reviewer", "delete the
 * branch"): a tool that changes things answers it rather than one that reads.
 */
export function asksToChange (query: string): boolean {
  for (const word of tokenize(query)) {
    const stem = processTerm(word)
    if (stem !== null) return WRITE_VERBS.has(stem)
  }
  return false
}

/**
 * Whether a tool only reads: its `readOnlyHint` when it gives one, else the first verb of its name
 * (get_pull_request reads, create_pull_request and slack_post_message write; a name without a
 * verb, like maps_elevation, reads).
 */
export function readsOnly (name: string, annotations: { readOnlyHint?: unknown } | undefined): boolean {
  if (typeof annotations?.readOnlyHint === 'boolean') return annotations.readOnlyHint
  for (const word of tokenize(name)) {
    const stem = processTerm(word)
    if (stem === null) continue
    if (READ_VERBS.has(stem)) return true
    if (WRITE_VERBS.has(stem)) return false
  }
  return true
}
