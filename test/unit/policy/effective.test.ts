import { test } from 'node:test'
import assert from 'node:assert/strict'
import { CommandGuard } from '../../../src/policy/command-guard.js'
import { EffectivePolicy } from '../../../src/policy/effective.js'
import type { CatalogEntry } from '../../../src/routing/source.js'

const guard = new CommandGuard()
test.after(async () => await guard.close())

function entry (route: CatalogEntry['route'], name: string, extra: Partial<CatalogEntry> = {}, annotations?: Record<string, unknown>): CatalogEntry {
  return {
    route,
    source: route === 'builtin' ? 'builtin' : 'src',
    name,
    ...extra,
    spec: { name: extra.spec?.name ?? name, description: '', inputSchema: { type: 'object' }, ...(annotations ? { annotations } : {}) }
  }
}

const bash = entry('builtin', 'bash')
const readFile = entry('builtin', 'read_file')
const search = entry('global_mcp', 'search', { qualifiedName: 'web__search' })
const tenantTool = entry(
  'user_mcp',
  'user_acme_tool_lookup',
  { qualifiedName: 'crm__lookup', spec: { name: 'lookup', description: '', inputSchema: {} } },
  { readOnlyHint: true }
)

test('a pattern matches a tool by any name that calls it', () => {
  const p = new EffectivePolicy({ tenant: { deny: ['web__*', 'lookup'] } }, guard)
  assert.equal(p.decide(search).kind, 'deny')
  assert.equal(p.decide(tenantTool).kind, 'deny')
  assert.equal(p.decide(bash).kind, 'allow')
})

test('the default and the tenant combine: deny union, allowOnly intersection, readOnly or, limits min', () => {
  const p = new EffectivePolicy({
    default: { deny: ['bash'], allowOnly: ['read_*', 'search', 'bash'], limits: { timeoutMs: 100, outputMaxChars: 50 } },
    tenant: { allowOnly: ['search', 'bash'], limits: { timeoutMs: 10 } }
  }, guard)
  assert.equal(p.decide(bash).kind, 'deny')
  assert.equal(p.decide(readFile).kind, 'deny')
  assert.equal(p.decide(search).kind, 'allow')
  assert.deepEqual(p.limits, { timeoutMs: 10, outputMaxChars: 50 })
  const ro = new EffectivePolicy({ tenant: { readOnly: true } }, guard)
  assert.equal(ro.decide(readFile).kind, 'allow')
  assert.equal(ro.decide(bash).kind, 'deny')
  assert.equal(ro.decide(search).kind, 'deny')
  assert.equal(ro.decide(tenantTool).kind, 'allow')
})

test('requireApproval decides approval-required (deny wins over it)', () => {
  const p = new EffectivePolicy({ default: { requireApproval: ['*search'] }, tenant: { deny: ['web__*'] } }, guard)
  assert.equal(p.decide(search).kind, 'deny')
  const q = new EffectivePolicy({ default: { requireApproval: ['*search'] } }, guard)
  assert.deepEqual(q.decide(search), { kind: 'approval-required', rule: '*search' })
})

test('bash.denyCommands: exec and start commands, whole string, first matching rule named', async () => {
  const p = new EffectivePolicy({ default: { bash: { denyCommands: ['curl'] } }, tenant: { bash: { denyCommands: ['^sudo\\b', 'rm\\s+-rf'] } } }, guard)
  assert.match(await p.checkCall(bash, { action: 'exec', command: 'ls; rm  -rf x' }) ?? '', /tenant tool policy: it matches bash.denyCommands\/1 "rm\\\\s\+-rf"/)
  assert.match(await p.checkCall(bash, { action: 'start', command: 'x | curl y' }) ?? '', /default tool policy: it matches bash.denyCommands\/0 "curl"/)
  assert.equal(await p.checkCall(bash, { action: 'exec', command: 'echo sudo' }), undefined)
  assert.equal(await p.checkCall(bash, { action: 'write', processId: 'p', input: 'rm -rf x' }), undefined)
  assert.equal(await p.checkCall(readFile, { action: 'exec', command: 'curl' }), undefined)
})
