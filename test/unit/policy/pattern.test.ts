import { test } from 'node:test'
import assert from 'node:assert/strict'
import fc from 'fast-check'
import { compileNamePattern } from '../../../src/policy/pattern.js'

test('patterns: literal names, * as any run of characters, nothing else', () => {
  const m = (p: string, n: string): boolean => {
    const f = compileNamePattern(p)
    assert.ok(f, p)
    return f(n)
  }
  assert.equal(m('bash', 'bash'), true)
  assert.equal(m('bash', 'bash2'), false)
  assert.equal(m('user_*', 'user_acme_tool_x'), true)
  assert.equal(m('user_*', 'xuser_'), false)
  assert.equal(m('*_file', 'read_file'), true)
  assert.equal(m('*', ''), true)
  assert.equal(m('a*b*c', 'abc'), true)
  assert.equal(m('a*b*c', 'aXbYc'), true)
  assert.equal(m('a*b*c', 'aXcYb'), false)
  assert.equal(m('*__search', 'web__search'), true)
  assert.equal(m('w**e', 'we'), true)
  for (const bad of ['', 'a.b', 'a b', 'a?', 'a[b]', '^a', 'é']) assert.equal(compileNamePattern(bad), undefined, bad)
})

test('patterns agree with the equivalent anchored regular expression', () => {
  const char = fc.constantFrom('a', 'b', '_', '*')
  fc.assert(fc.property(fc.array(char, { minLength: 1, maxLength: 12 }), fc.array(fc.constantFrom('a', 'b', '_'), { maxLength: 16 }), (p, n) => {
    const pattern = p.join('')
    const name = n.join('')
    const re = new RegExp('^' + pattern.replace(/\*/g, '.*') + '$')
    assert.equal(compileNamePattern(pattern)?.(name), re.test(name), `${pattern} ${name}`)
  }), { numRuns: 2000 })
})
