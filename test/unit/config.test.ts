import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import { ConfigError, loadConfig, parseDuration } from '../../src/config.js'

test('defaults: the documented values', () => {
  const c = loadConfig({})
  assert.equal(c.port, 8080)
  assert.equal(c.host, undefined)
  assert.equal(c.redisUrl, undefined)
  assert.equal(c.redisKeyPrefix, 'tg:')
  assert.equal(c.workspacesDir, './data/workspaces')
  assert.equal(c.sandbox, 'auto')
  assert.equal(c.rateLimitPerMinute, 600)
  assert.equal(c.maxConcurrentPerTenant, 32)
  assert.equal(c.logLevel, 'info')
  assert.equal(c.outputMaxChars, 100_000)
  assert.deepEqual(c.functionsDirs, [])
})

test('lists and pairs are parsed', () => {
  const c = loadConfig({ FUNCTIONS_DIR: 'a, b,,c', READ_ROOTS: 'skills=/opt/skills, docs=/srv/docs', EGRESS_ALLOW: '127.0.0.1/32,example.com', PORT: '0' })
  assert.deepEqual(c.functionsDirs, ['a', 'b', 'c'])
  assert.deepEqual(c.readRoots, { skills: '/opt/skills', docs: '/srv/docs' })
  assert.deepEqual(c.egressAllow, ['127.0.0.1/32', 'example.com'])
  assert.equal(c.port, 0)
})

test('numbers with fractions: SANDBOX_TENANT_CPUS (unset: the sandbox default); not a number or negative is an error', () => {
  assert.equal(loadConfig({}).sandboxTenantCpus, undefined)
  assert.equal(loadConfig({ SANDBOX_TENANT_CPUS: '1.5' }).sandboxTenantCpus, 1.5)
  assert.equal(loadConfig({ SANDBOX_TENANT_CPUS: '0' }).sandboxTenantCpus, 0)
  for (const bad of ['half', '-1', '1e3', '5000']) {
    assert.throws(() => loadConfig({ SANDBOX_TENANT_CPUS: bad }), /SANDBOX_TENANT_CPUS:/, bad)
  }
})

test('every bad value is named in one error', () => {
  assert.throws(() => loadConfig({ PORT: 'eighty', SANDBOX: 'docker', LOG_LEVEL: 'loud', REDIS_URL: 'http://x', READ_ROOTS: 'nopath', COMMAND_TIMEOUT_MS: '9999999' }), (err: unknown) => {
    assert.ok(err instanceof ConfigError)
    for (const name of ['PORT', 'SANDBOX', 'LOG_LEVEL', 'REDIS_URL', 'READ_ROOTS', 'COMMAND_TIMEOUT_MS']) {
      assert.match(err.message, new RegExp(`${name}:`), name)
    }
    return true
  })
})

test('the server exits non-zero with a clear message on a bad value', () => {
  const res = spawnSync(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { ...process.env, PORT: '99999', LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: 30_000
  })
  assert.equal(res.status, 2)
  assert.match(res.stderr, /Invalid configuration:\n\s+- PORT: /)
})

test('the server exits non-zero naming the files when discovery fails', () => {
  const res = spawnSync(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
    env: { ...process.env, PORT: '0', SANDBOX: 'none', FUNCTIONS_DIR: 'test/fixtures/functions/duplicate', LOG_LEVEL: 'silent' },
    encoding: 'utf8',
    timeout: 30_000
  })
  assert.equal(res.status, 1)
  assert.match(res.stderr, /start-up failed: .*\n.*duplicate function name 'same_name' in .*a\.ts and .*b\.ts/)
})

test('WORKSPACE_IDLE_TTL is a duration (unset = kept); whether WORKSPACES_DIR was set is known', () => {
  assert.equal(loadConfig({}).workspaceIdleTtl, undefined)
  assert.equal(loadConfig({ WORKSPACE_IDLE_TTL: '7d' }).workspaceIdleTtl, '7d')
  assert.equal(parseDuration('7d'), 7 * 86_400_000)
  assert.equal(parseDuration('12h'), 12 * 3_600_000)
  assert.equal(parseDuration('30m'), 30 * 60_000)
  assert.equal(parseDuration('45s'), 45_000)
  assert.equal(parseDuration('500ms'), 500)
  for (const bad of ['7', '0d', '1w', '-1h', '1.5h', 'd']) {
    assert.throws(() => loadConfig({ WORKSPACE_IDLE_TTL: bad }), /WORKSPACE_IDLE_TTL/, bad)
    assert.throws(() => parseDuration(bad), ConfigError, bad)
  }
  assert.equal(loadConfig({}).workspacesDirExplicit, false)
  assert.equal(loadConfig({ WORKSPACES_DIR: '  ' }).workspacesDirExplicit, false)
  assert.equal(loadConfig({ WORKSPACES_DIR: '/srv/ws' }).workspacesDirExplicit, true)
  assert.equal(loadConfig({ CHECKPOINTS_PER_WORKSPACE: '5' }).checkpointsPerWorkspace, 5)
  assert.equal(loadConfig({}).checkpointsPerWorkspace, 20)
})
