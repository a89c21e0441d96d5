import MiniSearch from 'minisearch'
import { asksToChange, isQuestion, queryHints, readsOnly, withoutAddresses } from './query.js'
import { processTerm, synonymsOf, tokenize } from './text.js'

/** A tool as the search sees it: the text a model's query is matched against. */
export interface ToolDocument {
  /** The tool's own name (not the wire name: an encoded `user_{u}_tool_{t}` would add the tenant's id to every tool). */
  name: string
  title: string
  description: string
  /** Parameter names and their descriptions. */
  parameters: string
  /** The parameters' enum values: a word here says little (LOW|MEDIUM|HIGH is no elevation). */
  values: string
  /** The server, service or function the tool comes from ("github", "builtin"). */
  source: string
  /** Whether the tool only reads (its readOnlyHint, else its name's verbs): a question ranks the others lower. Not indexed. */
  readOnly: boolean
}

/** One ranked tool: its position in the documents the index was built from, and its score. */
export interface SearchHit {
  index: number
  score: number
}

/**
 * The embeddings hook (README "Tool search"): a semantic ranker fused with the full-text rank.
 * The gateway ships none and downloads nothing; an operator who has a model wires one in
 * services (createServices' `searchEmbedder`). Vectors of one embedder must share a length.
 */
export interface Embedder {
  embed: (texts: readonly string[], signal: AbortSignal) => Promise<ReadonlyArray<ArrayLike<number>>>
}

/**
 * Field weights (chosen on the evaluation sets, README "Tool search"): a tool's name, its source
 * and its description weigh alike; its parameters' words far less; their enum values least.
 */
const BOOST = { name: 2, title: 1.5, source: 2, description: 2, parameters: 0.3, values: 0.1 }
/** A query word's synonym counts this much of the word itself. */
const SYNONYM_WEIGHT = 0.15
/** A question's score of a tool that changes things is multiplied by this (query.ts isQuestion, readsOnly). */
const QUESTION_WRITE_WEIGHT = 0.35
/** A request's score of a tool that only reads, when the request starts with a verb that changes something (query.ts asksToChange). */
const CHANGE_READ_WEIGHT = 0.7
/** A tool's score is multiplied by this plus the share of the query's words it answers. */
const COORDINATION_FLOOR = 1
/** Reciprocal rank fusion constant (Cormack et al.): ranks past the first few weigh little. */
const RRF_K = 60
/** Longest query read, in characters (a longer one is cut, never refused: it comes from a model). */
export const MAX_QUERY_CHARS = 1000
/** At most this many query words are searched (each is a lookup in the index). */
const MAX_QUERY_WORDS = 32
/** Characters of a tool's name, title or source kept. */
const MAX_NAME_TEXT = 256
/** Characters of a tool's description kept. */
const MAX_DESCRIPTION_TEXT = 4000
/** Characters of a tool's parameter text kept: a huge schema must not dominate, nor cost the build. */
const MAX_PARAMETER_TEXT = 4000
const FIELDS = ['name', 'title', 'source', 'description', 'parameters', 'values'] as const
/**
 * Characters one index holds at most, over all its tools: past it each tool's text is cut to an equal share
 * (fitDocuments). A tenant's kept lists may hold 32 MiB of definitions (MCP_TENANT_LIST_BYTES), whose index took
 * ~12 s to build and ~400 MB of heap (too large for the listings' cache of indexes, so built again for every search).
 */
export const MAX_INDEX_CHARS = 4 * 1024 * 1024
/** Text and tools indexed between two turns of the event loop while an index is built (~10-20 ms here). */
const SLICE_CHARS = 64 * 1024
const SLICE_DOCS = 1000

/**
 * A full-text index over one listing's tools (MiniSearch: BM25+ per field, prefix and fuzzy
 * matching), built once per listing version and read-only after: searches never change it.
 * With an embedder, its vectors are computed at build and each search fuses both ranks.
 */
export class ToolIndex {
  readonly #docs: readonly ToolDocument[]
  readonly #search: MiniSearch<ToolDocument & { id: number }>
  readonly #vectors: ReadonlyArray<ArrayLike<number>> | undefined
  readonly #embedder: Embedder | undefined
  /** The characters indexed: the cache weighs an index by them. */
  readonly textChars: number
  /** Every term of the indexed text: only a query word none of the tools uses is looked up as a typo. */
  readonly #vocabulary = new Set<string>()

  private constructor (docs: readonly ToolDocument[], vectors: ReadonlyArray<ArrayLike<number>> | undefined, embedder: Embedder | undefined) {
    this.#docs = docs
    this.#vectors = vectors
    this.#embedder = embedder
    this.#search = new MiniSearch({
      fields: [...FIELDS],
      idField: 'id',
      tokenize,
      processTerm: (word) => {
        const term = processTerm(word)
        if (term !== null) this.#vocabulary.add(term)
        return term
      },
      searchOptions: { boost: BOOST, combineWith: 'OR', bm25: { k: 1.2, b: 0.7, d: 0 } }
    })
    this.textChars = docs.reduce((n, d) => n + documentChars(d), 0)
  }

  /**
   * The index of these documents (their text fitted to MAX_INDEX_CHARS); with an embedder, after
   * their vectors are computed. Built a slice at a time, the event loop turning between slices: a
   * tenant's catalog of thousands of tools took seconds of it at once (5,000 tools of ~900
   * characters: ~0.8-1.2 s here; MiniSearch's own work).
   */
  static async build (docs: readonly ToolDocument[], embedder?: Embedder, signal: AbortSignal = new AbortController().signal): Promise<ToolIndex> {
    const fitted = fitDocuments(docs, MAX_INDEX_CHARS)
    let vectors: ReadonlyArray<ArrayLike<number>> | undefined
    if (embedder !== undefined) {
      vectors = await embedder.embed(fitted.map(documentText), signal)
      if (vectors.length !== fitted.length) throw new Error(`the embedder answered ${vectors.length} vectors for ${fitted.length} tools`)
    }
    const index = new ToolIndex(fitted, vectors, embedder)
    for (let from = 0; from < fitted.length;) {
      if (from > 0) {
        await new Promise((resolve) => setImmediate(resolve))
        signal.throwIfAborted()
      }
      from = index.#addSlice(from)
    }
    return index
  }

  /** The index without embeddings, built at once (benchmarks and tests; the gateway builds with `build`). */
  static buildNow (docs: readonly ToolDocument[]): ToolIndex {
    const index = new ToolIndex(fitDocuments(docs, MAX_INDEX_CHARS), undefined, undefined)
    for (let from = 0; from < index.#docs.length;) from = index.#addSlice(from)
    return index
  }

  /** Indexes the documents from `from` on, up to SLICE_CHARS of their text or SLICE_DOCS of them; answers where it stopped. */
  #addSlice (from: number): number {
    const docs = this.#docs
    let to = from
    let chars = 0
    while (to < docs.length && to - from < SLICE_DOCS && (to === from || chars < SLICE_CHARS)) chars += documentChars(docs[to++] as ToolDocument)
    const slice: Array<ToolDocument & { id: number }> = []
    for (let id = from; id < to; id++) slice.push({ ...(docs[id] as ToolDocument), id })
    this.#search.addAll(slice)
    return to
  }

  get size (): number {
    return this.#docs.length
  }

  /** The best `limit` tools for `query`, best first; none for a query without a searchable word. */
  async search (query: string, limit: number, signal: AbortSignal = new AbortController().signal): Promise<SearchHit[]> {
    const text = this.searchText(query, this.#vectors === undefined ? limit : Math.max(limit, 50))
    if (this.#vectors === undefined || this.#embedder === undefined) return text
    const [vector] = await this.#embedder.embed([query.slice(0, MAX_QUERY_CHARS)], signal)
    if (vector === undefined) return text.slice(0, limit)
    return fuse(text, cosineRanking(vector, this.#vectors), limit)
  }

  /** The full-text ranking alone, synchronously. */
  searchText (query: string, limit: number): SearchHit[] {
    const text = query.slice(0, MAX_QUERY_CHARS)
    const own = new Set<string>()
    for (const w of tokenize(withoutAddresses(text)).slice(0, MAX_QUERY_WORDS)) {
      const stem = processTerm(w)
      if (stem) own.add(stem)
    }
    const hints = queryHints(text)
    if (own.size === 0 && hints.length === 0) return []
    // Each term stands for the query words it came from: a word itself, a synonym of one or more, or
    // a term of the i-th shape (`#i`, query.ts); it weighs the most of what it is (a word 1, a synonym less).
    const concepts = new Map<string, string[]>()
    const weights = new Map<string, number>()
    const add = (term: string, word: string, weight: number): void => {
      const of = concepts.get(term)
      if (of === undefined) concepts.set(term, [word])
      else if (!of.includes(word)) of.push(word)
      weights.set(term, Math.max(weights.get(term) ?? 0, weight))
    }
    for (const stem of own) add(stem, stem, 1)
    hints.forEach((terms, i) => {
      for (const term of terms) {
        if (own.has(term)) continue
        add(term, `#${i}`, 1)
        for (const s of synonymsOf(term)) if (!own.has(s)) add(s, `#${i}`, SYNONYM_WEIGHT)
      }
    })
    for (const stem of own) {
      for (const s of synonymsOf(stem)) if (!own.has(s)) add(s, stem, SYNONYM_WEIGHT)
    }
    const words = own.size + hints.length
    // Terms are already processed: the query's own tokenizer and processTerm must keep them as they are.
    const results = this.#search.search([...concepts.keys()].join(' '), {
      tokenize: (q) => q.split(' '),
      processTerm: (t) => t,
      boostTerm: (term) => weights.get(term) ?? 0,
      // A synonym is matched as written: prefixes of the query's own words only, typos of its words no tool uses (fewer lookups).
      prefix: (term) => term.length >= 3 && own.has(term),
      fuzzy: (term) => term.length >= 5 && own.has(term) && !this.#vocabulary.has(term) ? 0.2 : false
    })
    const asks = isQuestion(text)
    const changes = !asks && asksToChange(text)
    // Coordination: a tool that answers more of the query's words (itself or by a synonym) ranks above one
    // that answers a single word many times (BM25 alone sums per term). A question ranks tools that change
    // things lower; a request that starts with a verb that changes something ranks the tools that only read
    // lower, by less (query.ts).
    const ranked = results.map((r) => {
      const covered = new Set<string>()
      for (const term of r.queryTerms) for (const word of concepts.get(term) ?? []) covered.add(word)
      const index = r.id as number
      const readOnly = (this.#docs[index] as ToolDocument).readOnly
      const intent = asks && !readOnly ? QUESTION_WRITE_WEIGHT : changes && readOnly ? CHANGE_READ_WEIGHT : 1
      return { index, score: r.score * (COORDINATION_FLOOR + covered.size / words) * intent }
    }).sort((a, b) => b.score - a.score || a.index - b.index)
    return ranked.slice(0, limit)
  }
}

/** What a tool's text is for an embedder: one line per field that has any. */
function documentText (d: ToolDocument): string {
  return [d.name, d.title, d.description, d.parameters].filter((s) => s.length > 0).join('\n')
}

/** The document of a tool, from its own name, title, description and input schema. */
export function toolDocument (
  tool: {
    name: string
    title?: string | undefined
    description?: string | undefined
    inputSchema?: unknown
    annotations?: { readOnlyHint?: unknown } | undefined
  },
  source: string
): ToolDocument {
  // Bounded: tool text is the tool server's to write, and a search needs its first words, not a megabyte of them.
  return {
    name: tool.name.slice(0, MAX_NAME_TEXT),
    title: (tool.title ?? '').slice(0, MAX_NAME_TEXT),
    description: (tool.description ?? '').slice(0, MAX_DESCRIPTION_TEXT),
    ...parameterText(tool.inputSchema),
    source: source.slice(0, MAX_NAME_TEXT),
    readOnly: readsOnly(tool.name, tool.annotations)
  }
}

/** Parameter names and descriptions, and apart their enum values, of an input schema, two levels deep, bounded. */
function parameterText (schema: unknown): { parameters: string, values: string } {
  const parts: string[] = []
  const values: string[] = []
  let chars = 0
  const visit = (node: unknown, depth: number): void => {
    if (depth > 2 || chars > MAX_PARAMETER_TEXT || node === null || typeof node !== 'object') return
    const properties = (node as { properties?: unknown }).properties
    if (properties === null || typeof properties !== 'object') return
    for (const [name, prop] of Object.entries(properties as Record<string, unknown>)) {
      if (chars > MAX_PARAMETER_TEXT) return
      const p = (prop ?? {}) as { description?: unknown, enum?: unknown, items?: unknown }
      const text = typeof p.description === 'string' ? `${name} ${p.description}` : name
      parts.push(text)
      chars += text.length
      if (Array.isArray(p.enum)) {
        const words = p.enum.filter((e) => typeof e === 'string').join(' ')
        values.push(words)
        chars += words.length
      }
      visit(prop, depth + 1)
      visit(p.items, depth + 1)
    }
  }
  visit(schema, 0)
  return { parameters: parts.join('\n').slice(0, MAX_PARAMETER_TEXT), values: values.join(' ').slice(0, MAX_PARAMETER_TEXT) }
}

/** Every document by cosine similarity to the query's vector, best first. */
function cosineRanking (query: ArrayLike<number>, vectors: ReadonlyArray<ArrayLike<number>>): SearchHit[] {
  const norm = (v: ArrayLike<number>): number => {
    let s = 0
    for (let i = 0; i < v.length; i++) s += (v[i] as number) ** 2
    return Math.sqrt(s)
  }
  const qn = norm(query)
  const hits = vectors.map((v, index) => {
    let dot = 0
    for (let i = 0; i < Math.min(v.length, query.length); i++) dot += (v[i] as number) * (query[i] as number)
    const denominator = qn * norm(v)
    return { index, score: denominator === 0 ? 0 : dot / denominator }
  })
  return hits.filter((h) => h.score > 0).sort((a, b) => b.score - a.score)
}

/** Reciprocal rank fusion of two rankings; the score is the fused one. */
function fuse (a: readonly SearchHit[], b: readonly SearchHit[], limit: number): SearchHit[] {
  const scores = new Map<number, number>()
  for (const ranking of [a, b]) {
    ranking.forEach((hit, rank) => scores.set(hit.index, (scores.get(hit.index) ?? 0) + 1 / (RRF_K + rank + 1)))
  }
  return [...scores].map(([index, score]) => ({ index, score })).sort((x, y) => y.score - x.score || x.index - y.index).slice(0, limit)
}

/** The characters of a document the index reads. */
function documentChars (d: ToolDocument): number {
  return d.name.length + d.title.length + d.description.length + d.parameters.length + d.values.length + d.source.length
}

/**
 * The documents, fitted to `maxChars` in all: unchanged when they fit; else each document longer
 * than an equal allowance (the largest for which the documents fit) is cut to it, its fields kept
 * in order of what they say of the tool (name, title, source, description, parameters, values).
 */
function fitDocuments (docs: readonly ToolDocument[], maxChars: number): readonly ToolDocument[] {
  const sizes = docs.map(documentChars)
  if (sizes.reduce((a, b) => a + b, 0) <= maxChars) return docs
  const within = (allowance: number): boolean => {
    let total = 0
    for (const size of sizes) if ((total += Math.min(size, allowance)) > maxChars) return false
    return true
  }
  let lo = 0
  let hi = 0
  for (const size of sizes) if (size > hi) hi = size
  while (lo < hi) {
    const mid = Math.ceil((lo + hi) / 2)
    if (within(mid)) lo = mid
    else hi = mid - 1
  }
  return docs.map((d, i) => ((sizes[i] as number) <= lo ? d : cutDocument(d, lo)))
}

function cutDocument (d: ToolDocument, allowance: number): ToolDocument {
  let left = allowance
  const take = (text: string): string => {
    const kept = text.slice(0, Math.max(0, left))
    left -= kept.length
    return kept
  }
  const name = take(d.name)
  const title = take(d.title)
  const source = take(d.source)
  const description = take(d.description)
  const parameters = take(d.parameters)
  return { name, title, source, description, parameters, values: take(d.values), readOnly: d.readOnly }
}
