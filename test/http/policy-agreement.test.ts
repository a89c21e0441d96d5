/**
 * Listing and invoking obey one policy function: for random default and tenant policies, a name
 * is listed by GET /tools exactly when invoking it is not 403 GW_POLICY_DENIED (with and without
 * an allow-list). Runs through the app (the gateway, the router and the real tiers), since the
 * property is about the two paths agreeing, not about the policy object alone.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { buildTestApp } from '../helpers/app.js'

const NAMES = [
  'bash', 'read_file', 'write_file', 'apply_patch', 'glob', 'grep', 'edit', 'update_agents_md', 'calculate',
  'current_time', 'json_query', 'text_stats', 'text_slugify'
]
const FRAGMENTS = ['*', 'read_*', '*_file', 'bash', 'calc*', '*query', 'text_*', 'g*', '*e*', 'edit', 'nomatch', '*_*_*', 'write_*', '*s']

const pattern = fc.oneof(
  fc.constantFrom(...FRAGMENTS, ...NAMES),
  fc.array(fc.constantFrom('a', 'e', 't', '_', '*', 'r', 's'), { minLength: 1, maxLength: 8 }).map((c) => c.join(''))
)
const policy = fc.record({
  deny: fc.array(pattern, { maxLength: 4 }),
  allowOnly: fc.array(pattern, { maxLength: 5 }),
  readOnly: fc.boolean(),
  requireApproval: fc.array(pattern, { maxLength: 2 })
}, { requiredKeys: [] })

test('for random policies, a name is listed iff invoking it is not GW_POLICY_DENIED', async (t) => {
  // Each run sends ~30 requests: no rate limit in the way.
  const app = await buildTestApp(t, { env: { RATE_LIMIT_PER_MINUTE: '1000000' } })
  const functions = NAMES.join(',')
  await fc.assert(fc.asyncProperty(policy, policy, async (base, own) => {
    assert.equal((await app.inject({ method: 'PUT', url: '/policy', payload: base })).statusCode < 300, true)
    assert.equal((await app.inject({ method: 'PUT', url: '/users/acme/policy', payload: own })).statusCode < 300, true)
    const res = await app.inject({ method: 'GET', url: `/tools?userId=acme&functions=${functions}` })
    const listed = new Set((res.json().tools as Array<{ function: { name: string } }>).map((x) => x.function.name))
    for (const name of NAMES) {
      // Empty arguments: a tool that is allowed fails its schema (or runs harmlessly), never a denial.
      for (const allow of [undefined, { functions: NAMES }]) {
        const r = await app.inject({ method: 'POST', url: '/invoke', payload: { name, userId: 'acme', arguments: {}, ...(allow ? { allow } : {}) } })
        const denied = r.statusCode === 403 && r.json().code === 'GW_POLICY_DENIED'
        assert.equal(denied, !listed.has(name), `${name} listed=${listed.has(name)} status=${r.statusCode} ${JSON.stringify({ base, own })}`)
      }
    }
  }), { numRuns: 40 })
})
