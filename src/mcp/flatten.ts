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
 * - when no item carries text (no text item, no embedded text resource), `structuredContent` is
 *   appended as JSON, so a tool that only returns structured data is still readable;
 * - a legacy `{ toolResult }` answer with no content is rendered as a string or as JSON;
 * - unknown item types become `[type]`.
 */
export function flattenCallToolResult (result: FlattenInput): FlattenedToolResult {
  const content = Array.isArray(result.content) ? result.content : []
  const parts: string[] = []
  let hasText = false
  for (const item of content) {
    const rendered = renderItem(item)
    if (rendered.hasText) hasText = true
    parts.push(rendered.text)
  }
  if (!hasText && result.structuredContent !== undefined) {
    parts.push(JSON.stringify(result.structuredContent))
  } else if (content.length === 0 && result.toolResult !== undefined) {
    parts.push(typeof result.toolResult === 'string' ? result.toolResult : JSON.stringify(result.toolResult) ?? '')
  }
  const trace: FlattenedToolResult['trace'] = { content }
  if (result.structuredContent !== undefined) trace.structuredContent = result.structuredContent
  return { text: parts.join('\n'), isError: result.isError === true, trace }
}

function renderItem (item: unknown): { text: string, hasText: boolean } {
  if (item === null || typeof item !== 'object') return { text: '[unknown]', hasText: false }
  const it = item as Record<string, unknown>
  switch (it.type) {
    case 'text':
      return { text: typeof it.text === 'string' ? it.text : '', hasText: true }
    case 'image':
    case 'audio':
      return { text: `[${it.type} ${str(it.mimeType, 'unknown')} ${base64Bytes(it.data)} bytes]`, hasText: false }
    case 'resource_link':
      return { text: `[resource ${str(it.uri, '')}]`, hasText: false }
    case 'resource': {
      const res = (it.resource !== null && typeof it.resource === 'object' ? it.resource : {}) as Record<string, unknown>
      const placeholder = `[resource ${str(res.uri, '')}]`
      if (typeof res.text === 'string') return { text: `${placeholder}\n${res.text}`, hasText: true }
      return { text: placeholder, hasText: false }
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
