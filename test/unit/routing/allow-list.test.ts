import { test } from 'node:test'
import assert from 'node:assert/strict'
import { HttpError } from '../../../src/errors.js'
import { expandFunctionNames, parseServerSelection, splitComma } from '../../../src/routing/allow-list.js'

test('splitComma: absent and empty lists are empty; items are trimmed, blanks dropped, order and repeats kept', () => {
  assert.deepEqual(splitComma(undefined), [])
  assert.deepEqual(splitComma(''), [])
  assert.deepEqual(splitComma(' , ,, '), [])
  assert.deepEqual(splitComma(' grep , ,read_file,'), ['grep', 'read_file'])
  // Duplicates are the next step's business (expandFunctionNames, parseServerSelection).
  assert.deepEqual(splitComma('a,b,a'), ['a', 'b', 'a'])
  assert.deepEqual(splitComma('@builtin'), ['@builtin'])
})

test('expandFunctionNames: @builtin is the 8 built-ins in their fixed order, @builtin-readonly the 3 that never write', () => {
  assert.deepEqual(expandFunctionNames(['@builtin']),
    ['bash', 'read_file', 'write_file', 'apply_patch', 'glob', 'grep', 'edit', 'update_agents_md'])
  assert.deepEqual(expandFunctionNames(['@builtin-readonly']), ['read_file', 'glob', 'grep'])
  // Tokens are trimmed before the group lookup.
  assert.deepEqual(expandFunctionNames(['  @builtin-readonly ']), ['read_file', 'glob', 'grep'])
})

test('expandFunctionNames: empty and blank entries give nothing', () => {
  assert.deepEqual(expandFunctionNames([]), [])
  assert.deepEqual(expandFunctionNames(['', '   ', '\t']), [])
})

test('expandFunctionNames: duplicates are removed, keeping the first occurrence in order (also across groups)', () => {
  assert.deepEqual(expandFunctionNames(['grep', '@builtin-readonly', 'my_fn', 'grep', ' my_fn ', 'read_file']),
    ['grep', 'read_file', 'glob', 'my_fn'])
  assert.deepEqual(expandFunctionNames(['@builtin-readonly', '@builtin']),
    ['read_file', 'glob', 'grep', 'bash', 'write_file', 'apply_patch', 'edit', 'update_agents_md'])
})

test('expandFunctionNames: unknown groups, other case and "*" are not groups: they pass through as names (the router reports them unresolved)', () => {
  assert.deepEqual(expandFunctionNames(['@builtins', '@BUILTIN', '*', 'weather']), ['@builtins', '@BUILTIN', '*', 'weather'])
})

test('parseServerSelection: empty input selects nothing', () => {
  const r = parseServerSelection([], 'u1')
  assert.deepEqual(r.serverIds, [])
  assert.equal(r.userOnly.size, 0)
  assert.deepEqual(r.errors, [])
})

test('parseServerSelection: plain ids are trimmed, blanks skipped, duplicates removed in first-seen order', () => {
  const r = parseServerSelection([' weather ', '', 'docs', 'weather', '  '], undefined)
  assert.deepEqual(r.serverIds, ['weather', 'docs'])
  assert.equal(r.userOnly.size, 0)
  assert.deepEqual(r.errors, [])
})

test('parseServerSelection: an id that is not ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$ is an mcp error, and the valid ones still select', () => {
  const long = 'a'.repeat(65)
  const max = 'b'.repeat(64)
  const r = parseServerSelection(['bad_id', '-lead', long, '*', 'ok-1', max, 'user_u1_tool_x'], 'u1')
  assert.deepEqual(r.serverIds, ['ok-1', max])
  assert.deepEqual(r.errors.map((e) => e.name), ['bad_id', '-lead', long, '*', 'user_u1_tool_x'])
  for (const e of r.errors) {
    assert.equal(e.kind, 'mcp')
    assert.equal(e.reason, 'Not a valid serverId (^[A-Za-z0-9][A-Za-z0-9-]{0,63}$)')
  }
})

test('parseServerSelection: user_{u}_service_{s} of the request tenant selects s for the tenant only', () => {
  const r = parseServerSelection(['user_u1_service_files', 'weather'], 'u1')
  assert.deepEqual(r.serverIds, ['files', 'weather'])
  assert.deepEqual([...r.userOnly], ['files'])
  assert.deepEqual(r.errors, [])
})

test('parseServerSelection: the same server named plainly and encoded is selected once, and is tenant-only', () => {
  const r = parseServerSelection(['files', 'user_u1_service_files', 'user_u1_service_files'], 'u1')
  assert.deepEqual(r.serverIds, ['files'])
  assert.deepEqual([...r.userOnly], ['files'])
})

test('parseServerSelection: an encoded id of another tenant, or without a request tenant, is GW_TENANT_MISMATCH', () => {
  for (const userId of ['u2', undefined]) {
    assert.throws(() => parseServerSelection(['weather', 'user_u1_service_files'], userId), (err: unknown) => {
      assert.ok(err instanceof HttpError)
      assert.equal(err.code, 'GW_TENANT_MISMATCH')
      assert.equal(err.message, "Server 'user_u1_service_files' belongs to another tenant than the request's")
      return true
    })
  }
})

test('parseServerSelection: an encoded name whose server part is not a valid id is an invalid serverId, not a tenant check', () => {
  const r = parseServerSelection(['user_u2_service_bad_id'], 'u1')
  assert.deepEqual(r.serverIds, [])
  assert.deepEqual(r.errors.map((e) => e.name), ['user_u2_service_bad_id'])
})

test('expandFunctionNames: names of Object.prototype (toString, constructor, __proto__) are plain names, not groups', () => {
  // CI fuzz counterexample: functions=toString was looked up in an object literal and gave a 500.
  assert.deepEqual(expandFunctionNames(['toString', 'constructor', '__proto__', 'hasOwnProperty']),
    ['toString', 'constructor', '__proto__', 'hasOwnProperty'])
})
