import { createHmac } from 'node:crypto'

/** The largest answer read from a guardrail webhook: an answer carries an action and at most a replacement. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024
export const DEFAULT_WEBHOOK_TIMEOUT_MS = 2000

/** What a guardrail webhook answers: what to do, and (redact) what to go on with instead. */
export interface WebhookAnswer {
  action: 'allow' | 'redact' | 'block' | 'flag'
  replacement?: unknown
  /** On a result with structuredContent, redact: the structuredContent to go on with (without it, the result's is dropped). */
  structuredContent?: unknown
}

/** `sha256=<hex>` of the raw body under the secret: the x-gateway-signature header, as the approval webhook signs. */
function webhookSignature (body: string, secret: string): string {
  return 'sha256=' + createHmac('sha256', secret).update(body, 'utf8').digest('hex')
}

/**
 * POSTs one check to a guardrail webhook (SPEC 18) and reads its answer within `timeoutMs`:
 * signed with GUARDRAIL_WEBHOOK_SECRET, no redirect followed, at most 4 MiB read. Throws with the
 * reason (a timeout, an HTTP status, an answer that is not `{action}`): the caller applies failOpen.
 */
export async function askWebhook (url: string, payload: unknown, opts: { secret: string, timeoutMs: number, signal: AbortSignal }): Promise<WebhookAnswer> {
  const body = JSON.stringify(payload)
  const signal = AbortSignal.any([opts.signal, AbortSignal.timeout(opts.timeoutMs)])
  let res: Response
  try {
    res = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-gateway-signature': webhookSignature(body, opts.secret) },
      body,
      redirect: 'manual',
      signal
    })
  } catch (err) {
    throw new Error(signal.aborted && !opts.signal.aborted ? `no answer within ${opts.timeoutMs} ms` : `not reachable (${(err as Error).message})`)
  }
  if (res.status < 200 || res.status > 299) {
    await res.body?.cancel().catch(() => {})
    throw new Error(`answered HTTP ${res.status}`)
  }
  const text = await readBounded(res, signal)
  let answer: unknown
  try { answer = JSON.parse(text) } catch { throw new Error('answered something that is not JSON') }
  const action = (answer as { action?: unknown } | null)?.action
  if (action !== 'allow' && action !== 'redact' && action !== 'block' && action !== 'flag') {
    throw new Error('answered without an action of allow, redact, block or flag')
  }
  return answer as WebhookAnswer
}

async function readBounded (res: Response, signal: AbortSignal): Promise<string> {
  if (res.body === null) return ''
  const reader = res.body.getReader()
  const chunks: Uint8Array[] = []
  let bytes = 0
  try {
    for (;;) {
      if (signal.aborted) throw new Error('no answer in time')
      const { done, value } = await reader.read()
      if (done) break
      bytes += value.byteLength
      if (bytes > MAX_ANSWER_BYTES) throw new Error(`answered more than ${MAX_ANSWER_BYTES} bytes`)
      chunks.push(value)
    }
  } finally {
    await reader.cancel().catch(() => {})
  }
  return Buffer.concat(chunks).toString('utf8')
}
