/**
 * The SDK (v2) Client the pool's connections use (connection.ts), with one change: a `tools/call`
 * result is validated by a validator made once per wire codec instead of once per call.
 *
 * The SDK's `request()` for a spec method without an explicit schema builds the era's result
 * validator per request, and building it probes the codec with `validateResult(method, undefined)`:
 * a failed zod parse whose error is then formatted as text, thrown away at once. Under load that
 * probe was the largest single cost of the Client in a profile of the gateway (a remote call through
 * POST /invoke or /mcp). The validator kept here is the SDK's own (`codecResultValidator`: the
 * codec's `validateResult` behind a Standard Schema), handed to the protected `_requestWithSchema`,
 * which gates the method by era and decodes the result exactly as the schema-less path does. Only
 * once the protocol version is negotiated (the codec is then the instance's for every method).
 */
import { Client } from '@modelcontextprotocol/client'
import type { RequestOptions, StandardSchemaV1 } from '@modelcontextprotocol/client'

/** What the codec (the SDK's WireCodec, not exported) offers that the validator uses. */
interface ResultCodec {
  validateResult: (method: string, raw: unknown) => { ok: true, value: unknown } | { ok: false, reason: string, message?: string }
}

/** The methods whose results are validated through a kept validator: the one on every call's path. */
const KEPT: ReadonlySet<string> = new Set(['tools/call'])

const validators = new WeakMap<object, Map<string, StandardSchemaV1>>()

/** The SDK's codecResultValidator for `method`, made once per codec. */
function keptResultValidator (codec: ResultCodec, method: string): StandardSchemaV1 {
  let byMethod = validators.get(codec)
  if (byMethod === undefined) {
    byMethod = new Map()
    validators.set(codec, byMethod)
  }
  let validator = byMethod.get(method)
  if (validator === undefined) {
    validator = {
      '~standard': {
        version: 1,
        vendor: 'mcp-wire-codec',
        validate (value: unknown) {
          const outcome = codec.validateResult(method, value)
          if (outcome.ok) return { value: outcome.value }
          return { issues: [{ message: outcome.reason === 'invalid' ? String(outcome.message) : `not-in-era: ${method}` }] }
        }
      }
    }
    byMethod.set(method, validator)
  }
  return validator
}

function isSchema (value: unknown): boolean {
  return value !== null && (typeof value === 'object' || typeof value === 'function') && '~standard' in (value as object)
}

export class GatewayClient extends Client {
  override request (request: { method: string, params?: Record<string, unknown> }, schemaOrOptions?: unknown, maybeOptions?: RequestOptions): Promise<never> {
    if (KEPT.has(request.method) && !isSchema(schemaOrOptions) && this.getNegotiatedProtocolVersion() !== undefined) {
      const codec = this._wireCodec() as unknown as ResultCodec
      return this._requestWithSchema(request, keptResultValidator(codec, request.method), schemaOrOptions as RequestOptions | undefined) as Promise<never>
    }
    return (super.request as (r: unknown, s?: unknown, o?: RequestOptions) => Promise<never>)(request, schemaOrOptions, maybeOptions)
  }
}
