/**
 * Two gateway processes on one Redis: a legacy /mcp client's call runs on instance A, whose
 * server asks the client for a name; the client's answer is POSTed to instance B (a load balancer
 * without affinity would do that), which forwards it to A (the cluster's signed call), and the
 * call on A continues with it. Without the forward the call would wait until its deadline. The
 * same for a REST caller: a legacy server's question parks the call on A, the retry on B is
 * forwarded to A.
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import { startAskingFixture } from '../../scripts/lib/mcp-fixtures/asking-server.js'
import { REDIS_URL, redisForTest } from '../helpers/redis.js'

const SECRET = 'relay-cluster-secret-0123456789'
const ADMIN = 'admin-key-relay-0123456789'
const ACME = 'acme-key-relay-0123456789'

test('a legacy client\'s answer, and a REST retry of a parked call, that reach the other instance are forwarded to the one whose call waits', async (t) => {
  const redis = await redisForTest(t)
  if (redis === undefined) return
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-relay-cluster-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const upstream = await startAskingFixture()
  t.after(async () => await upstream.close())
  const common = {
    REDIS_URL,
    REDIS_KEY_PREFIX: redis.prefix,
    CLUSTER_SECRET: SECRET,
    API_KEYS: `${ADMIN}:*,${ACME}:acme`,
    WORKSPACES_DIR: workspaces,
    CLUSTER_HEARTBEAT_MS: '500',
    HOST: '127.0.0.1',
    SANDBOX: 'none',
    LOAD_EXAMPLES: 'false',
    EGRESS_ALLOW: '127.0.0.1/32',
    // The same key on both: a handle sealed on one opens on the other.
    SECRETS_KEY: 'YSdqi4D+lk82wD8geYaX6FXtLlow49URdGkDN/icEME=',
    LOG_LEVEL: 'info'
  }
  const [a, b] = await Promise.all([startGateway(t, common), startGateway(t, common)])
  // Both have announced their URLs (membership), so B can find A.
  for (let i = 0; ; i++) {
    const res = await fetch(`${b.url}/cluster`, { headers: { authorization: `Bearer ${ADMIN}` } })
    const body = await res.json() as { instances: Array<{ url: string }> }
    if (body.instances.filter((x) => x.url !== '').length === 2) break
    if (i > 200) assert.fail(`the instances did not both announce their URLs: ${JSON.stringify(body)}`)
    await sleep(50)
  }
  const put = await fetch(`${a.url}/users/acme/mcp/servers/asker`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' },
    body: JSON.stringify({ type: 'streamable_http', url: upstream.url })
  })
  assert.equal(put.status, 201, await put.text())

  // Every POST that only answers the gateway's requests goes to B; everything else to A.
  let answersViaB = 0
  const split: typeof fetch = async (input, init) => {
    const body = typeof init?.body === 'string' ? init.body : ''
    if (body.includes('"gwq:')) {
      answersViaB++
      return await fetch(String(input).replace(a.url, b.url), init)
    }
    return await fetch(input, init)
  }
  const client = new Client({ name: 'legacy', version: '1.0.0' }, { capabilities: { elicitation: {} } })
  client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { name: 'Ada' } }))
  await client.connect(new StreamableHTTPClientTransport(new URL(`${a.url}/mcp?mcp=user_acme_service_asker`), {
    requestInit: { headers: { authorization: `Bearer ${ACME}` } },
    fetch: split
  }))
  t.after(async () => await client.close())
  const ask = (await client.listTools()).tools.find((tool) => tool.name.endsWith('ask_name'))
  assert.ok(ask !== undefined)
  const result = await client.callTool({ name: ask.name, arguments: {} }, undefined, { timeout: 20_000 }) as { content: Array<{ text?: string }> }
  assert.equal(result.content[0]?.text, 'hello Ada', `A:\n${a.logs()}\nB:\n${b.logs()}`)
  assert.equal(answersViaB, 1)

  // REST, the legacy server's question parked on A: the retry on B is forwarded to A and gets the result.
  const body = { name: 'user_acme_tool_ask_name', userId: 'acme', arguments: {}, allow: { mcp: ['asker'] }, clientCapabilities: { elicitation: {} } }
  const post = async (base: string, extra: Record<string, unknown>): Promise<any> => {
    const res = await fetch(`${base}/invoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ACME}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, ...extra })
    })
    return await res.json()
  }
  const first = await post(a.url, {})
  assert.equal(first.status, 'input_required', JSON.stringify(first))
  const key = Object.keys(first.inputRequests)[0] as string
  const done = await post(b.url, { inputResponses: { [key]: { action: 'accept', content: { name: 'Lin' } } }, requestState: first.requestState })
  assert.equal(done.output, 'hello Lin', `${JSON.stringify(done)}\nA:\n${a.logs()}\nB:\n${b.logs()}`)
  assert.equal(done.callId, first.callId)
})
