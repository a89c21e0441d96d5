// Runs the whole suite with node's test runner through tsx.
// Node 20's --test does not expand globs, so the test files are collected here.
// Usage: node scripts/run-tests.mjs [path-filter ...]
import { readdirSync } from 'node:fs'
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

const child = spawn(process.execPath, [
  '--import', 'tsx',
  '--test',
  '--test-concurrency=2',
  '--test-timeout=180000',
  ...files
], { stdio: 'inherit' })
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)))
