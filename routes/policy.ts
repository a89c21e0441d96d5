import fp from 'fastify-plugin'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Static } from '@sinclair/typebox'
import { errorResponses } from '../src/api/common.js'
import { DeleteDefaultPolicyResponse, DeletePolicyResponse, Policy, PolicyResponse, PolicyUserParams, PutPolicyResponse } from '../src/api/policy.js'

const DEFAULT = { kind: 'global' } as const

/**
 * A body schema error is left to the domain (attachValidation): parsePolicy checks the same rules
 * and more (patterns, regular expressions), and names the entry with GW_INVALID_POLICY. Any other
 * part of the request that failed its schema (the userId) is refused as usual.
 */
function rejectNonBodyErrors (request: FastifyRequest): void {
  const err = request.validationError as (Error & { validationContext?: string }) | undefined
  if (err !== undefined && err.validationContext !== 'body') throw err
}

/** Tool policies: the default (admin) and each tenant's (admin writes, the tenant reads its own). */
async function policyRoutes (app: FastifyInstance): Promise<void> {
  const policies = app.services.policies
  const tags = ['policy']
  const combination =
    'A tenant\'s calls obey the default policy and its own: deny, requireApproval and bash.denyCommands are the union, a tool must pass each allowOnly present, readOnly if either says so, each limit the lower. A denied tool is never listed (GET /tools, MCP tools/list) and invoking it is 403 GW_POLICY_DENIED (/invoke, each /invoke/batch entry, a JSON-RPC error on /mcp). Every instance sharing the registry store enforces a change at once.'

  app.get('/policy', {
    config: { admin: true },
    schema: {
      operationId: 'getDefaultPolicy',
      summary: 'The default tool policy (admin)',
      description: combination,
      tags,
      response: { 200: PolicyResponse, ...errorResponses(401, 403, 429, 503) }
    }
  }, async (request) => await policies.read(request.caller, DEFAULT))

  app.put<{ Body: Static<typeof Policy> }>('/policy', {
    config: { admin: true },
    attachValidation: true,
    schema: {
      operationId: 'putDefaultPolicy',
      summary: 'Replace the default tool policy (admin)',
      description: `${combination} The body is validated strictly: an unknown key, an invalid pattern or regular expression, too many or too long entries is 400 GW_INVALID_POLICY naming the entry. \`{}\` restricts nothing.`,
      tags,
      body: Policy,
      response: { 200: PutPolicyResponse, 201: PutPolicyResponse, ...errorResponses(400, 401, 403, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    rejectNonBodyErrors(request)
    const result = await policies.write(request.caller, DEFAULT, request.body)
    request.log.info({ scope: 'default', version: result.version }, 'policy written')
    return await reply.code(result.created ? 201 : 200).send(result)
  })

  app.delete('/policy', {
    config: { admin: true },
    schema: {
      operationId: 'deleteDefaultPolicy',
      summary: 'Remove the default tool policy: calls then obey their tenant\'s policy alone (admin)',
      description: 'The same as `PUT /policy {}`, which restricts nothing. Every instance sharing the registry store sees the change at once.',
      tags,
      response: { 200: DeleteDefaultPolicyResponse, ...errorResponses(401, 403, 429, 503) }
    }
  }, async (request) => {
    const result = await policies.remove(request.caller, DEFAULT)
    request.log.info({ scope: 'default', version: result.version }, 'policy deleted')
    return result
  })

  app.get<{ Params: Static<typeof PolicyUserParams> }>('/users/:userId/policy', {
    schema: {
      operationId: 'getUserPolicy',
      summary: "A tenant's tool policy, with the default it also obeys (admin, or the tenant's own key)",
      description: combination,
      tags,
      params: PolicyUserParams,
      response: { 200: PolicyResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request) => {
    const { userId } = request.params
    const view = await policies.read(request.caller, { kind: 'user', userId })
    return { userId, ...view, defaultPolicy: await policies.defaultPolicy() }
  })

  app.put<{ Params: Static<typeof PolicyUserParams>, Body: Static<typeof Policy> }>('/users/:userId/policy', {
    config: { admin: true },
    attachValidation: true,
    schema: {
      operationId: 'putUserPolicy',
      summary: "Create or replace a tenant's tool policy (admin)",
      description: `${combination} The body is validated strictly: an unknown key, an invalid pattern or regular expression, too many or too long entries is 400 GW_INVALID_POLICY naming the entry.`,
      tags,
      params: PolicyUserParams,
      body: Policy,
      response: { 200: PutPolicyResponse, 201: PutPolicyResponse, ...errorResponses(400, 401, 403, 413, 415, 429, 503) }
    }
  }, async (request, reply) => {
    rejectNonBodyErrors(request)
    const { userId } = request.params
    const result = await policies.write(request.caller, { kind: 'user', userId }, request.body)
    request.log.info({ tenant: userId, version: result.version }, 'policy written')
    return await reply.code(result.created ? 201 : 200).send({ userId, ...result })
  })

  app.delete<{ Params: Static<typeof PolicyUserParams> }>('/users/:userId/policy', {
    config: { admin: true },
    schema: {
      operationId: 'deleteUserPolicy',
      summary: "Remove a tenant's tool policy: its calls then obey the default alone (admin)",
      tags,
      params: PolicyUserParams,
      response: { 200: DeletePolicyResponse, ...errorResponses(400, 401, 403, 429, 503) }
    }
  }, async (request) => {
    const { userId } = request.params
    return { userId, ...await policies.remove(request.caller, { kind: 'user', userId }) }
  })
}

// Encapsulated like the other route modules; fp adds the name and the dependencies, checked at boot.
export default fp(policyRoutes, {
  name: 'routes-policy',
  dependencies: ['gateway-services', 'gateway-errors', 'gateway-docs', 'gateway-auth', 'gateway-rate-limit'],
  encapsulate: true
})
