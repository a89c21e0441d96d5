/**
 * A string as a JSON string literal with U+2028 and U+2029 escaped too: then it is a string literal in both
 * JavaScript and Python, and holds no character that any reader (JavaScript's `//` comments, Python's
 * `str.splitlines`, a log viewer) takes for a line break, so a name from a tool server stays on its line.
 */
export function jsonString (s: string): string {
  return JSON.stringify(s).replace(/\u2028/g, '\\u2028').replace(/\u2029/g, '\\u2029')
}
