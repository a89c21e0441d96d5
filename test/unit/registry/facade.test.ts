import assert from 'node:assert/strict'
import { test } from 'node:test'
import { createEgressPolicy } from '../../../src/egress/ssrf.js'
import { HttpError } from '../../../src/errors.js'
import { RegistryFacade } from '../../../src/registry/facade.js'
import { createMemoryRegistryStore } from '../../../src/registry/memory-store.js'
import { ServerRegistry } from '../../../src/registry/registry-service.js'
import { secretBoxFromEnv } from '../../../src/registry/secrets.js'
import { ToolRouter } from '../../../src/routing/router.js'

const ADMIN = { userId: undefined, isAdmin: true }
const ACME = { userId: 'acme', isAdmin: false }
const GLOBAL = { kind: 'global' } as const
const user = (userId: string) => ({ kind: 'user', userId }) as const
// A public IP literal: the registration's egress check needs no DNS.
const HTTP_SERVER = { type: 'streamable_http', url: 'https://1.1.1.1/mcp' }
const STDIO_SERVER = { type: 'stdio', command: 'node', args: ['server.js'] }

function facade (): { facade: RegistryFacade, registry: ServerRegistry } {
  const box = secretBoxFromEnv({})
  if (!box.ok) throw new Error(box.message)
  const registry = new ServerRegistry(createMemoryRegistryStore(), box.box, createEgressPolicy([]))
  return {
    facade: new RegistryFacade(registry, new ToolRouter({
      sources: { builtin: null, user_mcp: null, local_mcp: null, function: null, global_mcp: null },
      outputMaxChars: 1000
    })),
    registry
  }
}

async function refused (work: Promise<unknown>, code: string, message?: RegExp): Promise<void> {
  await assert.rejects(work, (err: unknown) => {
    assert.ok(err instanceof HttpError, `expected an HttpError, got ${String(err)}`)
    assert.equal(err.code, code)
    if (message) assert.match(err.message, message)
    return true
  })
}

test('global servers are the admin\'s: a tenant can neither list, register nor remove them', async () => {
  const { facade: f } = facade()
  await refused(f.list(ACME, GLOBAL), 'GW_FORBIDDEN', /^Global servers are managed with an admin key$/)
  await refused(f.put(ACME, GLOBAL, 'gh', HTTP_SERVER), 'GW_FORBIDDEN')
  await refused(f.remove(ACME, GLOBAL, 'gh'), 'GW_FORBIDDEN')

  const put = await f.put(ADMIN, GLOBAL, 'runner', STDIO_SERVER)
  assert.equal(put.created, true)
  assert.deepEqual((await f.list(ADMIN, GLOBAL)).map((s) => s.serverId), ['runner'])
  assert.equal((await f.remove(ADMIN, GLOBAL, 'runner')).version > 0, true)
})

test('a tenant key reaches only its own userId, and never registers stdio; an admin may act for any tenant', async () => {
  const { facade: f, registry } = facade()
  await refused(f.list(ACME, user('globex')), 'GW_TENANT_MISMATCH')
  await refused(f.put(ACME, user('globex'), 'gh', HTTP_SERVER), 'GW_TENANT_MISMATCH')
  await refused(f.remove(ACME, user('globex'), 'gh'), 'GW_TENANT_MISMATCH')
  await refused(f.liveTools(ACME, 'globex', 'gh', AbortSignal.timeout(1000)), 'GW_TENANT_MISMATCH')

  await refused(f.put(ACME, user('acme'), 'local', STDIO_SERVER), 'GW_FORBIDDEN')
  assert.equal((await f.put(ACME, user('acme'), 'gh', HTTP_SERVER)).created, true)
  assert.equal((await f.put(ADMIN, user('acme'), 'local', STDIO_SERVER)).created, true)
  assert.deepEqual((await f.list(ACME, user('acme'))).map((s) => s.serverId).sort(), ['gh', 'local'])
  assert.ok(await registry.get(user('acme'), 'local'))

  await refused(f.remove(ACME, user('acme'), 'missing'), 'GW_SERVER_NOT_FOUND')
  // Without remote MCP sources there is nothing to ask: the router's own refusal comes through.
  await refused(f.liveTools(ACME, 'acme', 'gh', AbortSignal.timeout(1000)), 'GW_SERVER_NOT_FOUND')
})
