/**
 * HTTP header values of the 2026-07-28 transport (`Mcp-Name`, `Mcp-Param-*`): a value that is a
 * safe plain field value (RFC 9110: visible ASCII, space and tab, no leading or trailing
 * whitespace) is sent as is; anything else (non-ASCII, control characters, an empty string, or a
 * value that itself looks encoded) as `=?base64?<UTF-8 bytes in base64>?=`.
 */
const PREFIX = '=?base64?'
const SUFFIX = '?='

function isPlainFieldValue (value: string): boolean {
  if (value === '' || value.trim() !== value) return false
  if (value.startsWith(PREFIX) && value.endsWith(SUFFIX)) return false
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i)
    if (c !== 0x09 && (c < 0x20 || c > 0x7e)) return false
  }
  return true
}

export function encodeHeaderValue (value: string): string {
  return isPlainFieldValue(value) ? value : `${PREFIX}${Buffer.from(value, 'utf8').toString('base64')}${SUFFIX}`
}
