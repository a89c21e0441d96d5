import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

// Every repo path the README, RELIABILITY.md and docs/*.md name in backticks exists
// (scripts/check-doc-paths.mjs, run by `npm run lint`): the recipes of docs/ARCHITECTURE.md#extending
// pointed at moved files for months before (src/builtin/types.ts for tool.ts, tools/schemas.ts for args.ts).

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..')
const script = join(repo, 'scripts', 'check-doc-paths.mjs')

async function check (root: string): Promise<{ code: number, out: string }> {
  return await new Promise((resolve) => {
    execFile(process.execPath, [script, root], (err, stdout, stderr) => {
      resolve({ code: err ? (err.code as number) : 0, out: stdout + stderr })
    })
  })
}

test('every backticked repo path in the README and docs/ exists', async () => {
  const { code, out } = await check(repo)
  assert.equal(code, 0, out)
  assert.match(out, /documents, every repo path exists/)
})

test('a moved file named by a document fails the check; URLs, globs, placeholders and outside paths do not', async (t) => {
  const root = await mkdtemp(join(tmpdir(), 'tg-doc-paths-'))
  t.after(async () => { await rm(root, { recursive: true, force: true }) })
  const files: Record<string, string> = {
    'src/builtin/tool.ts': 'export {}\n',
    'src/builtin/tools/args.ts': 'export {}\n',
    'scripts/layers.json': '{}\n',
    'docs/ARCHITECTURE.md': [
      '1. Write a `BuiltinTool` (`src/builtin/types.ts`) with the helpers in `builtin/tools/schemas.ts`.',
      '2. Fine: `src/builtin/tool.ts:12`, `tools/args.ts`, `src/builtin/`, `scripts/layers.json`, `tool.ts`.',
      '3. Not repo paths: `src/<tier>/`, `src/{userId}/x.ts`, `src/**/*.ts`, `https://example.com/src/a.ts`,',
      '   `@fastify/static`, `WORKSPACES_DIR/{tenant}/x`, `src/main.py`, `tools/call`, `npm run docs`.',
      '```sh',
      'cat src/gone.ts `src/also-gone.ts`',
      '```'
    ].join('\n'),
    'README.md': 'See `docs/ARCHITECTURE.md` and `docs/MISSING.md`.\n'
  }
  for (const [path, text] of Object.entries(files)) {
    await mkdir(dirname(join(root, path)), { recursive: true })
    await writeFile(join(root, path), text)
  }
  const { code, out } = await check(root)
  assert.equal(code, 1)
  const reported = out.split('\n').filter((l) => l.startsWith('check-doc-paths:'))
  assert.deepEqual(reported, [
    'check-doc-paths: README.md:1: `docs/MISSING.md` does not exist',
    'check-doc-paths: docs/ARCHITECTURE.md:1: `src/builtin/types.ts` does not exist',
    'check-doc-paths: docs/ARCHITECTURE.md:1: `builtin/tools/schemas.ts` is no tracked file\'s path or its end'
  ])
})
