import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdir, readdir, readFile, symlink, writeFile } from 'node:fs/promises'
import path from 'node:path'
import { editTool } from '../../../../src/builtin/tools/edit.js'
import { assertClosedSchema, toolError, toolWorkspace } from '../../../helpers/tool-workspace.js'

test('schema is a closed object with the AI4J parameter names', () => {
  assertClosedSchema(editTool, ['path', 'old_string', 'new_string', 'replaceAll'])
})

test('edit: unique literal replacement, $& stays literal', async (t) => {
  const { root, run } = await toolWorkspace(t)
  await writeFile(path.join(root, 'e.ts'), 'const a = 1\nconst b = 2\n')
  assert.deepEqual(await run(editTool, { path: 'e.ts', old_string: 'a = 1', new_string: "a = '$&$1$$'" }), { path: 'e.ts', replacements: 1 })
  assert.equal(await readFile(path.join(root, 'e.ts'), 'utf8'), "const a = '$&$1$$'\nconst b = 2\n")
})

test('edit: errors keep AI4J wording', async (t) => {
  const { root, run } = await toolWorkspace(t)
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
  const { root, run } = await toolWorkspace(t)
  await writeFile(path.join(root, 'w.txt'), '\uFEFFone\r\ntwo\r\nthree\r\n')
  await run(editTool, { path: 'w.txt', old_string: 'one\ntwo', new_string: 'uno\ndos' })
  assert.equal(await readFile(path.join(root, 'w.txt'), 'utf8'), '\uFEFFuno\r\ndos\r\nthree\r\n')
})

test('edit: a replaceAll that would grow the file past the 10 MiB edit works on is refused before the new content is made', async (t) => {
  const { root, run } = await toolWorkspace(t)
  // The attack: 1,000,000 one-byte matches, each replaced by 500 bytes: a 500 MB string built in the
  // gateway (and encoded again to be written) from a 1 MB file, per call.
  await writeFile(path.join(root, 'big.txt'), 'a'.repeat(1_000_000))
  await toolError(run(editTool, { path: 'big.txt', old_string: 'a', new_string: 'x'.repeat(500), replaceAll: true }),
    /^The edit would make big.txt 500000000 bytes; edit works on files up to 10485760 bytes$/)
  assert.equal((await readFile(path.join(root, 'big.txt'), 'utf8')).length, 1_000_000, 'the file is unchanged')
  // Up to the bound it works, in UTF-8 bytes (each 'é' is two).
  assert.deepEqual(await run(editTool, { path: 'big.txt', old_string: 'a', new_string: 'éé', replaceAll: true }), { path: 'big.txt', replacements: 1_000_000 })
  assert.equal((await readFile(path.join(root, 'big.txt'))).length, 4_000_000)
})

test('edit reads and writes through the one location it resolved: a nested file, a directory, a FIFO, an in-tree link, a link out', async (t) => {
  const { root, run } = await toolWorkspace(t)
  await mkdir(path.join(root, 'a', 'b'), { recursive: true })
  await writeFile(path.join(root, 'a', 'b', 'n.txt'), 'one two\n')
  assert.deepEqual(await run(editTool, { path: 'a/b/n.txt', old_string: 'two', new_string: '2' }), { path: 'a/b/n.txt', replacements: 1 })
  assert.equal(await readFile(path.join(root, 'a', 'b', 'n.txt'), 'utf8'), 'one 2\n')
  await toolError(run(editTool, { path: 'a/b', old_string: 'x', new_string: 'y' }), /^Path is a directory: a\/b$/)
  execFileSync('mkfifo', [path.join(root, 'fifo')])
  await toolError(run(editTool, { path: 'fifo', old_string: 'x', new_string: 'y' }), /^Not a regular file: fifo$/)
  // A link in the tree is read where it points (as a read is) and never written through: the target is unchanged.
  await symlink('a/b/n.txt', path.join(root, 'link.txt'))
  await toolError(run(editTool, { path: 'link.txt', old_string: 'one', new_string: '1' }), /Refusing to write through a symbolic link: link.txt/)
  assert.equal(await readFile(path.join(root, 'a', 'b', 'n.txt'), 'utf8'), 'one 2\n')
  // A link out of the tree: refused, nothing read.
  await symlink('/etc/hostname', path.join(root, 'out.txt'))
  await toolError(run(editTool, { path: 'out.txt', old_string: 'a', new_string: 'b' }), /escapes workspace root|Refusing to write/)
  assert.equal(await readdir(root).then((names) => names.some((n) => n.endsWith('.tg-tmp'))), false)
})
