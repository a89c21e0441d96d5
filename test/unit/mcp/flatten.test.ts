import { test } from 'node:test'
import assert from 'node:assert/strict'
import { flattenCallToolResult } from '../../../src/mcp/flatten.js'
import type { FlattenInput } from '../../../src/mcp/flatten.js'

const PNG = Buffer.alloc(1234, 7).toString('base64')
const WAV = Buffer.alloc(10, 1).toString('base64')

const cases: Array<{ name: string, input: FlattenInput, text: string, isError?: boolean }> = [
  { name: 'text items joined with newlines', input: { content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }, text: 'a\nb' },
  {
    name: 'image placeholder with decoded byte size',
    input: { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] },
    text: '[image image/png 1234 bytes]'
  },
  { name: 'audio placeholder', input: { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] }, text: '[audio audio/wav 10 bytes]' },
  { name: 'resource link placeholder', input: { content: [{ type: 'resource_link', uri: 'file:///a.md', name: 'a' }] }, text: '[resource file:///a.md]' },
  {
    name: 'embedded text resource keeps its text after the placeholder',
    input: { content: [{ type: 'resource', resource: { uri: 'file:///n.txt', text: 'body' } }] },
    text: '[resource file:///n.txt]\nbody'
  },
  {
    name: 'embedded blob resource is only a placeholder',
    input: { content: [{ type: 'resource', resource: { uri: 'file:///b.bin', blob: 'AAAA' } }] },
    text: '[resource file:///b.bin]'
  },
  {
    name: 'mixed items keep their order',
    input: { content: [{ type: 'text', text: 'see' }, { type: 'image', data: PNG, mimeType: 'image/jpeg' }, { type: 'text', text: 'end' }] },
    text: 'see\n[image image/jpeg 1234 bytes]\nend'
  },
  { name: 'structuredContent as JSON when there is no text', input: { content: [], structuredContent: { ok: true, n: 1 } }, text: '{"ok":true,"n":1}' },
  {
    name: 'structuredContent appended after a resource link when no item has text or bytes',
    input: { content: [{ type: 'resource_link', uri: 'file:///a.md', name: 'a' }], structuredContent: { n: 2 } },
    text: '[resource file:///a.md]\n{"n":2}'
  },
  {
    // @modelcontextprotocol/server-filesystem's read_media_file: the image again in structuredContent.
    name: 'an image with structuredContent mirroring it: only the placeholder, no base64',
    input: {
      content: [{ type: 'image', data: PNG, mimeType: 'image/png' }],
      structuredContent: { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] }
    },
    text: '[image image/png 1234 bytes]'
  },
  {
    name: 'audio with structuredContent: only the placeholder',
    input: { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }], structuredContent: { seconds: 1 } },
    text: '[audio audio/wav 10 bytes]'
  },
  {
    name: 'a blob resource with structuredContent: only the placeholder',
    input: { content: [{ type: 'resource', resource: { uri: 'file:///b.bin', blob: PNG } }], structuredContent: { blob: PNG } },
    text: '[resource file:///b.bin]'
  },
  {
    name: 'base64 payloads inside rendered structuredContent become placeholders',
    input: { content: [], structuredContent: { name: 'a.png', data: PNG, preview: `data:image/png;base64,${WAV}`, id: 'abc123' } },
    text: '{"name":"a.png","data":"[base64 1234 bytes]","preview":"[data image/png 10 bytes]","id":"abc123"}'
  },
  {
    name: 'long strings that are words, JSON or URLs stay as they are',
    input: { content: [], structuredContent: { prose: 'word '.repeat(100), url: `https://example.com/${'a'.repeat(300)}?q=1` } },
    text: JSON.stringify({ prose: 'word '.repeat(100), url: `https://example.com/${'a'.repeat(300)}?q=1` })
  },
  { name: 'structuredContent ignored when there is text', input: { content: [{ type: 'text', text: '3' }], structuredContent: { sum: 3 } }, text: '3' },
  { name: "the tool's isError is kept", input: { content: [{ type: 'text', text: 'nope' }], isError: true }, text: 'nope', isError: true },
  { name: 'empty result is an empty string', input: { content: [] }, text: '' },
  { name: 'missing content is tolerated', input: {}, text: '' },
  { name: 'legacy toolResult string', input: { toolResult: 'old' }, text: 'old' },
  { name: 'legacy toolResult object as JSON', input: { toolResult: { a: 1 } }, text: '{"a":1}' },
  { name: 'unknown item type becomes [type]', input: { content: [{ type: 'video', uri: 'x' }] }, text: '[video]' },
  { name: 'image without data counts 0 bytes', input: { content: [{ type: 'image', mimeType: 'image/png' }] }, text: '[image image/png 0 bytes]' }
]

for (const c of cases) {
  test(`flattenCallToolResult: ${c.name}`, () => {
    const out = flattenCallToolResult(c.input)
    assert.equal(out.text, c.text)
    assert.equal(out.isError, c.isError ?? false)
  })
}

test('flattenCallToolResult: trace carries the raw content and structuredContent', () => {
  const content = [{ type: 'text', text: 'x' }, { type: 'image', data: PNG, mimeType: 'image/png' }]
  const out = flattenCallToolResult({ content, structuredContent: { k: 'v' } })
  assert.deepEqual(out.trace, { content, structuredContent: { k: 'v' } })
  assert.equal('structuredContent' in flattenCallToolResult({ content }).trace, false)
})

test('flattenCallToolResult: each call returns its own trace object', () => {
  const input = { content: [{ type: 'text', text: 'x' }] }
  assert.notEqual(flattenCallToolResult(input).trace, flattenCallToolResult(input).trace)
})
