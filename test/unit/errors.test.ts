import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFile, readdir } from 'node:fs/promises'
import { join } from 'node:path'
import {
  ERROR_CODES, HTTP_ERROR_CODES, HttpError, INTERNAL_MESSAGE, JSON_RPC_CODES, TOOL_ERROR_CODES,
  isGwCode, renderErrorTable, toHttpErrorBody, toHttpFailure, toJsonRpcFailure, toJsonRpcRefusal
} from '../../src/errors.js'
import type { ErrorCodeInfo } from '../../src/errors.js'
import { RegistryUnavailableError } from '../../src/registry/errors.js'
import { UpstreamError } from '../../src/remote-mcp/errors.js'

const rows = Object.entries(ERROR_CODES) as Array<[string, ErrorCodeInfo]>
const GW_CODE = /\bGW_[A-Z][A-Z0-9_]*/g

async function sourceFiles (dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true })
  return entries.filter((e) => e.isFile() && /\.(ts|mts|js|mjs)$/.test(e.name)).map((e) => join(e.parentPath, e.name))
}

test('every GW_ code written in src/, plugins/ and routes/ is in the error table', async () => {
  const files = (await Promise.all(['src', 'plugins', 'routes'].map(sourceFiles))).flat()
  assert.ok(files.length > 50, `scanned only ${files.length} files`)
  const missing: string[] = []
  let seen = 0
  for (const file of files) {
    for (const [code] of (await readFile(file, 'utf8')).matchAll(GW_CODE)) {
      seen++
      if (!isGwCode(code)) missing.push(`${file}: ${code}`)
    }
  }
  assert.ok(seen > 100, `found only ${seen} GW_ codes: is the scan still reading the sources?`)
  assert.deepEqual(missing, [], 'add these codes to ERROR_CODES in src/errors.ts (and run `npm run docs`)')
})

test('every row of the table has a kind, a status that fits it, a meaning and retryable', () => {
  assert.ok(rows.length >= 30)
  for (const [code, info] of rows) {
    // GW_ codes, plus the names the contract gives without the prefix (quota and approval outcomes).
    assert.match(code, /^(?:GW_[A-Z][A-Z0-9_]*|WORKSPACE_QUOTA_EXCEEDED|APPROVAL_DENIED|APPROVAL_EXPIRED)$/)
    assert.ok(info.kind.length > 0, code)
    assert.ok(!info.kind.includes('internal') || info.kind.length === 1, `${code}: internal is a kind of its own`)
    if (info.kind.includes('http')) assert.ok(typeof info.status === 'number' && info.status >= 400 && info.status < 600, `${code}: HTTP status ${info.status}`)
    else if (info.kind.includes('tool')) assert.equal(info.status, 200, `${code}: a tool-level code arrives in a 200`)
    else assert.equal(info.status, null, `${code}: an internal code has no status`)
    assert.ok(info.meaning.trim().length > 10 && !info.meaning.includes('\n'), `${code}: one-line meaning`)
    assert.equal(typeof info.retryable, 'boolean', code)
  }
})

test('the HTTP and tool code lists are the table\'s rows of that kind', () => {
  const ofKind = (kind: string): string[] => rows.filter(([, info]) => info.kind.includes(kind as never)).map(([code]) => code).sort()
  assert.deepEqual(Object.keys(HTTP_ERROR_CODES).sort(), ofKind('http'))
  for (const [code, status] of Object.entries(HTTP_ERROR_CODES)) assert.equal(status, ERROR_CODES[code as keyof typeof ERROR_CODES].status)
  assert.deepEqual([...new Set(Object.values(TOOL_ERROR_CODES))].sort(), ofKind('tool'))
})

test('the README\'s error table is the one rendered from the table', async () => {
  const readme = await readFile('README.md', 'utf8')
  const table = /<!-- errors:start -->\n([\s\S]*?)\n<!-- errors:end -->/.exec(readme)?.[1]
  assert.equal(table, renderErrorTable(), 'run `npm run docs` to regenerate it')
  assert.equal(table?.split('\n').length, rows.length + 2)
  const unknown = [...readme.matchAll(GW_CODE)].map(([code]) => code).filter((code) => !isGwCode(code))
  assert.deepEqual(unknown, [], 'the README names codes the gateway does not have')
})

test('HTTP form: HttpErrors as they are, typed GW_ codes by the table, bare 4xx by status, the rest hidden as GW_INTERNAL', () => {
  assert.deepEqual(toHttpFailure(new HttpError('GW_NOT_ALLOWED', 'no')), { statusCode: 403, code: 'GW_NOT_ALLOWED', message: 'no' })
  assert.deepEqual(toHttpFailure(new HttpError('GW_UPSTREAM_ERROR', 'list failed')), { statusCode: 502, code: 'GW_UPSTREAM_ERROR', message: 'list failed' })
  assert.deepEqual(toHttpFailure(new RegistryUnavailableError()), { statusCode: 503, code: 'GW_REGISTRY_UNAVAILABLE', message: 'registry unavailable' })
  const bare = (statusCode: number): Error => Object.assign(new Error('from a library'), { statusCode })
  assert.deepEqual(toHttpFailure(bare(415)), { statusCode: 415, code: 'GW_UNSUPPORTED_MEDIA_TYPE', message: 'from a library' })
  assert.deepEqual(toHttpFailure(bare(429)), { statusCode: 429, code: 'GW_RATE_LIMITED', message: 'from a library' })
  assert.deepEqual(toHttpFailure(bare(403)), { statusCode: 403, code: 'GW_FORBIDDEN', message: 'from a library' })
  // A 4xx with no code of its own keeps its status and gets the general code (its table status differs: 418 is no 400).
  assert.deepEqual(toHttpFailure(bare(418)), { statusCode: 418, code: 'GW_BAD_REQUEST', message: 'from a library' })
  assert.deepEqual(toHttpFailure(bare(503)), { statusCode: 500, code: 'GW_INTERNAL', message: INTERNAL_MESSAGE })
  assert.deepEqual(toHttpFailure(new Error('/home/secret/path')), { statusCode: 500, code: 'GW_INTERNAL', message: INTERNAL_MESSAGE })
  assert.deepEqual(
    toHttpFailure(Object.assign(new Error('leak'), { code: 'GW_INTERNAL' })),
    { statusCode: 500, code: 'GW_INTERNAL', message: INTERNAL_MESSAGE }
  )
  // An internal code is not an HTTP code: the error is a bug by the time it reaches a response.
  assert.deepEqual(toHttpFailure(new UpstreamError('GW_UPSTREAM_CONNECT', 'refused')), { statusCode: 500, code: 'GW_INTERNAL', message: INTERNAL_MESSAGE })
  // Prototype keys are not codes.
  assert.equal(toHttpFailure(Object.assign(new Error('x'), { code: 'toString' })).code, 'GW_INTERNAL')
})

test('the HTTP error body: the failure with the status\'s reason phrase, a 5xx message hidden', () => {
  assert.deepEqual(
    toHttpErrorBody(new HttpError('GW_REQUEST_TIMEOUT', 'too slow')),
    { statusCode: 408, code: 'GW_REQUEST_TIMEOUT', error: 'Request Timeout', message: 'too slow' }
  )
  assert.deepEqual(
    toHttpErrorBody(new HttpError('GW_RATE_LIMITED', 'later')),
    { statusCode: 429, code: 'GW_RATE_LIMITED', error: 'Too Many Requests', message: 'later' }
  )
  assert.deepEqual(
    toHttpErrorBody(new Error('/etc/secret')),
    { statusCode: 500, code: 'GW_INTERNAL', error: 'Internal Server Error', message: INTERNAL_MESSAGE }
  )
})

test('/mcp refusals: the HTTP status and code, every 5xx message hidden, malformed JSON a parse error', () => {
  assert.deepEqual(
    toJsonRpcRefusal(new HttpError('GW_MALFORMED_JSON', 'Parse error: x')),
    { statusCode: 400, code: 'GW_MALFORMED_JSON', message: 'Parse error: x', rpcCode: JSON_RPC_CODES.parseError }
  )
  assert.deepEqual(
    toJsonRpcRefusal(new HttpError('GW_UNAUTHORIZED', 'no key')),
    { statusCode: 401, code: 'GW_UNAUTHORIZED', message: 'no key', rpcCode: -32000 }
  )
  assert.deepEqual(
    toJsonRpcRefusal(new RegistryUnavailableError()),
    { statusCode: 503, code: 'GW_REGISTRY_UNAVAILABLE', message: INTERNAL_MESSAGE, rpcCode: -32000 }
  )
})

test('JSON-RPC errors of MCP requests: -32602 for the caller\'s mistakes, -32000 for a rate limit, -32603 for the gateway\'s own', () => {
  assert.deepEqual(
    toJsonRpcFailure(new HttpError('GW_TOOL_NOT_FOUND', 'No tool')),
    { rpcCode: -32602, message: 'No tool', data: { code: 'GW_TOOL_NOT_FOUND', statusCode: 404 } }
  )
  assert.deepEqual(
    toJsonRpcFailure(new HttpError('GW_RATE_LIMITED', 'later')),
    { rpcCode: -32000, message: 'later', data: { code: 'GW_RATE_LIMITED', statusCode: 429 } }
  )
  assert.deepEqual(
    toJsonRpcFailure(new HttpError('GW_UPSTREAM_ERROR', 'down')),
    { rpcCode: -32603, message: 'down', data: { code: 'GW_UPSTREAM_ERROR', statusCode: 502 } }
  )
  assert.deepEqual(
    toJsonRpcFailure(new RegistryUnavailableError()),
    { rpcCode: -32603, message: 'registry unavailable', data: { code: 'GW_REGISTRY_UNAVAILABLE' } }
  )
  assert.deepEqual(toJsonRpcFailure(new TypeError('x is undefined')), { rpcCode: -32603, message: INTERNAL_MESSAGE, data: { code: 'GW_INTERNAL' } })
})
