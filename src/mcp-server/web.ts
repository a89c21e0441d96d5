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
