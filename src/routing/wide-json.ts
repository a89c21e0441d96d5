/**
 * Objects too wide to parse (docs/ARCHITECTURE.md#limits): a JSON object of many distinct members is
 * the costliest JSON per byte there is. V8 parses it into a dictionary-mode object, internalising
 * every key; each later walk (argument validation, the journal's masking and serialising, the
 * guardrails) pays per member again: 150,000 keys in 1.3 MB cost ~340 ms of CPU per request,
 * against ~40 ms for 1.8 MB of array items. So a text is scanned for its widest object before it
 * is parsed, and refused past MAX_OBJECT_MEMBERS: a scan of the text's structure, linear, without
 * building anything.
 */

/** Members one JSON object may have in a request body (or an MCP message), at most. */
export const MAX_OBJECT_MEMBERS = 10_000

/** The shortest text an object of `members` members can be: `"":0` and a comma each (a repeated key still counts). */
function shortestText (members: number): number {
  return members * 5
}

/** Whether `text` holds more than `limit` colons: each member has one, so an object of more members needs more. */
function colonsOver (text: string, limit: number): boolean {
  let count = 0
  for (let at = text.indexOf(':'); at >= 0; at = text.indexOf(':', at + 1)) if (++count > limit) return true
  return false
}

/**
 * Whether `text` holds an object (at any depth) with more than `limit` members. Only the structure
 * is read, not checked: a text that is not JSON gets an answer too, and the parser its error.
 * Most large texts have few colons (arrays of numbers or strings, one long string), and are answered
 * by counting them; the rest are read once, a character at a time outside strings (2-3 ms for 2 MB of
 * table rows here, against 6 ms to parse them) and a quote at a time inside them (`indexOf`).
 */
export function hasObjectWiderThan (text: string, limit: number = MAX_OBJECT_MEMBERS): boolean {
  if (text.length < shortestText(limit + 1) || !colonsOver(text, limit)) return false
  // Per open container, its members so far (an object), or -1 (an array).
  const open: number[] = []
  const n = text.length
  let i = 0
  while (i < n) {
    const c = text.charCodeAt(i++)
    if (c === 34 /* " */) {
      // To the closing quote: the next quote not escaped (after an even run of backslashes).
      for (;;) {
        const q = text.indexOf('"', i)
        if (q < 0) return false // an unterminated string: no member follows
        let b = q - 1
        while (b >= i && text.charCodeAt(b) === 92 /* \ */) b--
        i = q + 1
        if ((q - 1 - b) % 2 === 0) break
      }
    } else if (c === 58 /* : */) {
      // A colon outside strings follows an object's key: one member more.
      const top = open.length - 1
      if (top >= 0 && (open[top] as number) >= 0 && ++(open[top] as number) > limit) return true
    } else if (c === 123 /* { */) {
      open.push(0)
    } else if (c === 91 /* [ */) {
      open.push(-1)
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      open.pop()
    }
  }
  return false
}
