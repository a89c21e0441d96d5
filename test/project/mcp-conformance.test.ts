import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

// The official MCP conformance suite in its four legs (scripts/conformance.ts): our fixture server and
// client directly, and the gateway as server (/mcp) and as client (/tools, /invoke, and OAuth to the
// scenario servers for auth/*), each against its baseline of expected failures in test/conformance/. The suite needs Node >= 22: skipped on an older
// Node, except under CI=true (.ci/run uses Node 24), where that is a failure.
const major = Number(process.versions.node.split('.')[0])
const skip = major < 22 && process.env.CI !== 'true' ? `the conformance suite needs Node >= 22 (this is ${process.version})` : false

function conformance (args: string[], env: Record<string, string> = {}): Promise<{ code: number | null, output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/conformance.ts', ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe']
    })
    let output = ''
    child.stdout.on('data', (c: Buffer) => { output += c.toString() })
    child.stderr.on('data', (c: Buffer) => { output += c.toString() })
    child.on('error', reject)
    child.on('close', (code) => resolve({ code, output }))
  })
}

// The whole run takes about 3 minutes on 2 cores beside another test file (the client legs run 54
// scenarios each, two Node processes per scenario); the limit leaves room for a slower machine.
test('the four legs pass against their baselines: no new failure, no stale entry', { skip, timeout: 480_000 }, async () => {
  assert.ok(major >= 22, `the conformance suite needs Node >= 22; CI runs this file on ${process.version}`)
  const { code, output } = await conformance([])
  assert.equal(code, 0, output)
  // One summary line per leg and revision, with its figures; the client legs also run 2025-03-26.
  for (const leg of ['control-server', 'gateway-server', 'control-client', 'gateway-client']) {
    for (const version of ['2025-11-25', '2026-07-28']) assert.match(output, new RegExp(`^ok {3}${leg} ${version}: \\d+ passed, \\d+ failed`, 'm'), output)
  }
  // Every client scenario the suite lists for the revision but its extensions, auth/* included: a
  // scenario dropped from the run changes the count (one that writes no checks fails the run).
  const clientScenarios = { '2025-03-26': 2, '2025-11-25': 19, '2026-07-28': 33 }
  for (const leg of ['control-client', 'gateway-client']) {
    for (const [version, n] of Object.entries(clientScenarios)) {
      assert.match(output, new RegExp(`^ok {3}${leg} ${version}: \\d+ passed, \\d+ failed \\(\\d+ baseline entries hit\\), ${n} scenarios`, 'm'), output)
    }
  }
  // The control client (SDK v2, its OAuth by the SDK's auth()) passes every check at every revision, auth/* included.
  for (const version of Object.keys(clientScenarios)) assert.match(output, new RegExp(`^ok {3}control-client ${version}: \\d+ passed, 0 failed`, 'm'), output)
  // The control fixtures pass everything the SDK lets a server pass (the SDK's own fixtures' figures): at
  // 2026-07-28 with the Tasks extension scenarios, but one (a tool cannot answer -32021, the control baseline).
  assert.match(output, /ok {3}control-server 2025-11-25: 84 passed, 0 failed/, output)
  assert.match(output, /ok {3}control-server 2026-07-28: 194 passed, 1 failed/, output)
})

test('a baseline entry that passes now fails the run (stale); --update-baseline rewrites the baseline', { skip, timeout: 120_000 }, async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'conformance-baseline-'))
  t.after(async () => { await rm(dir, { recursive: true, force: true }) })
  // control-server passes everything, so an entry for a passing scenario is stale.
  await writeFile(join(dir, 'expected-failures.control-server.2025-11-25.yaml'), 'server:\n  - ping  # kept comment\n')
  await copyFile('test/conformance/expected-failures.control-server.2026-07-28.yaml', join(dir, 'expected-failures.control-server.2026-07-28.yaml'))
  const stale = await conformance(['control-server'], { CONFORMANCE_BASELINE_DIR: dir })
  assert.equal(stale.code, 1, stale.output)
  assert.match(stale.output, /stale baseline entry .*: ping$/m)
  // A failed run keeps its checks in the temp dir it names.
  const kept = /checks and the suite's output per scenario: (\S+)/.exec(stale.output)?.[1]
  assert.ok(kept !== undefined, stale.output)
  await rm(kept, { recursive: true, force: true })
  const updated = await conformance(['control-server', '--update-baseline'], { CONFORMANCE_BASELINE_DIR: dir })
  assert.equal(updated.code, 0, updated.output)
  assert.match(await readFile(join(dir, 'expected-failures.control-server.2025-11-25.yaml'), 'utf8'), /^server: \[\]$/m)
})
