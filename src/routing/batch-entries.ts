/**
 * The entries of POST /invoke/batch that are not a tool's result: a call held for an approval,
 * and a call that never reached a tool (its HTTP status and error as /invoke would answer them).
 * Also the call ids the gateway gives calls whose callers gave none.
 */
import { randomUUID } from 'node:crypto'
import { quoted } from '../errors.js'
import type { HttpError } from '../errors.js'
import { refusalOutput } from './output.js'
import type { InvokeOutcome, InvokeResult } from './router.js'

export type BatchEntry =
  | (Extract<InvokeOutcome, { ok: true }>['result'])
  | { callId: string, name: string | null, output: string, isError: true, statusCode: number, error: { code: string, message: string } }
  | PendingBatchEntry

/** A batch entry held for an approval: the 202 body of /invoke plus what a model can be handed. */
export interface PendingBatchEntry {
  callId: string
  name: string
  status: 'pending'
  approvalId: string
  output: string
  isError: true
  statusCode: 202
  error: { code: string, message: string }
}

/** A call id for a call whose caller gave none (the same form for every entry of a batch). */
export function newCallId (): string {
  return `call_${randomUUID().replace(/-/g, '')}`
}

export function pendingEntry (result: InvokeResult, approvalId: string): PendingBatchEntry {
  return {
    callId: result.callId,
    name: result.name,
    status: 'pending',
    approvalId,
    output: result.output,
    isError: true,
    statusCode: 202,
    error: result.error ?? { code: 'GW_APPROVAL_PENDING', message: result.output }
  }
}

/**
 * The entry of a call that never reached a tool: its HTTP status and error as /invoke would
 * answer them, plus the `TOOL_ERROR:` output a tool failure has, so that the orchestrator can
 * hand every entry's output to the model as the tool message.
 */
export function entryError (call: unknown, error: HttpError): BatchEntry {
  const c = (call !== null && typeof call === 'object' ? call : {}) as Record<string, unknown>
  const callId = typeof c.callId === 'string' ? c.callId : newCallId()
  const name = typeof c.name === 'string' ? c.name : null
  // A bad entry's name can be anything the body limit allows; the output stays a short message.
  const tool = name === null ? '' : quoted(name)
  return {
    callId,
    name,
    output: refusalOutput(error.code, error.message, tool, callId),
    isError: true,
    statusCode: error.statusCode,
    error: { code: error.code, message: error.message }
  }
}
