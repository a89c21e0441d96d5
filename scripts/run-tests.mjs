// Runs the whole suite with node's test runner through tsx.
// Node 20's --test does not expand globs, so the test files are collected here.
// Usage: node scripts/run-tests.mjs [path-filter ...]
import { readdirSync, readFileSync } from 'node:fs'
import { spawn } from 'node:child_process'
import { join } from 'node:path'

const filters = process.argv.slice(2)
const files = readdirSync('test', { recursive: true })
  .map((f) => join('test', String(f)))
  .filter((f) => f.endsWith('.test.ts') && !f.includes('fixtures'))
  .filter((f) => filters.length === 0 || filters.some((p) => f.includes(p)))
  .sort()

if (files.length === 0) {
  console.error('no test files matched')
  process.exit(1)
}

// Files that assert timing or memory ratios (fairness between tenants, event-loop latency, RSS
// growth) declare `// test-runner: alone` in their first lines and run after the others, one at a
// time: a test file running beside them on a 2-core machine is noise they would measure.
const alone = (f) => /^\/\/ test-runner: alone$/m.test(readFileSync(f, 'utf8').split('\n').slice(0, 5).join('\n'))
const shared = files.filter((f) => !alone(f))
const solo = files.filter(alone)

// The suite's gateways keep their workspaces' quota with the watchdog, unless a test asks for the
// file-system quota (WORKSPACE_QUOTA_MODE=loop: the tests of the quota images): hundreds of test apps
// and SIGKILLed test gateways on temp directories would otherwise each leave loop mounts their
// clean-up cannot remove. Every gateway a test spawns inherits it; in-process apps get it from
// test/helpers/app.ts.
const env = { ...process.env, WORKSPACE_QUOTA_MODE: process.env.WORKSPACE_QUOTA_MODE ?? 'watchdog' }

function run (list, concurrency) {
  return new Promise((resolve) => {
    if (list.length === 0) return resolve(0)
    const child = spawn(process.execPath, [
      '--import', 'tsx',
      '--test',
      `--test-concurrency=${concurrency}`,
      '--test-timeout=180000',
      ...list
    ], { stdio: 'inherit', env })
    child.on('exit', (code, signal) => resolve(code ?? (signal ? 1 : 0)))
  })
}

const first = await run(shared, 2)
const second = await run(solo, 1)
process.exit(first !== 0 ? first : second)
