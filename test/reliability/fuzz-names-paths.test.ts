import { test } from 'node:test'
import assert from 'node:assert/strict'
import { mkdtemp, readlink, realpath, rm, mkdir, writeFile, symlink } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { isAbsolute, join, relative, sep } from 'node:path'
import fc from 'fast-check'
import {
  apiFunctionName, encodeUserToolName, isWireName, parseUserToolName, toWireName, ID_PATTERN
} from '../../src/naming/names.js'
import { locate } from '../../src/builtin/workspace/fd-tree.js'
import { ToolError } from '../../src/builtin/types.js'
import { testWorkspace } from '../helpers/workspace.js'

const userId = fc.stringMatching(ID_PATTERN)

test('name codec: encode/parse round-trips for every valid userId and any tool name', () => {
  fc.assert(fc.property(userId, fc.string({ minLength: 1, maxLength: 80 }), (u, tool) => {
    assert.deepEqual(parseUserToolName(encodeUserToolName(u, tool)), { userId: u, toolName: tool })
  }), { numRuns: 2000 })
})

test('wire names are always valid and deterministic; distinct random natural names never share one', () => {
  fc.assert(fc.property(fc.string({ maxLength: 200 }), fc.string({ maxLength: 200 }), (a, b) => {
    const wa = toWireName(a)
    assert.ok(isWireName(wa), wa)
    assert.equal(toWireName(a), wa)
    if (a !== b) assert.notEqual(wa, toWireName(b), `${JSON.stringify(a)} and ${JSON.stringify(b)} collide`)
  }), { numRuns: 3000 })
  fc.assert(fc.property(fc.string({ maxLength: 100 }), fc.string({ maxLength: 100 }), (s, t) => {
    const name = apiFunctionName(s, t)
    assert.ok(name.length <= 64 && /^[a-zA-Z][a-zA-Z0-9_-]*$/.test(name), name)
  }), { numRuns: 2000 })
})

test('path resolver: random path strings never resolve outside the workspace or a read root', async (t) => {
  const base = await realpath(await mkdtemp(join(tmpdir(), 'tg-fuzz-')))
  t.after(async () => await rm(base, { recursive: true, force: true }))
  const root = join(base, 'ws')
  const other = join(base, 'other')
  await mkdir(join(root, 'a', 'b'), { recursive: true })
  await mkdir(other)
  await writeFile(join(other, 'secret'), 'x')
  await symlink('/', join(root, 'to-root'))
  await symlink(other, join(root, 'to-other'))
  await symlink('../../..', join(root, 'a', 'up'))
  const ws = testWorkspace(root, {
    tenant: 't',
    workspaceId: 'w',
    limits: { readMaxChars: 1000, commandTimeoutMs: 1000, bashLogChars: 1000, maxProcessOutputChars: 1000, outputMaxChars: 1000 }
  })
  const segment = fc.constantFrom(
    '..', '.', 'a', 'b', 'to-root', 'to-other', 'up', 'etc', 'passwd', 'secret', '', '%2e%2e', '\u0000', 'x'.repeat(300), 'proc', 'self', 'root'
  )
  const pathArb = fc.tuple(fc.boolean(), fc.array(segment, { maxLength: 8 }))
    .map(([abs, parts]) => (abs ? '/' : '') + parts.join('/'))
  // `.. ` or `..x` is a name inside the root; only `..` itself or `../...` leaves it.
  const inside = (p: string): boolean => { const r = relative(root, p); return r !== '..' && !r.startsWith(`..${sep}`) && !isAbsolute(r) }
  await fc.assert(fc.asyncProperty(fc.oneof(pathArb, fc.string({ maxLength: 300 })), async (input) => {
    for (const intent of ['read', 'write'] as const) {
      try {
        const loc = await locate(ws, input, intent)
        // Where the held parent directory really is: the kernel's answer, not ours.
        const parent = await readlink(`/proc/self/fd/${loc.parent.fd}`).finally(async () => { await loc.close() })
        const real = loc.name === '' ? parent : join(parent, loc.name)
        assert.ok(inside(parent), `${JSON.stringify(input)} (${intent}) resolved to ${real}`)
      } catch (err) {
        // Refusals must be clean tool errors, never Node exceptions.
        assert.ok(err instanceof ToolError, `${JSON.stringify(input)}: ${(err as Error).stack ?? String(err)}`)
      }
    }
  }), { numRuns: 1500, examples: [['.. '], ['..x/../..']] })
})
