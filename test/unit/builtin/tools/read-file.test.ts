import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, open, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { clearLineIndexCache, lineIndexCacheInfo, readFileTool } from '../../../../src/builtin/tools/read-file.js'
import { assertClosedSchema, toolError, toolWorkspace } from '../../../helpers/tool-workspace.js'

test('schema is a closed object with the AI4J parameter names', () => {
  assertClosedSchema(readFileTool, ['path', 'startLine', 'endLine', 'maxChars'])
})

test('read_file returns a line range', async (t) => {
  const { root, run } = await toolWorkspace(t)
  await writeFile(path.join(root, 'a.txt'), 'l1\nl2\r\nl3\nl4\n')
  assert.deepEqual(await run(readFileTool, { path: 'a.txt' }), { path: 'a.txt', content: 'l1\nl2\nl3\nl4', startLine: 1, endLine: 4, truncated: false })
  assert.deepEqual(
    await run(readFileTool, { path: 'a.txt', startLine: 2, endLine: 3 }),
    { path: 'a.txt', content: 'l2\nl3', startLine: 2, endLine: 3, truncated: false }
  )
  assert.deepEqual(
    await run(readFileTool, { path: 'a.txt', startLine: 4, endLine: 99 }),
    { path: 'a.txt', content: 'l4', startLine: 4, endLine: 4, truncated: false }
  )
  await toolError(run(readFileTool, { path: 'a.txt', startLine: 3, endLine: 2 }), /endLine/)
})

test('read_file cuts at maxChars, capped by the workspace limit', async (t) => {
  const { root, ws, run } = await toolWorkspace(t)
  await writeFile(path.join(root, 'a.txt'), 'abcdef\nghijkl\n')
  assert.deepEqual(await run(readFileTool, { path: 'a.txt', maxChars: 9 }), { path: 'a.txt', content: 'abcdef\ngh', startLine: 1, endLine: 2, truncated: true })
  ws.limits.readMaxChars = 3
  const r = await run(readFileTool, { path: 'a.txt', maxChars: 100 })
  assert.equal(r.content, 'abc')
  assert.equal(r.truncated, true)
})

test('read_file errors: missing, directory, binary', async (t) => {
  const { root, run } = await toolWorkspace(t)
  await toolError(run(readFileTool, { path: 'nope.txt' }), /^File does not exist: nope.txt$/)
  await mkdir(path.join(root, 'd'))
  await toolError(run(readFileTool, { path: 'd' }), /^Path is a directory: d$/)
  await writeFile(path.join(root, 'b.bin'), Buffer.from([0x41, 0x00, 0x42]))
  await toolError(run(readFileTool, { path: 'b.bin' }), /binary/)
})

test('read_file streams: a slice of a 2 GiB sparse file', async (t) => {
  const { root, run } = await toolWorkspace(t)
  const file = path.join(root, 'huge.log')
  // 20 KB of real lines first, so the binary sniff (first 8 KiB) sees text.
  const head = Array.from({ length: 1000 }, (_, i) => `line ${String(i + 1).padStart(6, '0')} ok`).join('\n') + '\n'
  await writeFile(file, head)
  const fh = await open(file, 'r+')
  await fh.truncate(2 * 1024 * 1024 * 1024)
  await fh.close()
  const r = await run(readFileTool, { path: 'huge.log', startLine: 10, endLine: 12 })
  assert.deepEqual(r, { path: 'huge.log', content: 'line 000010 ok\nline 000011 ok\nline 000012 ok', startLine: 10, endLine: 12, truncated: false })
  // Without endLine the read must stop at maxChars: the 2 GiB tail (one NUL "line") cannot
  // even be held in a JS string, so a correct result proves the file was not read whole.
  const all = await run(readFileTool, { path: 'huge.log', startLine: 990 })
  assert.equal(all.truncated, true)
  assert.equal((all.content as string).length, 12000)
  assert.ok((all.content as string).startsWith('line 000990 ok\n'))
  assert.equal(all.endLine, 1001)
})

/** What read_file must return, computed the slow obvious way: decode everything, split, slice. */
function expectedSlice (bytes: Buffer, start: number, end: number, limit: number): { content: string, endLine: number, truncated: boolean } {
  const lines = bytes.toString('utf8').split('\n')
  if (lines[lines.length - 1] === '') lines.pop()
  const picked = lines.slice(start - 1, end).map((l) => (l.endsWith('\r') ? l.slice(0, -1) : l))
  const full = picked.join('\n')
  if (full.length <= limit) return { content: full, endLine: start - 1 + picked.length, truncated: false }
  let content = full.slice(0, limit)
  if (/[\ud800-\udbff]$/.test(content)) content = content.slice(0, -1)
  return { content, endLine: start + (full.slice(0, limit).split('\n').length - 1), truncated: true }
}

test('read_file deep in a file: line counting over raw bytes, multi-byte text, CRLF, invalid UTF-8, past the end', async (t) => {
  const { root, run } = await toolWorkspace(t)
  const parts: Buffer[] = []
  for (let i = 1; i <= 150_000; i++) {
    parts.push(Buffer.from(`${i} ${'é😀'.repeat(i % 5)}${i % 7 === 0 ? '\r' : ''}`))
    // Invalid bytes right before some newlines: they must not swallow the '\n'.
    if (i % 1000 === 0) parts.push(Buffer.from([0xe2, 0x82]))
    parts.push(Buffer.from('\n'))
  }
  parts.push(Buffer.from('last line, no newline'))
  const bytes = Buffer.concat(parts)
  await writeFile(path.join(root, 'deep.txt'), bytes)
  for (const [start, end] of [
    [2, 3], [999, 1002], [65_536, 65_540], [65_537, 65_537], [131_073, 131_080], [149_999, 150_010], [150_001, 150_001],
    [150_002, 150_002], [200_000, 200_001]
  ] as const) {
    const r = await run(readFileTool, { path: 'deep.txt', startLine: start, endLine: end })
    assert.deepEqual(r, { path: 'deep.txt', startLine: start, ...expectedSlice(bytes, start, end, 12000) }, `${start}-${end}`)
  }
  const open = await run(readFileTool, { path: 'deep.txt', startLine: 140_000, maxChars: 5000 })
  assert.deepEqual(open, { path: 'deep.txt', startLine: 140_000, ...expectedSlice(bytes, 140_000, Infinity, 5000) })
})

test('read_file line-offset index: repeated deep reads agree with a cold read, a rewrite invalidates it, memory is bounded', async (t) => {
  const { root, run } = await toolWorkspace(t)
  clearLineIndexCache()
  t.after(() => clearLineIndexCache())
  const make = (prefix: string): Buffer => Buffer.from(Array.from({ length: 300_000 }, (_, i) => `${prefix}${i + 1}${'.'.repeat(i % 11)}`).join('\n') + '\n')
  const v1 = make('L')
  await writeFile(path.join(root, 'log.txt'), v1)
  const small = Buffer.from('a\n'.repeat(70_000))
  for (let i = 0; i < 33; i++) await writeFile(path.join(root, `small${i}.txt`), small)
  // Files changed within the last second are not indexed (coarse timestamps): let it settle.
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const starts = [299_990, 65_537, 131_072, 196_609, 250_000, 2, 300_000, 300_001]
  const cold: unknown[] = []
  for (const s of starts) cold.push(await run(readFileTool, { path: 'log.txt', startLine: s, endLine: s + 3 }))
  // One checkpoint per 65,536 lines scanned: lines 1, 65537, 131073, 196609, 262145.
  assert.deepEqual(lineIndexCacheInfo(), { files: 1, checkpoints: 5 })
  for (const [i, s] of starts.entries()) {
    assert.deepEqual(cold[i], { path: 'log.txt', startLine: s, ...expectedSlice(v1, s, s + 3, 12000) })
    assert.deepEqual(await run(readFileTool, { path: 'log.txt', startLine: s, endLine: s + 3 }), cold[i], String(s))
  }
  // Same size, lines shifted by one byte: the old offsets would now land mid-line.
  const v2 = Buffer.concat([Buffer.from('M'), make('L').subarray(0, v1.length - 1)])
  assert.equal(v2.length, v1.length)
  await writeFile(path.join(root, 'log.txt'), v2)
  for (const s of [299_990, 65_537, 131_072]) {
    assert.deepEqual(
      await run(readFileTool, { path: 'log.txt', startLine: s, endLine: s + 3 }),
      { path: 'log.txt', startLine: s, ...expectedSlice(v2, s, s + 3, 12000) }
    )
  }
  // Just rewritten: the stale entry is gone and the new content is not indexed yet.
  assert.deepEqual(lineIndexCacheInfo(), { files: 0, checkpoints: 0 })
  // At most 32 files are indexed; the least recently used goes first.
  for (let i = 0; i < 33; i++) assert.equal((await run(readFileTool, { path: `small${i}.txt`, startLine: 70_000 })).content, 'a')
  assert.deepEqual(lineIndexCacheInfo(), { files: 32, checkpoints: 64 })
})

test('read_file ends at a short read that reaches the file\'s size: the last line, a cut character and the chunk boundaries are all there', async (t) => {
  const { root, ws, run } = await toolWorkspace(t)
  ws.limits.readMaxChars = 200_000
  const chunk = 64 * 1024
  const line = (n: number): string => `${String(n).padStart(6, '0')} ${'x'.repeat(56)}\n`
  const body = (bytes: number): Buffer => Buffer.from(Array.from({ length: Math.ceil(bytes / 64) }, (_, i) => line(i)).join('').slice(0, bytes))
  const cases: Record<string, Buffer> = {
    empty: Buffer.alloc(0),
    'no-newline': Buffer.from('a\r\nb\nlast, no newline'),
    // An incomplete UTF-8 sequence at the very end is U+FFFD, as a decoder's end gives it.
    'cut-character': Buffer.concat([Buffer.from('é\nend '), Buffer.from([0xe2, 0x82])]),
    'one-chunk': body(chunk),
    'one-chunk-and-a-byte': Buffer.concat([body(chunk), Buffer.from('z')]),
    'two-chunks-less-a-byte': body(2 * chunk - 1)
  }
  for (const [name, bytes] of Object.entries(cases)) {
    await writeFile(path.join(root, name), bytes)
    const r = await run(readFileTool, { path: name, maxChars: 200_000 })
    assert.deepEqual(r, { path: name, startLine: 1, ...expectedSlice(bytes, 1, Infinity, 200_000) }, name)
  }
  assert.match(String((await run(readFileTool, { path: 'cut-character' })).content), /end \ufffd$/)
})
