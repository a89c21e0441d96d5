/**
 * Worker threads started by file URL (src/guardrails/offload.ts starts scan-worker.js, grep's
 * RegexPool match-thread.js) must load
 * in the build, where node runs plain JavaScript without tsx: under tsx the loader finds the .ts
 * beside a `.js` URL, so the suite alone would not notice a URL the build does not have. The
 * sources are compiled file by file as `npm run build` lays them out (esbuild, no bundling: the
 * same module graph and file names as tsc's output), then a check runs through plain node.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtemp, rm, symlink, writeFile } from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { build } from 'esbuild'

const ROOT = path.resolve(import.meta.dirname, '../..')

test('the guardrails\' and grep\'s workers load from the build\'s JavaScript, without tsx', async (t) => {
  const out = await mkdtemp(path.join(os.tmpdir(), 'tg-build-workers-'))
  t.after(async () => { await rm(out, { recursive: true, force: true }) })
  await build({
    entryPoints: [path.join(ROOT, 'src/**/*.ts')],
    outdir: path.join(out, 'src'),
    outbase: path.join(ROOT, 'src'),
    format: 'esm',
    platform: 'node',
    logLevel: 'silent'
  })
  await writeFile(path.join(out, 'package.json'), '{"type":"module"}\n')
  await symlink(path.join(ROOT, 'node_modules'), path.join(out, 'node_modules'))
  const check = `
    import { GuardrailEngine } from './src/guardrails/engine.js'
    import { RegexPool } from './src/builtin/tools/grep/regex-worker.js'
    const engine = new GuardrailEngine({ offloadMinWeight: 0 })
    const rules = [{ id: 'r', on: 'arguments', check: 'pii', action: 'redact' }]
    const verdict = await engine.arguments(rules, { entry: {}, name: 'n', userId: 'u', signal: new AbortController().signal, value: { a: 'mail jane.doe@example.com' } })
    await engine.close()
    const pool = new RegexPool(1)
    const file = new TextEncoder().encode('alpha\\nbeta\\r\\ngamma\\n')
    const grep = await pool.match({ source: 'a', flags: '', room: 2, files: [file] }, { tenant: 't', budget: { leftMs: 5000, wallLeftMs: 15000 } })
    await pool.close()
    process.stdout.write(JSON.stringify({ verdict, grep }))
  `
  await writeFile(path.join(out, 'check.mjs'), check)
  // No --import tsx: what `node dist/src/server.js` runs.
  const { verdict, grep } = JSON.parse(execFileSync(process.execPath, ['check.mjs'], { cwd: out, encoding: 'utf8', env: { PATH: process.env.PATH ?? '' } }))
  assert.deepEqual(grep, [{ m: [[1, 'alpha'], [2, 'beta']], t: 3 }], 'every match counted, `room` lines kept, the CR cut from the line shown')
  assert.deepEqual(verdict.value, { a: 'mail ****' })
  assert.equal(verdict.reports[0].outcome, 'redacted')
  assert.equal(verdict.reports[0].error, undefined)
})
