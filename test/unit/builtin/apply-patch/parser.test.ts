import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parsePatch } from '../../../../src/builtin/apply-patch/parser.js'
import type { Hunk, UpdateChunk } from '../../../../src/builtin/apply-patch/parser.js'
import { normalisePunctuation, seekSequence } from '../../../../src/builtin/apply-patch/seek-sequence.js'
import { applyChunks } from '../../../../src/builtin/apply-patch/apply.js'

function hunks (text: string): Hunk[] {
  const r = parsePatch(text)
  if (!r.ok) assert.fail(`unexpected parse error: ${r.message}`)
  return r.hunks
}

function parseError (text: string): string {
  const r = parsePatch(text)
  if (r.ok) assert.fail('expected a parse error')
  return r.message
}

function chunksOf (text: string): UpdateChunk[] {
  const [h] = hunks(text)
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

test('parser: add, delete, update with move and context', () => {
  const out = hunks([
    '*** Begin Patch',
    '*** Add File: path/add.py',
    '+abc',
    '+def',
    '*** Delete File: path/delete.py',
    '*** Update File: path/update.py',
    '*** Move to: path/update2.py',
    '@@ def f():',
    '-    pass',
    '+    return 123',
    '*** End Patch'
  ].join('\n'))
  assert.deepEqual(out, [
    { type: 'add', path: 'path/add.py', contents: 'abc\ndef\n', lineCount: 2 },
    { type: 'delete', path: 'path/delete.py' },
    {
      type: 'update',
      path: 'path/update.py',
      movePath: 'path/update2.py',
      chunks: [{ changeContext: 'def f():', oldLines: ['    pass'], newLines: ['    return 123'], isEndOfFile: false, added: 1, removed: 1 }]
    }
  ])
})

test('parser: first chunk may omit @@, later chunks need it', () => {
  const chunks = chunksOf('*** Begin Patch\n*** Update File: f\n import foo\n+bar\n@@ ctx\n-c\n+d\n*** End Patch')
  assert.deepEqual(chunks, [
    { changeContext: undefined, oldLines: ['import foo'], newLines: ['import foo', 'bar'], isEndOfFile: false, added: 1, removed: 0 },
    { changeContext: 'ctx', oldLines: ['c'], newLines: ['d'], isEndOfFile: false, added: 1, removed: 1 }
  ])
  assert.equal(
    parseError('*** Begin Patch\n*** Update File: f\n@@\n-a\nx\n*** End Patch'),
    "invalid hunk at line 5, Expected update hunk to start with a @@ context marker, got: 'x'"
  )
})

test('parser: an empty line inside a chunk is an empty context line', () => {
  const chunks = chunksOf('*** Begin Patch\n*** Update File: f\n@@\n a\n\n-b\n+c\n*** End Patch')
  assert.deepEqual(chunks[0]?.oldLines, ['a', '', 'b'])
  assert.deepEqual(chunks[0]?.newLines, ['a', '', 'c'])
})

test('parser: End of File marks the chunk, and cannot be the first line of a chunk', () => {
  const chunks = chunksOf('*** Begin Patch\n*** Update File: f\n@@\n-a\n+b\n*** End of File\n*** End Patch')
  assert.equal(chunks[0]?.isEndOfFile, true)
  assert.equal(
    parseError('*** Begin Patch\n*** Update File: f\n@@\n*** End of File\n*** End Patch'),
    'invalid hunk at line 4, Update hunk does not contain any lines'
  )
})

test('parser: envelope errors keep Codex wording', () => {
  assert.equal(parseError('bad'), "invalid patch: The first line of the patch must be '*** Begin Patch'")
  assert.equal(parseError(''), "invalid patch: The first line of the patch must be '*** Begin Patch'")
  assert.equal(parseError('*** Begin Patch\nbad'), "invalid patch: The last line of the patch must be '*** End Patch'")
  assert.equal(parseError('*** Begin Patch'), "invalid patch: The last line of the patch must be '*** End Patch'")
})

test('parser: invalid hunk header and empty update hunk keep Codex wording', () => {
  assert.equal(
    parseError('*** Begin Patch\n*** Frobnicate File: foo\n*** End Patch'),
    "invalid hunk at line 2, '*** Frobnicate File: foo' is not a valid hunk header. Valid hunk headers: '*** Add File: {path}', '*** Delete File: {path}', '*** Update File: {path}'"
  )
  assert.equal(
    parseError('*** Begin Patch\n*** Update File: test.py\n*** End Patch'),
    "invalid hunk at line 2, Update file hunk for path 'test.py' is empty"
  )
  assert.match(
    parseError('*** Begin Patch\n*** Update File: f\n@@\n*** Add File: g\n+x\n*** End Patch'),
    /Unexpected line found in update hunk: '\*\*\* Add File: g'/
  )
})

test('parser: empty patch parses to no hunks (rejected when applied)', () => {
  assert.deepEqual(hunks('*** Begin Patch\n*** End Patch'), [])
})

test('parser: input trimmed, markers and headers whitespace-padded, CRLF patch text', () => {
  const out = hunks('\n\n  *** Begin Patch \r\n   *** Add File: a.txt  \r\n+x\r\n *** End Patch  \n\n')
  assert.deepEqual(out, [{ type: 'add', path: 'a.txt', contents: 'x\n', lineCount: 1 }])
  const moved = hunks('*** Begin Patch\n*** Update File: a\n  *** Move to: b \n@@\n-x\n+y\n*** End Patch')
  assert.equal(moved[0]?.type === 'update' ? moved[0].movePath : undefined, 'b')
})

test('parser: heredoc wrapper tolerated', () => {
  for (const open of ["<<'EOF'", '<<EOF', '<<"EOF"', "apply_patch <<'EOF'"]) {
    const out = hunks(`${open}\n*** Begin Patch\n*** Delete File: a\n*** End Patch\nEOF\n`)
    assert.deepEqual(out, [{ type: 'delete', path: 'a' }], open)
  }
  // Too short to hold a patch: reported as the original envelope error.
  assert.match(parseError("<<'EOF'\n*** Begin Patch\nEOF"), /first line of the patch/)
  // A heredoc whose inner text lacks the end marker reports the inner error.
  assert.match(parseError("<<'EOF'\n*** Begin Patch\n*** Delete File: a\nEOF"), /last line of the patch/)
})

test('parser: blank lines between hunks are skipped; add lines stop at the first non-+ line', () => {
  const out = hunks('*** Begin Patch\n*** Add File: a\n+1\n+\n\n*** Delete File: b\n*** End Patch')
  assert.deepEqual(out, [
    { type: 'add', path: 'a', contents: '1\n\n', lineCount: 2 },
    { type: 'delete', path: 'b' }
  ])
  assert.match(parseError('*** Begin Patch\n*** Add File: a\n+1\nstray\n*** End Patch'), /'stray' is not a valid hunk header/)
})

test('parser: an Add File with no lines creates an empty file (Codex)', () => {
  assert.deepEqual(hunks('*** Begin Patch\n*** Add File: a\n*** End Patch'), [{ type: 'add', path: 'a', contents: '', lineCount: 0 }])
})

test('parser: "@@" with only trailing spaces is a bare @@', () => {
  const chunks = chunksOf('*** Begin Patch\n*** Update File: f\n@@   \n-a\n+b\n*** End Patch')
  assert.equal(chunks[0]?.changeContext, undefined)
})

test('seekSequence: four passes in order, from the cursor', () => {
  assert.equal(seekSequence(['foo', 'bar', 'baz'], ['bar', 'baz'], 0, false), 1)
  assert.equal(seekSequence(['foo   ', 'bar\t\t'], ['foo', 'bar'], 0, false), 0)
  assert.equal(seekSequence(['    foo   ', '   bar\t'], ['foo', 'bar'], 0, false), 0)
  assert.equal(seekSequence(['just one line'], ['too', 'many', 'lines'], 0, false), -1)
  assert.equal(seekSequence(['a', 'b', 'a'], ['a'], 1, false), 2)
  assert.equal(seekSequence(['a', 'b'], [], 1, false), 1)
  // An exact match later in the file wins over a fuzzy match earlier.
  assert.equal(seekSequence(['x ', 'x'], ['x'], 0, false), 1)
  // End of file: only a match ending at the last line counts.
  assert.equal(seekSequence(['a', 'b', 'a'], ['a'], 0, true), 2)
  assert.equal(seekSequence(['a', 'b'], ['a'], 0, true), -1)
})

test('seekSequence: Unicode punctuation folded in the last pass', () => {
  assert.equal(normalisePunctuation('\u201Chi\u201D \u2014 it\u2019s\u00A0ok'), '"hi" - it\'s ok')
  assert.equal(seekSequence(['const s = \u201Cx\u201D \u2013 1'], ['const s = "x" - 1'], 0, false), 0)
  assert.equal(seekSequence(['a\u2003b'], ['a b'], 0, false), 0)
  assert.equal(seekSequence(['a\u2003b'], ['a  b'], 0, false), -1)
})

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
