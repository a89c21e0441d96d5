import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, mkdtemp, open, readFile, realpath, rm, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { clearLineIndexCache, lineIndexCacheInfo, readFileTool } from '../../src/builtin/tools/read-file.js'
import { writeFileTool } from '../../src/builtin/tools/write-file.js'
import { editTool } from '../../src/builtin/tools/edit.js'
import { updateAgentsMdTool } from '../../src/builtin/tools/update-agents-md.js'
import { ToolError } from '../../src/builtin/types.js'
import type { BuiltinTool, Workspace } from '../../src/builtin/types.js'

const LIMITS = { readMaxChars: 12000, commandTimeoutMs: 30000, bashLogChars: 12000, maxProcessOutputChars: 120000, outputMaxChars: 100000 }

async function setup (t: { after: (fn: () => Promise<void>) => void }) {
  const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), 'tg-ft-')))
  t.after(() => rm(dir, { recursive: true, force: true }))
  const root = path.join(dir, 'root')
  await mkdir(root)
  const ws: Workspace = { tenant: 't', workspaceId: 'default', root, readRoots: [], limits: { ...LIMITS } }
  const run = (tool: BuiltinTool, args: Record<string, unknown>) => tool.run(args, { workspace: ws, signal: new AbortController().signal }) as Promise<Record<string, unknown>>
  return { dir, root, ws, run }
}

async function toolError (p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (err: unknown) => {
    assert.ok(err instanceof ToolError, `expected ToolError, got ${String(err)}`)
    assert.match(err.message, re)
    return true
  })
}

test('schemas are closed objects with the AI4J parameter names', () => {
  const expected: Record<string, string[]> = {
    read_file: ['path', 'startLine', 'endLine', 'maxChars'],
    write_file: ['path', 'content', 'mode'],
    edit: ['path', 'old_string', 'new_string', 'replaceAll'],
    update_agents_md: ['action', 'content', 'text']
  }
  for (const tool of [readFileTool, writeFileTool, editTool, updateAgentsMdTool]) {
    const s = tool.inputSchema as { type: string, properties: Record<string, { description?: string }>, additionalProperties: boolean }
    assert.equal(s.type, 'object')
    assert.equal(s.additionalProperties, false)
    assert.deepEqual(Object.keys(s.properties), expected[tool.name])
    for (const p of Object.values(s.properties)) assert.ok((p.description ?? '').length > 10)
  }
})

test('read_file returns a line range', async (t) => {
  const { root, run } = await setup(t)
  await writeFile(path.join(root, 'a.txt'), 'l1\nl2\r\nl3\nl4\n')
  assert.deepEqual(await run(readFileTool, { path: 'a.txt' }), { path: 'a.txt', content: 'l1\nl2\nl3\nl4', startLine: 1, endLine: 4, truncated: false })
  assert.deepEqual(await run(readFileTool, { path: 'a.txt', startLine: 2, endLine: 3 }), { path: 'a.txt', content: 'l2\nl3', startLine: 2, endLine: 3, truncated: false })
  assert.deepEqual(await run(readFileTool, { path: 'a.txt', startLine: 4, endLine: 99 }), { path: 'a.txt', content: 'l4', startLine: 4, endLine: 4, truncated: false })
  await toolError(run(readFileTool, { path: 'a.txt', startLine: 3, endLine: 2 }), /endLine/)
})

test('read_file cuts at maxChars, capped by the workspace limit', async (t) => {
  const { root, ws, run } = await setup(t)
  await writeFile(path.join(root, 'a.txt'), 'abcdef\nghijkl\n')
  assert.deepEqual(await run(readFileTool, { path: 'a.txt', maxChars: 9 }), { path: 'a.txt', content: 'abcdef\ngh', startLine: 1, endLine: 2, truncated: true })
  ws.limits.readMaxChars = 3
  const r = await run(readFileTool, { path: 'a.txt', maxChars: 100 })
  assert.equal(r.content, 'abc')
  assert.equal(r.truncated, true)
})

test('read_file errors: missing, directory, binary', async (t) => {
  const { root, run } = await setup(t)
  await toolError(run(readFileTool, { path: 'nope.txt' }), /^File does not exist: nope.txt$/)
  await mkdir(path.join(root, 'd'))
  await toolError(run(readFileTool, { path: 'd' }), /^Path is a directory: d$/)
  await writeFile(path.join(root, 'b.bin'), Buffer.from([0x41, 0x00, 0x42]))
  await toolError(run(readFileTool, { path: 'b.bin' }), /binary/)
})

test('read_file streams: a slice of a 2 GiB sparse file', async (t) => {
  const { root, run } = await setup(t)
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

test('write_file modes', async (t) => {
  const { root, run } = await setup(t)
  assert.deepEqual(await run(writeFileTool, { path: 'n/a.txt', content: 'hi', mode: 'create' }), { path: 'n/a.txt', mode: 'create', created: true, appended: false, bytesWritten: 2 })
  await toolError(run(writeFileTool, { path: 'n/a.txt', content: 'x', mode: 'create' }), /^File already exists: n\/a.txt$/)
  assert.deepEqual(await run(writeFileTool, { path: 'n/a.txt', content: '!', mode: 'append' }), { path: 'n/a.txt', mode: 'append', created: false, appended: true, bytesWritten: 1 })
  assert.equal(await readFile(path.join(root, 'n/a.txt'), 'utf8'), 'hi!')
  const r = await run(writeFileTool, { path: 'n/a.txt', content: 'new' })
  assert.equal(r.mode, 'overwrite')
  assert.equal(r.created, false)
  assert.ok(!('resolvedPath' in r))
  assert.equal(await readFile(path.join(root, 'n/a.txt'), 'utf8'), 'new')
  await mkdir(path.join(root, 'dir'))
  await toolError(run(writeFileTool, { path: 'dir', content: 'x' }), /Path is a directory: dir/)
  await toolError(run(writeFileTool, { path: 'x', content: 'x', mode: 'bogus' }), /mode/)
})

test('edit: unique literal replacement, $& stays literal', async (t) => {
  const { root, run } = await setup(t)
  await writeFile(path.join(root, 'e.ts'), 'const a = 1\nconst b = 2\n')
  assert.deepEqual(await run(editTool, { path: 'e.ts', old_string: 'a = 1', new_string: "a = '$&$1$$'" }), { path: 'e.ts', replacements: 1 })
  assert.equal(await readFile(path.join(root, 'e.ts'), 'utf8'), "const a = '$&$1$$'\nconst b = 2\n")
})

test('edit: errors keep AI4J wording', async (t) => {
  const { root, run } = await setup(t)
  await writeFile(path.join(root, 'e.txt'), 'x x x\n')
  await toolError(run(editTool, { path: 'e.txt', old_string: 'y', new_string: 'z' }), /^old_string not found in file: e.txt. Ensure whitespace and indentation match exactly.$/)
  await toolError(run(editTool, { path: 'e.txt', old_string: 'x', new_string: 'z' }), /^old_string is not unique — found 3 occurrences in e.txt. Provide more context or set replaceAll=true$/)
  await toolError(run(editTool, { path: 'e.txt', old_string: '', new_string: 'z' }), /must not be empty/)
  await toolError(run(editTool, { path: 'e.txt', old_string: 'x', new_string: 'x' }), /must be different/)
  await toolError(run(editTool, { path: 'missing.txt', old_string: 'x', new_string: 'y' }), /^File does not exist: missing.txt$/)
  assert.deepEqual(await run(editTool, { path: 'e.txt', old_string: 'x', new_string: 'yy', replaceAll: true }), { path: 'e.txt', replacements: 3 })
  assert.equal(await readFile(path.join(root, 'e.txt'), 'utf8'), 'yy yy yy\n')
})

test('edit keeps CRLF line endings and a BOM', async (t) => {
  const { root, run } = await setup(t)
  await writeFile(path.join(root, 'w.txt'), '\uFEFFone\r\ntwo\r\nthree\r\n')
  await run(editTool, { path: 'w.txt', old_string: 'one\ntwo', new_string: 'uno\ndos' })
  assert.equal(await readFile(path.join(root, 'w.txt'), 'utf8'), '\uFEFFuno\r\ndos\r\nthree\r\n')
})

test('update_agents_md read/write/append with cap', async (t) => {
  const { root, run } = await setup(t)
  assert.deepEqual(await run(updateAgentsMdTool, { action: 'read' }), { action: 'read', path: 'AGENTS.md', exists: false, content: '' })
  await run(updateAgentsMdTool, { action: 'write', content: '# Rules' })
  await run(updateAgentsMdTool, { action: 'append', text: '- be nice\n' })
  assert.equal(await readFile(path.join(root, 'AGENTS.md'), 'utf8'), '# Rules\n- be nice\n')
  await run(updateAgentsMdTool, { action: 'append', text: '- no sep needed' })
  assert.deepEqual(await run(updateAgentsMdTool, { action: 'read' }), { action: 'read', path: 'AGENTS.md', exists: true, content: '# Rules\n- be nice\n- no sep needed' })
  await toolError(run(updateAgentsMdTool, { action: 'write', content: 'x'.repeat(32 * 1024 + 1) }), /cap/)
  await toolError(run(updateAgentsMdTool, { action: 'append', text: 'x'.repeat(32 * 1024) }), /cap/)
  await toolError(run(updateAgentsMdTool, { action: 'write' }), /content is required/)
})

test('update_agents_md uses .agents/AGENTS.md when only that exists', async (t) => {
  const { root, run } = await setup(t)
  await mkdir(path.join(root, '.agents'))
  await writeFile(path.join(root, '.agents', 'AGENTS.md'), 'nested')
  assert.deepEqual(await run(updateAgentsMdTool, { action: 'read' }), { action: 'read', path: '.agents/AGENTS.md', exists: true, content: 'nested' })
  await run(updateAgentsMdTool, { action: 'append', text: 'more' })
  assert.equal(await readFile(path.join(root, '.agents', 'AGENTS.md'), 'utf8'), 'nested\nmore')
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
  const { root, run } = await setup(t)
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
  for (const [start, end] of [[2, 3], [999, 1002], [65_536, 65_540], [65_537, 65_537], [131_073, 131_080], [149_999, 150_010], [150_001, 150_001], [150_002, 150_002], [200_000, 200_001]] as const) {
    const r = await run(readFileTool, { path: 'deep.txt', startLine: start, endLine: end })
    assert.deepEqual(r, { path: 'deep.txt', startLine: start, ...expectedSlice(bytes, start, end, 12000) }, `${start}-${end}`)
  }
  const open = await run(readFileTool, { path: 'deep.txt', startLine: 140_000, maxChars: 5000 })
  assert.deepEqual(open, { path: 'deep.txt', startLine: 140_000, ...expectedSlice(bytes, 140_000, Infinity, 5000) })
})

test('read_file line-offset index: repeated deep reads agree with a cold read, a rewrite invalidates it, memory is bounded', async (t) => {
  const { root, run } = await setup(t)
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
    assert.deepEqual(await run(readFileTool, { path: 'log.txt', startLine: s, endLine: s + 3 }), { path: 'log.txt', startLine: s, ...expectedSlice(v2, s, s + 3, 12000) })
  }
  // Just rewritten: the stale entry is gone and the new content is not indexed yet.
  assert.deepEqual(lineIndexCacheInfo(), { files: 0, checkpoints: 0 })
  // At most 32 files are indexed; the least recently used goes first.
  for (let i = 0; i < 33; i++) assert.equal((await run(readFileTool, { path: `small${i}.txt`, startLine: 70_000 })).content, 'a')
  assert.deepEqual(lineIndexCacheInfo(), { files: 32, checkpoints: 64 })
})
