/** Tool search's engine (SPEC 17): text analysis and the per-listing full-text index with its embeddings hook. */
export { MAX_QUERY_CHARS, ToolIndex, toolDocument } from './tool-index.js'
export type { Embedder } from './tool-index.js'
