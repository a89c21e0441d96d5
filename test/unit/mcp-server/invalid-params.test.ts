import { test } from 'node:test'
import assert from 'node:assert/strict'
import { z } from 'zod'
import { withInvalidParams } from '../../../src/mcp-server/invalid-params.js'

/** A handler whose params check throws as the SDK's does (a plain Error, zod's issues as its message) before it runs. */
function checked (schema: z.ZodType): (request: unknown) => Promise<string> {
  return (request) => {
    const parsed = schema.safeParse(request)
    if (!parsed.success) throw new Error(String(parsed.error))
    return Promise.resolve('ran')
  }
}

async function refusal (handler: (request: unknown) => Promise<string>, request: unknown): Promise<{ code: number, message: string, data: unknown }> {
  try {
    await withInvalidParams('test/method', handler)(request)
  } catch (err) {
    return err as { code: number, message: string, data: unknown }
  }
  assert.fail('the handler did not refuse')
}

test('a params check\'s throw is -32602 naming each wrong field and what it takes; a union by the literal that tells its branches apart', async () => {
  const ref = z.union([z.object({ type: z.literal('ref/prompt'), name: z.string() }), z.object({ type: z.literal('ref/resource'), uri: z.string() })])
  const handler = checked(z.object({ params: z.object({ ref, level: z.enum(['debug', 'info']).optional(), n: z.number().optional() }) }))
  assert.equal(await withInvalidParams('test/method', handler)({ params: { ref: { type: 'ref/prompt', name: 'p' } } }), 'ran')
  const unknownType = await refusal(handler, { params: { ref: { type: 'ref/tool', name: 'p' } } })
  assert.equal(unknownType.code, -32602)
  assert.equal(unknownType.message, 'Invalid params for test/method: params.ref.type: expected one of "ref/prompt", "ref/resource"')
  assert.deepEqual(unknownType.data, { code: 'GW_BAD_REQUEST', statusCode: 400 })
  // The branch whose literal matched says what it lacks; several wrong fields are all named.
  const lacking = await refusal(handler, { params: { ref: { type: 'ref/resource' }, level: 'loud', n: 'x' } })
  assert.equal(lacking.message,
    'Invalid params for test/method: params.ref.uri: expected string, received undefined; params.level: expected one of "debug", "info"; params.n: expected number, received string')
})

test('any other failure passes as it is: the handler\'s own errors, a plain Error that is no params check, a JSON-RPC error', async () => {
  const own = new Error('upstream down')
  await assert.rejects(async () => await withInvalidParams('m', async () => { throw own })(), (err) => err === own)
  const plain = new Error('[not json')
  await assert.rejects(async () => await withInvalidParams('m', () => { throw plain })(), (err) => err === plain)
  const typed = Object.assign(new Error('[{"path":[],"message":"x"}]'), { code: -32603 })
  await assert.rejects(async () => await withInvalidParams('m', () => { throw typed })(), (err) => err === typed)
})
