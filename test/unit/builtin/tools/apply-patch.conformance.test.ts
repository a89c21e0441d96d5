/**
 * Codex's apply_patch scenario corpus (test/fixtures/apply-patch-scenarios, see SOURCE.md):
 * copy input/ into a fresh workspace, apply patch.txt with the apply_patch tool, compare the
 * whole tree (files and folders) with expected/. Where our atomic behaviour deliberately
 * differs from Codex, DEVIATIONS says so and the test asserts our behaviour instead.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { cp, mkdtemp, readdir, readFile, realpath, rm, stat } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { applyPatchTool } from '../../../../src/builtin/tools/apply-patch.js'
import { ToolError } from '../../../../src/builtin/types.js'
import type { Workspace } from '../../../../src/builtin/types.js'
import { testWorkspace } from '../../../helpers/workspace.js'

const CORPUS = fileURLToPath(new URL('../../../fixtures/apply-patch-scenarios/', import.meta.url))

/** Scenarios whose patch must be refused (upstream only checks the tree; we also check the error). */
const REJECTED: Readonly<Record<string, RegExp>> = {
  '005_rejects_empty_patch': /^No files were modified\.$/,
  '006_rejects_missing_context': /^Failed to find expected lines in modify\.txt:\nmissing$/,
  '007_rejects_missing_file_delete': /^Failed to delete file missing\.txt/,
  '008_rejects_empty_update_hunk': /Update file hunk for path 'foo\.txt' is empty/,
  '009_requires_existing_file_for_update': /^Failed to read file to update missing\.txt/,
  '012_delete_directory_fails': /^Failed to delete file dir: path is a directory$/,
  '013_rejects_invalid_hunk_header': /'\*\*\* Frobnicate File: foo' is not a valid hunk header/
}

/**
 * Deliberate differences from Codex. 015: Codex applies the Add, then fails on the Update of
 * a missing file and keeps created.txt; our apply_patch is atomic, so the failing patch
 * changes nothing: the tree stays equal to input/ (empty) and the call returns an error.
 */
const DEVIATIONS: Readonly<Record<string, { expect: 'input', error: RegExp }>> = {
  '015_failure_after_partial_success_leaves_changes': { expect: 'input', error: /^Failed to read file to update missing\.txt/ }
}

type Tree = Record<string, string>

/** Every file and folder under `dir`: folders as 'dir', files as their content. Missing dir = empty tree. */
async function snapshot (dir: string): Promise<Tree> {
  const tree: Tree = {}
  const exists = await stat(dir).then(() => true, () => false)
  if (!exists) return tree
  const walk = async (rel: string): Promise<void> => {
    for (const ent of await readdir(join(dir, rel), { withFileTypes: true })) {
      const childRel = rel === '' ? ent.name : `${rel}/${ent.name}`
      if (ent.isDirectory()) {
        tree[childRel + '/'] = 'dir'
        await walk(childRel)
      } else {
        tree[childRel] = await readFile(join(dir, childRel), 'utf8')
      }
    }
  }
  await walk('')
  return tree
}

async function makeWorkspace (root: string): Promise<Workspace> {
  return testWorkspace(await realpath(root), { workspaceId: 'conformance' })
}

const scenarios = (await readdir(CORPUS, { withFileTypes: true }))
  .filter((e) => e.isDirectory())
  .map((e) => e.name)
  .sort()

test('the corpus holds the 23 scenarios', () => {
  assert.equal(scenarios.length, 23)
  for (const name of [...Object.keys(REJECTED), ...Object.keys(DEVIATIONS)]) assert.ok(scenarios.includes(name), name)
})

for (const name of scenarios) {
  test(`scenario ${name}`, async (t) => {
    const dir = join(CORPUS, name)
    const ws = await mkdtemp(join(tmpdir(), 'apply-patch-conf-'))
    t.after(() => rm(ws, { recursive: true, force: true }))
    const input = join(dir, 'input')
    if (await stat(input).then(() => true, () => false)) await cp(input, ws, { recursive: true })
    const patch = await readFile(join(dir, 'patch.txt'), 'utf8')

    let error: unknown
    let result: unknown
    try {
      result = await applyPatchTool.run({ patch }, { workspace: await makeWorkspace(ws), signal: AbortSignal.timeout(30_000) })
    } catch (err) {
      error = err
    }

    const deviation = DEVIATIONS[name]
    const rejected = REJECTED[name] ?? deviation?.error
    if (rejected !== undefined) {
      assert.ok(error instanceof ToolError, `expected a ToolError, got ${String(error)} / ${JSON.stringify(result)}`)
      assert.match(error.message, rejected)
    } else {
      assert.equal(error, undefined, `unexpected error: ${String(error)}`)
    }
    const expectedDir = deviation?.expect === 'input' ? input : join(dir, 'expected')
    assert.deepEqual(await snapshot(ws), await snapshot(expectedDir))
  })
}
