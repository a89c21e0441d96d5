import { test } from 'node:test'
import assert from 'node:assert/strict'
import { parsePatch } from '../../../../src/builtin/apply-patch/parser.js'
import type { Hunk, UpdateChunk } from '../../../../src/builtin/apply-patch/parser.js'

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
