/** Reading ripgrep's output: the match records and the --stats block that ends them. */
import { GREP_MAX_LINE_CHARS } from './regex-worker.js'

/**
 * ripgrep's --stats block, printed after the last match (which always starts with the absolute
 * search path, never with '\n'). rg 13 prints "\n<n> matches\n<n> matched lines\n<n> files
 * contained matches\n<n> files searched\n..."; anything else means the output is not what this
 * parser expects and the Node engine answers instead.
 */
const RG_STATS = /^\n\d+ matches\n\d+ matched lines\n\d+ files contained matches\n(\d+) files searched\n/

const fatalUtf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

function cutLine (line: string): string {
  const s = line.endsWith('\r') ? line.slice(0, -1) : line
  return s.length > GREP_MAX_LINE_CHARS ? `${s.slice(0, GREP_MAX_LINE_CHARS)}...` : s
}

/**
 * Incremental parser of `rg --null --line-number --with-filename --stats` output: records
 * "<abs path>\0<line>:<content>\n" (the path is read up to its NUL first, so a name holding '\n'
 * parses; content may hold NULs under --text), then the stats block. Lines that are not valid
 * UTF-8 are dropped (the Node engine never matches them). Content is cut as it arrives.
 */
export class RgOutputParser {
  readonly found: Array<{ file: string, line: number, content: string }> = []
  readonly files: string[] = []
  private pending: Buffer[] = []
  private stats: Buffer[] | undefined
  private bad = false
  private lastFile: string | undefined
  private readonly seen = new Set<string>()

  push (d: Buffer): void {
    if (this.bad) return
    if (this.stats !== undefined) { this.stats.push(d); return }
    this.pending.push(d)
    if (d.indexOf(0x0a) === -1) return
    const buf = this.pending.length === 1 ? d : Buffer.concat(this.pending)
    this.pending = []
    let pos = 0
    while (pos < buf.length) {
      if (buf[pos] === 0x0a) {
        this.stats = [buf.subarray(pos)]
        return
      }
      const nul = buf.indexOf(0, pos)
      if (nul === -1) break
      const colon = buf.indexOf(0x3a, nul + 1)
      if (colon === -1) break
      const nl = buf.indexOf(0x0a, colon + 1)
      if (nl === -1) break
      this.record(buf.subarray(pos, nul), buf.subarray(nul + 1, colon), buf.subarray(colon + 1, nl))
      if (this.bad) return
      pos = nl + 1
    }
    if (pos < buf.length) this.pending.push(buf.subarray(pos))
  }

  private record (pathBytes: Buffer, lineBytes: Buffer, raw: Buffer): void {
    const lineNo = Number(lineBytes.toString('latin1'))
    if (!Number.isSafeInteger(lineNo) || lineNo < 1) { this.bad = true; return }
    let text: string
    try {
      text = fatalUtf8.decode(raw)
    } catch {
      return
    }
    const file = pathBytes.toString('utf8')
    this.found.push({ file, line: lineNo, content: cutLine(text) })
    if (file !== this.lastFile && !this.seen.has(file)) {
      this.seen.add(file)
      this.files.push(file)
    }
    this.lastFile = file
  }

  /** filesSearched from the stats block; undefined when the output was not as expected. */
  end (): number | undefined {
    if (this.bad || this.stats === undefined || this.pending.length > 0) return undefined
    const m = RG_STATS.exec(Buffer.concat(this.stats).toString('latin1'))
    return m === null ? undefined : Number(m[1])
  }
}
