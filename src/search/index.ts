/** Tool search's engine (SPEC 17): text analysis and the per-listing full-text index with its embeddings hook. */
export { MAX_INDEX_CHARS, MAX_QUERY_CHARS, ToolIndex, toolDocument } from './tool-index.js'
export type { Embedder, ToolDocument } from './tool-index.js'
