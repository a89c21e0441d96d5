import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HttpError } from '../../../src/errors.js'
import { toolRequestTenant } from '../../../src/routing/tenancy.js'

const ADMIN = { userId: undefined, isAdmin: true }
const ALICE = { userId: 'alice', isAdmin: false }

function refused (fn: () => unknown, pattern?: RegExp): void {
  assert.throws(fn, (err: unknown) => err instanceof HttpError && err.code === 'GW_TENANT_MISMATCH' && (pattern === undefined || pattern.test(err.message)))
}

test('toolRequestTenant: an admin without userId acts for the tenant its encoded names name, from a tool name or a server id', () => {
  assert.equal(toolRequestTenant(ADMIN, undefined, {}), undefined)
  assert.equal(toolRequestTenant(ADMIN, undefined, { toolName: 'echo', mcp: ['weather'] }), undefined)
  assert.equal(toolRequestTenant(ADMIN, undefined, { toolName: 'user_alice_tool_echo' }), 'alice')
  assert.equal(toolRequestTenant(ADMIN, undefined, { mcp: ['weather', ' user_alice_service_files '] }), 'alice')
  assert.equal(toolRequestTenant(ADMIN, undefined, { toolName: 'user_alice_tool_echo', mcp: ['user_alice_service_files'] }), 'alice')
})

test('toolRequestTenant: names of two tenants, or of another tenant than the requested userId, are GW_TENANT_MISMATCH for an admin too', () => {
  refused(() => toolRequestTenant(ADMIN, undefined, { mcp: ['user_alice_service_a', 'user_bob_service_b'] }), /more than one tenant/)
  refused(() => toolRequestTenant(ADMIN, undefined, { toolName: 'user_alice_tool_x', mcp: ['user_bob_service_b'] }))
  refused(() => toolRequestTenant(ADMIN, 'bob', { toolName: 'user_alice_tool_x' }), /Tool 'user_alice_tool_x'/)
  refused(() => toolRequestTenant(ADMIN, 'bob', { mcp: ['user_alice_service_files'] }), /Server 'user_alice_service_files'/)
  assert.equal(toolRequestTenant(ADMIN, 'bob', { mcp: ['files'] }), 'bob')
})

test('toolRequestTenant: a tenant key acts as itself and never names another tenant, by userId or by encoded name', () => {
  assert.equal(toolRequestTenant(ALICE, undefined, {}), 'alice')
  assert.equal(toolRequestTenant(ALICE, undefined, { toolName: 'user_alice_tool_echo' }), 'alice')
  assert.equal(toolRequestTenant(ALICE, 'alice', { mcp: ['user_alice_service_files'] }), 'alice')
  refused(() => toolRequestTenant(ALICE, 'bob', {}))
  refused(() => toolRequestTenant(ALICE, undefined, { toolName: 'user_bob_tool_echo' }))
  refused(() => toolRequestTenant(ALICE, undefined, { mcp: ['user_bob_service_files'] }))
  // Exact ids: alice-2 is another tenant, not a prefix match of alice.
  refused(() => toolRequestTenant(ALICE, undefined, { toolName: 'user_alice-2_tool_echo' }))
})
