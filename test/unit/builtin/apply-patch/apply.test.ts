import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parsePatch } from '../../../../src/builtin/apply-patch/parser.js'
import type { UpdateChunk } from '../../../../src/builtin/apply-patch/parser.js'
import { applyChunks } from '../../../../src/builtin/apply-patch/apply.js'

/** The chunks of a patch's single Update File hunk. */
function chunksOf (text: string): UpdateChunk[] {
  const r = parsePatch(text)
  if (!r.ok) assert.fail(`unexpected parse error: ${r.message}`)
  const [h] = r.hunks
  if (h?.type !== 'update') assert.fail('expected an update hunk')
  return h.chunks
}

function apply (original: string, patchBody: string): string {
  const r = applyChunks(original, chunksOf(`*** Begin Patch\n*** Update File: f\n${patchBody}\n*** End Patch`), 'f')
  if (!r.ok) assert.fail(r.message)
  return r.content
}

function applyError (original: string, patchBody: string): string {
  const r = applyChunks(original, chunksOf(`*** Begin Patch\n*** Update File: f\n${patchBody}\n*** End Patch`), 'f')
  if (r.ok) assert.fail('expected a failure')
  return r.message
}

test('apply: replaces, keeps untouched lines, multiple chunks in order', () => {
  assert.equal(apply('line1\nline2\nline3\nline4\n', '@@\n-line2\n+changed2\n@@\n-line4\n+changed4'), 'line1\nchanged2\nline3\nchanged4\n')
  assert.equal(applyError('a\nb\n', '@@\n-b\n+B\n@@\n-a\n+A'), 'Failed to find expected lines in f:\na')
})

test('apply: pure addition goes to the end, before a final blank line', () => {
  assert.equal(apply('l1\nl2\n', '@@\n+a1\n+a2'), 'l1\nl2\na1\na2\n')
  assert.equal(apply('l1\n\n', '@@\n+a1'), 'l1\na1\n\n')
  assert.equal(apply('', '@@\n+a1'), 'a1\n')
})

test('apply: CRLF is kept, new lines get CRLF too', () => {
  assert.equal(apply('a\r\nb\r\nc\r\n', '@@\n a\n-b\n+B\n+B2'), 'a\r\nB\r\nB2\r\nc\r\n')
  // Mixed endings: untouched lines keep their own; new lines get the dominant one.
  assert.equal(apply('a\r\nb\r\nc\nd\r\n', '@@\n-d\n+D'), 'a\r\nb\r\nc\nD\r\n')
})

test('apply: a missing final newline stays missing', () => {
  assert.equal(apply('a\nb', '@@\n-b\n+B'), 'a\nB')
  assert.equal(apply('a\nb', '@@\n+c'), 'a\nb\nc')
  assert.equal(apply('a\r\nb', '@@\n-a\n+A'), 'A\r\nb')
  assert.equal(apply('a\nb\n', '@@\n-b\n+B'), 'a\nB\n')
})

test('apply: a UTF-8 BOM is kept and does not break the first line match', () => {
  assert.equal(apply('\uFEFFa\nb\n', '@@\n-a\n+A'), '\uFEFFA\nb\n')
})

test('apply: @@ context locates the right one of repeated blocks', () => {
  const original = 'function one() {\n  return 1\n}\nfunction two() {\n  return 1\n}\n'
  assert.equal(apply(original, '@@ function two() {\n-  return 1\n+  return 2'), 'function one() {\n  return 1\n}\nfunction two() {\n  return 2\n}\n')
  assert.equal(applyError(original, '@@ function three() {\n-  return 1\n+  return 3'), "Failed to find context 'function three() {' in f")
})

test('apply: End of File anchors at the last lines', () => {
  assert.equal(apply('x\ny\nx\n', '@@\n-x\n+X\n*** End of File'), 'x\ny\nX\n')
  assert.equal(apply('first\nsecond\n', '@@\n first\n-second\n+second updated\n*** End of File'), 'first\nsecond updated\n')
  assert.match(applyError('x\ny\n', '@@\n-x\n+X\n*** End of File'), /Failed to find expected lines in f/)
})

test('apply: a trailing empty old line is retried without it', () => {
  // The blank line before *** End Patch is a context line that the file does not have.
  assert.equal(apply('a\nb\n', '@@\n-b\n+B\n'), 'a\nB\n')
})

test('apply: whitespace-insensitive passes and Unicode folding', () => {
  assert.equal(apply('  indented  \nnext\n', '@@\n-indented\n+fixed'), 'fixed\nnext\n')
  assert.equal(apply('say(\u201Chi\u201D) \u2014 ok\n', '@@\n-say("hi") - ok\n+say("bye")'), 'say("bye")\n')
})

test('apply: deletion only, deleting everything', () => {
  assert.equal(apply('line1\nline2\nline3\n', '@@\n line1\n-line2\n line3'), 'line1\nline3\n')
  assert.equal(apply('only\n', '@@\n-only'), '')
})

test('apply: overlapping chunks are refused', () => {
  assert.match(applyError('a\nb\n', '@@\n-a\n-b\n+c\n@@\n-b\n+d\n*** End of File'), /Chunks overlap in f/)
})

test('apply: 1,000-line file with many chunks', () => {
  const lines = Array.from({ length: 1000 }, (_, i) => `line ${i}`)
  const body = Array.from({ length: 50 }, (_, k) => `@@\n line ${k * 20}\n-line ${k * 20 + 1}\n+LINE ${k * 20 + 1}`).join('\n')
  const out = apply(lines.join('\n') + '\n', body).split('\n')
  assert.equal(out.length, 1001)
  assert.equal(out[1], 'LINE 1')
  assert.equal(out[981], 'LINE 981')
  assert.equal(out[982], 'line 982')
})

test('apply: many chunks in a large file cost work in proportion to them; a patch too costly to place is refused, not run', { timeout: 120_000 }, () => {
  // 20,000 chunks, each changing the next line of a 1,000,000-line file: each seek used to copy the
  // rest of the file once per pass (2e10 line copies, minutes on the event loop); now found in place.
  const lines = Array.from({ length: 1_000_000 }, (_v, i) => `line ${i}`)
  const body = Array.from({ length: 20_000 }, (_v, i) => `@@\n-line ${i * 50}\n+LINE ${i * 50}`).join('\n')
  const out = apply(lines.join('\n') + '\n', body)
  assert.ok(out.startsWith('LINE 0\nline 1\n') && out.includes('\nLINE 999950\nline 999951\n'))
  // Each of 2,000 chunks found only by the whitespace-insensitive pass, after the exact pass scanned
  // the rest of the file for it: file x chunks line comparisons. Refused past the budget, saying why.
  const spaced = Array.from({ length: 2_000 }, (_v, i) => `@@\n-line ${i * 50} \n+LINE ${i * 50}`).join('\n')
  const refused = applyError(lines.join('\n') + '\n', spaced)
  assert.match(refused, /^The patch takes more than \d+ line comparisons to place in f \(1000000 lines\): split it, or give exact context lines$/)
})
