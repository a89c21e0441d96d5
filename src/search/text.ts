import { stemmer } from 'stemmer'

/**
 * The text analysis of tool search (README "Tool search"), the same for a tool's text and a
 * query: words are split at case changes and at every non-alphanumeric (so `create_issue`,
 * `createIssue` and `create-issue` are the words "create" and "issue"), lowercased, stop words
 * dropped, and Porter-stemmed ("issues" and "creating" meet "issue" and "create").
 */

/** English function words and request filler that say nothing about which tool is meant. */
const STOP_WORDS = new Set([
  'a', 'an', 'the', 'and', 'or', 'of', 'to', 'in', 'on', 'for', 'with', 'by', 'from', 'at', 'as', 'into', 'onto', 'about',
  'is', 'are', 'was', 'were', 'be', 'been', 'it', 'its', 'this', 'that', 'these', 'those', 'there', 'their', 'them',
  'i', 'me', 'my', 'we', 'our', 'you', 'your', 'he', 'she', 'they', 'what', 'which', 'who', 'whom',
  'can', 'could', 'would', 'should', 'will', 'shall', 'may', 'might', 'must', 'do', 'does', 'did',
  'please', 'want', 'need', 'like', 'some', 'any', 'all', 'just', 'so', 'if', 'then', 'than', 'also', 'not', 'no',
  'tool', 'tools', 'using', 'use', 'via', 'given', 'specified', 'provided', 'optional', 'default',
  'how', 'when', 'why', 'called', 'named', 'anyone', 'someone', 'something', 'anything', 'everything', 'already', 'earlier'
])

/** Longest word kept (a base64 blob or a hash in a description is not a word anyone searches for). */
const MAX_WORD = 40

/** Splits text into raw words: camelCase and snake_case boundaries, letters and digits apart from punctuation. */
export function tokenize (text: string): string[] {
  const words = text
    // fooBar -> foo Bar, HTTPServer -> HTTP Server
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .split(/[^\p{L}\p{N}]+/u)
  return words.filter((w) => w.length > 0 && w.length <= MAX_WORD)
}

/** Stems of words seen, so an index build stems each distinct word once; emptied when full (tool text is tenant input). */
const STEMS = new Map<string, string | null>()
const MAX_STEMS = 50_000

/** One raw word as the index keeps it: lowercased and stemmed; null for a stop word. */
export function processTerm (word: string): string | null {
  let stem = STEMS.get(word)
  if (stem !== undefined) return stem
  const lower = word.toLowerCase()
  stem = STOP_WORDS.has(lower) ? null : lower.length <= 2 ? lower : stemmer(lower)
  if (STEMS.size >= MAX_STEMS) STEMS.clear()
  STEMS.set(word, stem)
  return stem
}

/**
 * Words a model says for the same action or thing as a tool's author ("delete" for `remove`,
 * "fetch" for `get`, "repo" for "repository"). Documented heuristics, not a thesaurus: a query's
 * word adds these, weighted below the word itself (tool-index.ts).
 */
const SYNONYM_GROUPS: ReadonlyArray<readonly string[]> = [
  ['delete', 'remove', 'erase', 'drop', 'destroy', 'unlink'],
  ['create', 'add', 'new', 'make', 'insert', 'open'],
  ['get', 'fetch', 'read', 'retrieve', 'show', 'view', 'load', 'lookup', 'download'],
  ['list', 'enumerate', 'browse'],
  ['search', 'find', 'query', 'lookup', 'locate', 'discover'],
  ['update', 'edit', 'modify', 'change', 'set', 'patch'],
  ['move', 'rename', 'relocate'],
  ['write', 'save', 'store', 'put', 'upload'],
  ['run', 'execute', 'exec', 'invoke', 'launch', 'start'],
  ['send', 'post', 'message', 'notify', 'reply'],
  ['repository', 'repo', 'project'],
  ['directory', 'folder', 'dir'],
  ['file', 'document'],
  ['pull', 'pr', 'merge'],
  ['issue', 'ticket', 'bug'],
  ['comment', 'note', 'remark'],
  ['user', 'person', 'member', 'people', 'account'],
  ['picture', 'image', 'photo', 'screenshot'],
  ['web', 'internet', 'online', 'website', 'url', 'page'],
  ['navigate', 'go', 'visit', 'browse'],
  ['time', 'clock', 'timezone', 'date'],
  ['sql', 'database', 'db', 'table'],
  ['location', 'place', 'address', 'map', 'geocode'],
  ['direction', 'route', 'distance'],
  ['geocode', 'coordinates', 'latitude', 'longitude'],
  ['calendar', 'agenda', 'schedule', 'event', 'meeting', 'appointment'],
  ['dialog', 'popup', 'alert', 'modal'],
  ['memory', 'knowledge', 'graph', 'entity', 'remember', 'recall'],
  ['mark', 'read', 'unread'],
  ['bucket', 'storage', 'object'],
  ['console', 'log', 'error'],
  ['create', 'leave', 'file', 'open'],
  ['approve', 'review'],
  ['script', 'javascript', 'js', 'code', 'evaluate'],
  ['readme', 'file', 'contents'],
  // Verb classes and nouns of tool APIs, added with the query shapes below (chosen on queries.json, checked on the held-out set).
  ['navigate', 'open', 'visit', 'goto'],
  ['compare', 'diff', 'difference', 'changes'],
  ['log', 'history', 'changelog'],
  ['trigger', 'kick', 'start', 'launch', 'dispatch', 'run'],
  ['reply', 'answer', 'respond', 'response'],
  ['reaction', 'react', 'emoji', 'thumbs'],
  ['forget', 'delete', 'remove', 'erase'],
  ['sum', 'add', 'plus', 'total', 'calculate'],
  ['reschedule', 'postpone', 'delay', 'update', 'move'],
  ['stage', 'staging', 'index'],
  ['secret', 'password', 'credential', 'token', 'key'],
  ['size', 'metadata', 'info', 'stat', 'properties', 'details'],
  ['elevation', 'altitude', 'height'],
  ['direction', 'drive', 'driving', 'walk', 'transit', 'route'],
  ['channel', 'chat', 'conversation', 'room', 'thread'],
  ['duplicate', 'same', 'similar', 'copy'],
  ['count', 'total', 'number', 'statistics'],
  ['history', 'recent', 'past', 'previous'],
  ['click', 'press', 'tap'],
  ['type', 'fill', 'enter', 'input'],
  ['email', 'mail', 'inbox'],
  ['screenshot', 'capture', 'snapshot'],
  ['close', 'shut', 'quit', 'exit'],
  ['assign', 'assignee', 'owner'],
  ['label', 'tag', 'category'],
  ['star', 'favorite', 'bookmark'],
  ['fork', 'clone', 'copy'],
  ['branch', 'checkout', 'switch'],
  ['rename', 'title'],
  ['archive', 'compress', 'zip', 'gzip'],
  ['schema', 'structure', 'columns', 'describe'],
  ['weather', 'forecast', 'temperature'],
  ['error', 'exception', 'crash', 'failure'],
  ['record', 'save', 'store', 'remember'],
  // The words of tool names (browser_hover, actions_run_rerun, list_dependabot_alerts, get_file_blame, ...),
  // each with the everyday words for it: the tool side's vocabulary, not any query's.
  ['hover', 'mouse', 'cursor'],
  ['wait', 'pause', 'sleep'],
  ['resize', 'viewport', 'window', 'dimensions'],
  ['generate', 'produce', 'render', 'draw'],
  ['convert', 'translate', 'transform'],
  ['milestone', 'sprint', 'cycle', 'iteration'],
  ['blame', 'author', 'annotate'],
  ['release', 'version'],
  ['team', 'group', 'org', 'organization'],
  ['collaborator', 'contributor', 'member'],
  ['gist', 'snippet', 'paste'],
  ['dependabot', 'dependency', 'vulnerability', 'advisory', 'security', 'cve'],
  ['workflow', 'action', 'pipeline', 'ci', 'build', 'job'],
  ['cancel', 'abort', 'stop', 'kill'],
  ['rerun', 'retry', 'restart'],
  ['dismiss', 'ignore'],
  ['upload', 'attach'],
  ['pdf', 'print'],
  ['tab', 'window'],
  ['scroll', 'wheel'],
  ['form', 'field'],
  ['free', 'available', 'busy', 'slot'],
  ['explain', 'plan', 'analyze'],
  ['thinking', 'reason', 'think', 'step'],
  ['echo', 'repeat'],
  ['environment', 'env', 'variable', 'config'],
  ['insight', 'finding', 'observation'],
  ['presigned', 'share', 'link', 'temporary']
]

const SYNONYMS: ReadonlyMap<string, readonly string[]> = (() => {
  const map = new Map<string, Set<string>>()
  for (const group of SYNONYM_GROUPS) {
    const stems = group.map((w) => processTerm(w) ?? w)
    for (const stem of stems) {
      let set = map.get(stem)
      if (set === undefined) map.set(stem, set = new Set())
      for (const other of stems) if (other !== stem) set.add(other)
    }
  }
  return new Map([...map].map(([k, v]) => [k, [...v]]))
})()

/** The stems a query's stem also stands for (none for most). */
export function synonymsOf (stem: string): readonly string[] {
  return SYNONYMS.get(stem) ?? []
}
