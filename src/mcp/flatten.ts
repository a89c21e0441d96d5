import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'

/** What one MCP tool result becomes for the model (docs/ARCHITECTURE.md#result-and-trace), plus the raw items for the trace. */
export interface FlattenedToolResult {
  /** The string the model sees (before the gateway's output cap). */
  text: string
  /** The tool's own `isError` flag, kept apart from transport failures. */
  isError: boolean
  /** Structured side channel, never shown to the model: the raw content items as received. */
  trace: { content: unknown[], structuredContent?: unknown }
}

/**
 * The subset of a tools/call result this function reads. Typed loosely on purpose: servers on
 * older protocol versions answer `{ toolResult }`, and a result is flattened even when an item
 * has an unknown type.
 */
export type FlattenInput = Pick<CallToolResult, 'structuredContent' | 'isError'> & {
  content?: unknown[]
  toolResult?: unknown
}

/**
 * Flattens a CallToolResult into the model's string (docs/ARCHITECTURE.md#result-and-trace):
 * - text items are joined with '\n', in order, with every other item rendered in its place;
 * - image / audio items become `[image image/png 1234 bytes]` (decoded byte size of the base64);
 * - resource_link items become `[resource uri]`;
 * - embedded resources become `[resource uri]`; an embedded *text* resource is followed by its
 *   text on the next line, because that text is content the tool meant for the model (a file
 *   it read, say) and dropping it would lose the answer; blob resources stay a placeholder;
 * - `structuredContent` is appended as JSON only when no item carries text (no text item, no
 *   embedded text resource) and no item carries bytes (image, audio, blob resource). Servers
 *   often mirror a media item in structuredContent (the base64 again), so with media present
 *   it would only repeat what the placeholder already says, at up to the whole output cap.
 *   When it is rendered, every string in it that is an encoded payload (a `data:` URI, or a
 *   long run of base64 alphabet) becomes `[base64 N bytes]` / `[data mime N bytes]`;
 * - a legacy `{ toolResult }` answer with no content is rendered as a string or as JSON;
 * - unknown item types become `[type]`.
 * The trace keeps everything as received (bytes included).
 */
export function flattenCallToolResult (result: FlattenInput): FlattenedToolResult {
  const content = Array.isArray(result.content) ? result.content : []
  const parts: string[] = []
  let hasText = false
  let hasMedia = false
  for (const item of content) {
    const rendered = renderItem(item)
    if (rendered.hasText) hasText = true
    if (rendered.hasMedia) hasMedia = true
    parts.push(rendered.text)
  }
  if (!hasText && !hasMedia && result.structuredContent !== undefined) {
    parts.push(JSON.stringify(result.structuredContent, (_key, value: unknown) => typeof value === 'string' ? payloadPlaceholder(value) ?? value : value) ?? '')
  } else if (content.length === 0 && result.toolResult !== undefined) {
    parts.push(typeof result.toolResult === 'string' ? result.toolResult : JSON.stringify(result.toolResult) ?? '')
  }
  const trace: FlattenedToolResult['trace'] = { content }
  if (result.structuredContent !== undefined) trace.structuredContent = result.structuredContent
  return { text: parts.join('\n'), isError: result.isError === true, trace }
}

interface RenderedItem {
  text: string
  /** The item carries text meant for the model. */
  hasText: boolean
  /** The item carries bytes (image, audio, blob resource) that the model only sees as a placeholder. */
  hasMedia?: boolean
}

function renderItem (item: unknown): RenderedItem {
  if (item === null || typeof item !== 'object') return { text: '[unknown]', hasText: false }
  const it = item as Record<string, unknown>
  switch (it.type) {
    case 'text':
      return { text: typeof it.text === 'string' ? it.text : '', hasText: true }
    case 'image':
    case 'audio':
      return { text: `[${it.type} ${str(it.mimeType, 'unknown')} ${base64Bytes(it.data)} bytes]`, hasText: false, hasMedia: true }
    case 'resource_link':
      return { text: `[resource ${str(it.uri, '')}]`, hasText: false }
    case 'resource': {
      const res = (it.resource !== null && typeof it.resource === 'object' ? it.resource : {}) as Record<string, unknown>
      const placeholder = `[resource ${str(res.uri, '')}]`
      if (typeof res.text === 'string') return { text: `${placeholder}\n${res.text}`, hasText: true }
      return { text: placeholder, hasText: false, hasMedia: typeof res.blob === 'string' }
    }
    default:
      return { text: `[${str(it.type, 'unknown')}]`, hasText: false }
  }
}

function str (value: unknown, fallback: string): string {
  return typeof value === 'string' ? value : fallback
}

/** Decoded size of a base64 payload without decoding it (padding and whitespace aware). */
function base64Bytes (data: unknown): number {
  return typeof data === 'string' ? Buffer.byteLength(data, 'base64') : 0
}

/**
 * Shorter strings are left alone: ids, hashes and tokens stay readable, and a payload this
 * short costs the model little.
 */
const MIN_PAYLOAD_CHARS = 256
const BASE64_RUN = /^[A-Za-z0-9+/_-]+={0,2}$/
const DATA_URI = /^data:([^;,]{0,100})(?:;[^;,]{0,100})*;base64,/

/**
 * A placeholder for a string that is an encoded payload rather than words: a base64 `data:`
 * URI of any length, or at least MIN_PAYLOAD_CHARS of the base64 (or base64url) alphabet with
 * no space or other punctuation, which text, JSON and URLs never are. Undefined otherwise.
 */
function payloadPlaceholder (value: string): string | undefined {
  const uri = DATA_URI.exec(value)
  if (uri !== null) return `[data ${uri[1] === '' ? 'unknown' : uri[1]} ${base64Bytes(value.slice(uri[0].length))} bytes]`
  if (value.length < MIN_PAYLOAD_CHARS || !BASE64_RUN.test(value)) return undefined
  return `[base64 ${base64Bytes(value)} bytes]`
}
