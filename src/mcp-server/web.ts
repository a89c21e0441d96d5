import type { IncomingMessage, ServerResponse } from 'node:http'

/**
 * A body-less web `Request` with the Node request's method, URL and headers: the SDK v2's
 * transports take web requests, and the body is handed to them already parsed. The URL's
 * host is not trusted for anything (the Host header was judged by the host check); only its
 * path and query are read.
 */
export function toWebRequest (req: IncomingMessage, signal?: AbortSignal): Request {
  const headers = new Headers()
  const raw = req.rawHeaders
  for (let i = 0; i + 1 < raw.length; i += 2) headers.append(raw[i]!, raw[i + 1]!)
  return new Request(new URL(req.url ?? '/', 'http://mcp.invalid'), { method: req.method ?? 'POST', headers, ...(signal ? { signal } : {}) })
}

/**
 * Writes a web `Response` to the Node response: status and headers, then the body as it comes
 * (a JSON answer, or an SSE stream whose events go out one by one). `signal` (the client went
 * away) stops reading the body.
 */
export async function writeWebResponse (response: Response, res: ServerResponse, signal: AbortSignal): Promise<void> {
  const headers: Record<string, string | string[]> = {}
  response.headers.forEach((value, name) => {
    const seen = headers[name]
    headers[name] = seen === undefined ? value : [...(Array.isArray(seen) ? seen : [seen]), value]
  })
  res.writeHead(response.status, headers)
  if (response.body === null) {
    res.end()
    return
  }
  // An event stream is open as soon as its head is out: a client waits for it before the first event.
  if (response.headers.get('content-type')?.startsWith('text/event-stream') === true) res.flushHeaders()
  const reader = response.body.getReader()
  const cancel = (): void => { reader.cancel().catch(() => {}) }
  signal.addEventListener('abort', cancel, { once: true })
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (!res.write(value)) await new Promise<void>((resolve) => { res.once('drain', resolve); res.once('close', resolve) })
    }
    res.end()
  } catch {
    res.destroy()
  } finally {
    signal.removeEventListener('abort', cancel)
  }
}

/**
 * Writes the answer to one request that may or may not send anything before its result (a legacy
 * tools/call: an upstream server's log messages, questions for the client): the transport answers
 * as an event stream, and when its first event is already the response, that response goes out as
 * plain JSON (what most calls are, and the cheaper answer for the client); otherwise the stream goes
 * out as it is. A stream that is only comments so far (keep-alives) decides for the stream.
 */
export async function writeAdaptiveResponse (response: Response, res: ServerResponse, signal: AbortSignal): Promise<void> {
  if (response.status !== 200 || response.body === null || response.headers.get('content-type')?.startsWith('text/event-stream') !== true) {
    await writeWebResponse(response, res, signal)
    return
  }
  const reader = response.body.getReader()
  const cancel = (): void => { reader.cancel().catch(() => {}) }
  signal.addEventListener('abort', cancel, { once: true })
  const chunks: Uint8Array[] = []
  let text = ''
  const decoder = new TextDecoder()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      text += decoder.decode(value, { stream: true })
      const end = text.indexOf('\n\n')
      if (end === -1) continue
      const data = firstEventData(text.slice(0, end))
      if (data === undefined) break
      let first: unknown
      try {
        first = JSON.parse(data)
      } catch {
        break
      }
      const m = first as Record<string, unknown> | null
      if (m === null || typeof m !== 'object' || 'method' in m || !('id' in m)) break
      // The response came first: nothing else will (one request per exchange). Drain and answer JSON.
      reader.cancel().catch(() => {})
      const headers: Record<string, string> = { 'content-type': 'application/json' }
      response.headers.forEach((value, name) => { if (name === 'mcp-session-id') headers[name] = value })
      res.writeHead(200, headers)
      res.end(data)
      return
    }
  } catch {
    res.destroy()
    return
  } finally {
    signal.removeEventListener('abort', cancel)
  }
  // The stream it is: what was read first, then the rest.
  const rest = new ReadableStream<Uint8Array>({
    start (controller) { for (const chunk of chunks) controller.enqueue(chunk) },
    async pull (controller) {
      try {
        const { done, value } = await reader.read()
        if (done) controller.close()
        else controller.enqueue(value)
      } catch (err) {
        controller.error(err)
      }
    },
    cancel () { reader.cancel().catch(() => {}) }
  })
  await writeWebResponse(new Response(rest, { status: response.status, headers: response.headers }), res, signal)
}

/** The data of an SSE event's text (its `data:` lines joined); undefined for a comment-only or data-less block. */
function firstEventData (block: string): string | undefined {
  const lines = block.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(line.startsWith('data: ') ? 6 : 5))
  return lines.length > 0 ? lines.join('\n') : undefined
}

/**
 * The answer to a JSON-RPC batch as JSON-RPC 2.0 says it is: an array of the responses, one
 * response included. The SDK's transport answers a batch holding one request with the bare
 * response object (so did the Go SDK's until its #1211); a client that matches a batch's answers
 * by array finds none. `response` as it is for anything but a batch's JSON answer.
 */
export async function asBatchAnswer (response: Response, body: unknown): Promise<Response> {
  if (!Array.isArray(body) || response.status !== 200 || response.headers.get('content-type')?.startsWith('application/json') !== true) return response
  const text = await response.text()
  const headers = new Headers(response.headers)
  headers.delete('content-length')
  return new Response(text.trimStart().startsWith('{') ? `[${text}]` : text, { status: 200, headers })
}
