/** What a name pattern may contain, for error messages. */
export const NAME_PATTERN_SYNTAX = "letters, digits, '_', '-' and '*' (any run of characters, including none)"

const PATTERN_CHARS = /^[A-Za-z0-9_*-]+$/

/**
 * Compiles a tool-name pattern (`user_*`, `write_*`, `*__search`, `bash`) into a matcher over
 * exposed names, or undefined when it is not a pattern. Matching is literal except for `*`, and
 * is done without RegExp: a greedy scan that backtracks only to the last `*` runs in at most
 * (name length x pattern length) steps, whatever the pattern, so no pattern can stall a listing.
 */
export function compileNamePattern (pattern: string): ((name: string) => boolean) | undefined {
  if (!PATTERN_CHARS.test(pattern)) return undefined
  const p = pattern.replace(/\*{2,}/g, '*')
  if (!p.includes('*')) return (name) => name === p
  if (p === '*') return () => true
  const parts = p.split('*')
  // A single star at one end is a prefix or a suffix test; the general case scans.
  if (parts.length === 2) {
    const [head = '', tail = ''] = parts
    return (name) => name.length >= head.length + tail.length && name.startsWith(head) && name.endsWith(tail)
  }
  return (name) => wildcardMatch(p, name)
}

function wildcardMatch (p: string, s: string): boolean {
  let pi = 0
  let si = 0
  let star = -1
  let mark = 0
  while (si < s.length) {
    if (pi < p.length && p[pi] !== '*' && p[pi] === s[si]) {
      pi++
      si++
    } else if (pi < p.length && p[pi] === '*') {
      star = pi++
      mark = si
    } else if (star !== -1) {
      pi = star + 1
      si = ++mark
    } else {
      return false
    }
  }
  while (pi < p.length && p[pi] === '*') pi++
  return pi === p.length
}
