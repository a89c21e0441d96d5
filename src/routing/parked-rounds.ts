/**
 * A call's round when calls can park (parked-calls.ts): a caller that answers in a later request
 * and can be asked something (it declared elicitation, sampling or roots) runs its call so that a
 * legacy server's questions park it, and this round answers with the first step; a retry whose
 * handle names a parked call resumes it instead of calling again. Anything else is a plain round.
 * The Gateway's side of parking, kept here so the Gateway only hands over its invoke.
 */
import { answersWithinCall, canBeAsked } from './client-relay.js'
import { requestStateRefusal } from './input-rounds.js'
import { ParkedCalls } from './parked-calls.js'
import type { ParkOwner, ParkedStep } from './parked-calls.js'
import type { InvokeOutcome } from './router.js'
import type { InputRound, Tier } from './types.js'

export interface ParkableRound {
  owner: ParkOwner
  input: InputRound
  /** The request's own signal: its caller leaving ends the run until it parks, and a resume's wait. */
  callerSignal: AbortSignal
  /** The call's invoke with this round (`signal`: the run's own, once it can park). */
  invoke: (input: InputRound | undefined, signal?: AbortSignal) => Promise<InvokeOutcome>
  /** What the round's answer names when the call parks. */
  call: { callId: string, name: string, startedAt: number, route: () => Tier | undefined }
}

export async function parkableRound (parked: ParkedCalls, r: ParkableRound): Promise<InvokeOutcome> {
  const { input } = r
  if (answersWithinCall(input.relay)) return await r.invoke(input)
  let step: ParkedStep<InvokeOutcome> | undefined
  if (ParkedCalls.names(input.server)) {
    step = await parked.resumeNamed<InvokeOutcome>(r.owner, input.server, input.inputResponses, r.callerSignal)
    if (step === undefined) return { ok: false, error: requestStateRefusal('gone'), toolMs: 0 }
  } else if (input.server === undefined && canBeAsked(input.capabilities)) {
    step = await parked.start<InvokeOutcome>(r.owner, async (ask, runSignal) =>
      await r.invoke({ ...input, relay: { ...input.relay, ask, passInputRequired: true } }, runSignal), r.callerSignal)
  } else {
    return await r.invoke(input)
  }
  if (step.kind === 'done') return step.value
  // The call waits for its caller's answers: this round says what the server asks (the Gateway seals it like any round's).
  const asked = Object.entries(step.inputRequests).map(([key, q]) => `${key} (${q.method})`).join(', ')
  return {
    ok: true,
    result: {
      callId: r.call.callId,
      name: r.call.name,
      route: r.call.route() ?? 'user_mcp',
      output: `The MCP server asks for input before it answers: ${asked}`,
      isError: false,
      error: null,
      truncated: false,
      trace: { resultType: 'input_required', inputRequests: step.inputRequests },
      durationMs: performance.now() - r.call.startedAt,
      toolMs: 0,
      inputRequired: { inputRequests: step.inputRequests, server: parked.serverOf(step.id) }
    }
  }
}
