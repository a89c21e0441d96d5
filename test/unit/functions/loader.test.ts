import { test } from 'node:test'
import assert from 'node:assert/strict'
import { resolve } from 'node:path'
import { DiscoveryError } from '../../../src/discovery/modules.js'
import { loadFunctions } from '../../../src/functions/loader.js'

const dir = (name: string): string => resolve('test/fixtures/functions', name)

test('loads every function-shaped export, deterministic order', async () => {
  const loaded = await loadFunctions([dir('priority')])
  assert.deepEqual(loaded.map((f) => f.tool.name).sort(), ['fn_a', 'only_fn', 'svc_x'])
  assert.ok(loaded.every((f) => f.file.endsWith('fns.ts')))
})

test('a duplicate name stops start-up with an error naming both files', async () => {
  await assert.rejects(loadFunctions([dir('duplicate')]), (err: unknown) => {
    assert.ok(err instanceof DiscoveryError)
    assert.match(err.message, /duplicate function name 'same_name'/)
    assert.match(err.message, /duplicate\/a\.ts/)
    assert.match(err.message, /duplicate\/b\.ts/)
    return true
  })
})

test('a directory named twice is loaded once', async () => {
  const loaded = await loadFunctions([dir('priority'), dir('priority') + '/'])
  assert.equal(loaded.length, 3)
})

test('a module that throws at import stops start-up naming the file', async () => {
  await assert.rejects(loadFunctions([dir('broken')]), (err: unknown) => {
    assert.ok(err instanceof DiscoveryError)
    assert.match(err.message, /throws-at-load\.ts: failed to load \(boom at import\)/)
    return true
  })
})

test('invalid definitions are refused, each named', async () => {
  await assert.rejects(loadFunctions([dir('invalid')]), (err: unknown) => {
    assert.ok(err instanceof DiscoveryError)
    assert.equal(err.problems.length, 5)
    assert.match(err.message, /'has spaces' has an invalid name/)
    assert.match(err.message, /'read_file' uses a reserved name/)
    assert.match(err.message, /'user_1_tool_x' uses the reserved user_\{userId\}_tool_ form/)
    assert.match(err.message, /'no_schema' needs parameters/)
    assert.match(err.message, /'bad_schema' has an invalid parameters schema/)
    return true
  })
})

test('a missing directory is an error, not an empty set', async () => {
  await assert.rejects(loadFunctions(['/nonexistent/functions']), /cannot read directory/)
})
