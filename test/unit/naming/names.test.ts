import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  apiFunctionName, encodeUserServiceName, encodeUserToolName, isValidId, isWireName, parseUserServiceName,
  parseUserToolName, qualifiedName, shortHash, toWireName, WIRE_NAME_PATTERN
} from '../../../src/naming/names.js'

test('apiFunctionName: the examples of AI4J generateApiFunctionName', () => {
  const table: Array<[string, string, string]> = [
    ['weather.svc', 'get forecast!!', 'weather_svc_get_forecast'],
    ['9svc', 'x', 'tool_9svc_x'],
    ['-svc', 'x', 'tool_-svc_x'],
    ['github', 'create_issue', 'github_create_issue'],
    ['a__b', '__c__', 'a_b_c'],
    ['', '', 'tool_'],
    ['svc', 'tool/with/slashes', 'svc_tool_with_slashes']
  ]
  for (const [service, tool, expected] of table) {
    assert.equal(apiFunctionName(service, tool), expected, `${service} + ${tool}`)
  }
})

test('apiFunctionName: shortened to 64 AFTER the tool_ prefix (AI4J can reach 69)', () => {
  const name = apiFunctionName('9' + 'a'.repeat(40), 'b'.repeat(40))
  assert.equal(name.length, 64)
  assert.ok(name.startsWith('tool_9aaa'))
  assert.match(name, /_[0-9a-f]{8}$/)
  assert.ok(isWireName(name))
  // Deterministic, and a different long input gives a different name.
  assert.equal(apiFunctionName('9' + 'a'.repeat(40), 'b'.repeat(40)), name)
  assert.notEqual(apiFunctionName('9' + 'a'.repeat(40), 'b'.repeat(39) + 'c'), name)
})

test('user-encoded names: the first _tool_ after the userId ends it', () => {
  const table: Array<[string, { userId: string, toolName: string } | undefined]> = [
    ['user_42_tool_get_tool_info', { userId: '42', toolName: 'get_tool_info' }],
    ['user_1-2_tool_x', { userId: '1-2', toolName: 'x' }],
    ['user_acme_tool_a_tool_b', { userId: 'acme', toolName: 'a_tool_b' }],
    ['user_1_2_tool_x', undefined], // userIds have no underscore
    ['user__tool_x', undefined],
    ['user_42_tool_', undefined],
    ['user_42_service_gh', undefined],
    ['users_42_tool_x', undefined],
    ['read_file', undefined],
    [`user_${'a'.repeat(65)}_tool_x`, undefined]
  ]
  for (const [name, expected] of table) {
    assert.deepEqual(parseUserToolName(name), expected, name)
  }
  assert.equal(encodeUserToolName('42', 'get_tool_info'), 'user_42_tool_get_tool_info')
  assert.deepEqual(parseUserToolName(encodeUserToolName('a-b', 'x_tool_y')), { userId: 'a-b', toolName: 'x_tool_y' })
})

test('user-encoded service names', () => {
  assert.deepEqual(parseUserServiceName('user_42_service_github'), { userId: '42', serverId: 'github' })
  assert.deepEqual(parseUserServiceName(encodeUserServiceName('1-2', 'gh-2')), { userId: '1-2', serverId: 'gh-2' })
  assert.equal(parseUserServiceName('user_42_service_git_hub'), undefined) // serverIds have no underscore
  assert.equal(parseUserServiceName('user_42_tool_x'), undefined)
})

test('ids: letters, digits and dashes, no underscore, at most 64 chars', () => {
  for (const ok of ['1', '1-2', 'acme', 'A-b-9', 'a'.repeat(64)]) assert.ok(isValidId(ok), ok)
  for (const bad of ['', '-a', 'a_b', 'a b', 'a'.repeat(65), 'é', 'a.b']) assert.ok(!isValidId(bad), bad)
})

test('toWireName: valid names unchanged; others sanitised with a hash of the full name', () => {
  assert.equal(toWireName('read_file'), 'read_file')
  assert.equal(toWireName('a'.repeat(64)), 'a'.repeat(64))
  const dotted = toWireName('files.read')
  assert.match(dotted, /^files_read_[0-9a-f]{8}$/)
  assert.equal(dotted, `files_read_${shortHash('files.read')}`)
  // files.read and files/read must not share a wire name although both sanitise to files_read.
  assert.notEqual(toWireName('files.read'), toWireName('files/read'))
  const long = toWireName(`user_${'u'.repeat(64)}_tool_${'t'.repeat(64)}`)
  assert.equal(long.length, 64)
  assert.ok(WIRE_NAME_PATTERN.test(long))
  assert.match(toWireName('9lives'), /^tool_9lives_[0-9a-f]{8}$/)
  assert.ok(isWireName(toWireName('日本語')))
  assert.ok(isWireName(toWireName('')))
})

test('toWireName: 2,000 distinct natural names give 2,000 distinct wire names', () => {
  const seen = new Map<string, string>()
  for (let i = 0; i < 2000; i++) {
    const natural = `user_${'x'.repeat(60)}_tool_name.${i}`
    const wire = toWireName(natural)
    assert.ok(isWireName(wire))
    assert.equal(seen.get(wire), undefined, `collision for ${natural}`)
    seen.set(wire, natural)
  }
})

test('qualifiedName', () => {
  assert.equal(qualifiedName('github', 'create_issue'), 'github__create_issue')
})
