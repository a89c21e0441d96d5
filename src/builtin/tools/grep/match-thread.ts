/**
 * The worker thread of regex-worker.ts (RegexPool): matches a tenant's RegExp over file contents,
 * off the event loop. A job is `{ id, source, flags, room, maxLine, files: Uint8Array[] }`; for each
 * file (already known to be text, under the size cap) it splits lines as ripgrep sees them ('\n',
 * '\r' kept, a final empty line dropped; a line that is not valid UTF-8 never matches), tests the
 * RegExp and answers `{ id, ok, out: [{ m: [[line, content]...], t }] }` with at most `room` lines
 * kept per file (cut to `maxLine` characters) and every match counted in `t`. Started by URL; it
 * imports nothing of the gateway but src/workers/ (announceThread).
 */
import { parentPort } from 'node:worker_threads'
import { announceThread } from '../../../workers/index.js'

interface Job { id: number, source: string, flags: string, room: number, maxLine: number, files: Uint8Array[] }

const fatal = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })
const lenient = new TextDecoder('utf-8', { ignoreBOM: true })

function cut (line: string, maxLine: number): string {
  const s = line.endsWith('\r') ? line.slice(0, -1) : line
  return s.length > maxLine ? s.slice(0, maxLine) + '...' : s
}

/** The file's lines; undefined for a line that is not valid UTF-8 (it never matches). */
function lines (buf: Uint8Array): Array<string | undefined> {
  const text = lenient.decode(buf)
  let out: Array<string | undefined>
  if (!text.includes('\uFFFD')) {
    out = text.split('\n')
  } else {
    out = []
    let from = 0
    for (;;) {
      const nl = buf.indexOf(0x0a, from)
      const end = nl === -1 ? buf.length : nl
      try { out.push(fatal.decode(buf.subarray(from, end))) } catch { out.push(undefined) }
      if (nl === -1) break
      from = nl + 1
    }
  }
  if (out.length > 0 && out[out.length - 1] === '') out.pop()
  return out
}

const port = parentPort
if (port !== null) {
  // Tells the pool its thread id (for its CPU time) and lowers its priority (src/workers/thread.ts).
  announceThread(port)
  let key: string | undefined
  let re: RegExp | undefined
  port.on('message', (job: Job) => {
    try {
      const k = job.flags + '/' + job.source
      if (k !== key || re === undefined) {
        re = new RegExp(job.source, job.flags)
        key = k
      }
      const out: Array<{ m: Array<[number, string]>, t: number }> = []
      for (const buf of job.files) {
        // Per file: files join a batch in the order their reads finish, not in walk order.
        let room = job.room
        const ls = lines(buf)
        const m: Array<[number, string]> = []
        let t = 0
        for (let i = 0; i < ls.length; i++) {
          const line = ls[i]
          if (line === undefined || !re.test(line)) continue
          t++
          if (room > 0) {
            m.push([i + 1, cut(line, job.maxLine)])
            room--
          }
        }
        out.push({ m, t })
      }
      port.postMessage({ id: job.id, ok: true, out })
    } catch (err) {
      port.postMessage({ id: job.id, ok: false, error: err instanceof Error ? err.message : String(err) })
    }
  })
}
