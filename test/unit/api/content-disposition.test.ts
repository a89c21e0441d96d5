import { test } from 'node:test'
import assert from 'node:assert/strict'
import { attachmentDisposition } from '../../../src/api/content-disposition.js'

test('a plain name: the same in both parameters', () => {
  assert.equal(attachmentDisposition('src/main.py'), 'attachment; filename="main.py"; filename*=UTF-8\'\'main.py')
})

test('quotes, backslashes, percent signs, control characters and non-ASCII cannot escape the header', () => {
  assert.equal(attachmentDisposition('docs/résumé "x".html'),
    'attachment; filename="r_sum_ _x_.html"; filename*=UTF-8\'\'r%C3%A9sum%C3%A9%20%22x%22.html')
  const nasty = 'a\\b";\r\nSet-Cookie: x=1; filename=evil.exe%41\u0000(\'*).txt'
  const header = attachmentDisposition(nasty)
  assert.equal(
    header,
    'attachment; filename="a_b_;__Set-Cookie: x=1; filename=evil.exe_41_(\'*).txt"; filename*=UTF-8\'\'a%5Cb%22%3B%0D%0ASet-Cookie%3A%20x%3D1%3B%20filename%3Devil.exe%2541%00%28%27%2A%29.txt'
  )
  // No CR, LF, NUL; the quoted fallback has no inner quote; the encoded one only RFC 8187 attr-chars.
  assert.equal(/[\r\n]/.test(header) || header.includes('\u0000'), false)
  const [, quoted, encoded] = /^attachment; filename="([^"]*)"; filename\*=UTF-8''(.*)$/.exec(header) ?? []
  assert.ok(quoted !== undefined && encoded !== undefined)
  assert.match(encoded, /^[A-Za-z0-9!#$&+.^_`|~%-]+$/)
  assert.equal(decodeURIComponent(encoded), nasty)
})

test('a path without a name is a bare attachment', () => {
  assert.equal(attachmentDisposition(''), 'attachment')
  assert.equal(attachmentDisposition('/'), 'attachment')
})
