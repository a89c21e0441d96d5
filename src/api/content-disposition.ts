/**
 * `Content-Disposition: attachment` for a file a tenant named (RFC 6266): the name is the
 * tenant's, so it may hold quotes, backslashes, control characters or non-ASCII. `filename=`
 * carries a printable-ASCII fallback (anything else becomes `_`), `filename*=` the exact name
 * percent-encoded as UTF-8 (RFC 8187); neither can end the header or add a parameter.
 */
export function attachmentDisposition (path: string): string {
  const name = path.split('/').filter((part) => part !== '').pop() ?? ''
  if (name === '') return 'attachment'
  // `%` too: some browsers percent-decode the plain filename.
  const fallback = name.replace(/[^\x20-\x7e]|["\\%]/gu, '_')
  // encodeURIComponent leaves ! ' ( ) * unescaped; RFC 8187's attr-char admits only ! of them.
  const encoded = encodeURIComponent(name).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`
}
