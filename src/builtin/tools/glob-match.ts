/**
 * Glob patterns are tenants' input, and so are the file names they are matched against: picomatch
 * compiles a glob to a backtracking RegExp, and `*a*a*a*a*a*a*b` (`[^/]*?a[^/]*?a...b`) tries
 * C(n, 6) ways to fail on a name of n 'a's (2.7 s for 60; years for 200) with the event loop held.
 * A pattern that can backtrack without bound (more than one `**`, more than two `*` in one segment,
 * an extglob) is matched in grep's regex workers (grep/regex-worker.ts: off the event loop, fair
 * between tenants, under the call's CPU budget, after which the worker is killed); any other is
 * bounded per name (at most ~1M steps on a 4,096-character path) and matched in process.
 */
import { regexPool } from './grep/regex-worker.js'
import type { RegexCall } from './grep/regex-worker.js'

/** Extglob syntax: `*(`, `+(`, `?(`, `@(`, `!(`: nested quantifiers once compiled. */
const EXTGLOB = /[*+?@!]\(/

/** Paths per worker batch (their text is copied to the worker, a few MB at most). */
const CHUNK = 20_000

/** Whether picomatch's RegExp for `glob` may backtrack without bound (see the module comment). */
export function isComplexGlob (glob: string): boolean {
  if (EXTGLOB.test(glob)) return true
  let globstars = 0
  for (const segment of glob.split('/')) {
    if (segment === '**') {
      if (++globstars > 1) return true
    } else if (starsIn(segment) > 2) {
      return true
    }
  }
  return false
}

/** Unescaped `*` outside bracket expressions (braces are counted as written: conservative). */
function starsIn (segment: string): number {
  let stars = 0
  let inClass = false
  for (let i = 0; i < segment.length; i++) {
    const c = segment[i]
    if (c === '\\') i++
    else if (inClass) inClass = c !== ']'
    else if (c === '[') inClass = true
    else if (c === '*') stars++
  }
  return stars
}

/**
 * The paths `re` matches, tested in the regex workers in batches (one path per line: a `\n` in a
 * name is sent as NUL, which no file name holds). Rejects with grep's ToolError when the call's
 * budget runs out ("Pattern took too long to evaluate ...") or the call is cancelled.
 */
export async function matchInWorker (re: RegExp, paths: readonly string[], call: RegexCall): Promise<string[]> {
  const out: string[] = []
  const encoder = new TextEncoder()
  for (let i = 0; i < paths.length; i += CHUNK) {
    const chunk = paths.slice(i, i + CHUNK)
    // A buffer of its own: it is transferred to the worker.
    const text = encoder.encode(chunk.map((p) => p.replaceAll('\n', '\0')).join('\n') + '\n')
    const [file] = await regexPool().match({ source: re.source, flags: re.flags, room: chunk.length, files: [text] }, call)
    for (const [line] of file?.m ?? []) out.push(chunk[line - 1] as string)
  }
  return out
}

/** Distinct file names whose verdict one call remembers (a tree repeats names: index.ts, README.md). */
const REMEMBERED_NAMES = 10_000

/**
 * grep's `include` for a file-name glob that may backtrack without bound: each name tested in the
 * regex workers (one round trip per name not seen before in this call), under the call's budget.
 */
export function includeInWorker (re: RegExp, call: RegexCall): (name: string) => Promise<boolean> {
  const seen = new Map<string, boolean>()
  return async (name) => {
    const known = seen.get(name)
    if (known !== undefined) return known
    const verdict = (await matchInWorker(re, [name], call)).length > 0
    if (seen.size < REMEMBERED_NAMES) seen.set(name, verdict)
    return verdict
  }
}
