/**
 * Attack: a flood (`yes`) made a built-in's JSON result longer than the
 * output cap, and the generic cap cut the JSON text, so the model and the orchestrator got
 * something that does not parse. As docs/ARCHITECTURE.md#result-and-trace says, a built-in trims its own long fields, with the marker
 * inside the strings, and the output stays valid JSON under the cap.
 */
import { test } from 'node:test'
import type { TestContext } from 'node:test'
import assert from 'node:assert/strict'
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startGateway } from '../../scripts/lib/gateway-process.js'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'
import { processesMatching } from '../../scripts/lib/proc.js'
import { cutJsonString, fitJsonValue } from '../../src/routing/output.js'

interface InvokeResult { isError: boolean, output: string, truncated: boolean, error: { message: string } | null }

const CAP = 4000

async function gateway (t: TestContext): Promise<{ gw: GatewayProcess, workspaces: string }> {
  const workspaces = await mkdtemp(join(tmpdir(), 'tg-sec-output-'))
  t.after(async () => await rm(workspaces, { recursive: true, force: true }))
  const gw = await startGateway(t, { SANDBOX: 'bwrap', WORKSPACES_DIR: workspaces, OUTPUT_MAX_CHARS: String(CAP) })
  t.after(async () => {
    await gw.stop(5000)
    for (const p of await processesMatching(workspaces)) {
      try { process.kill(p.pid, 'SIGKILL') } catch {}
    }
  })
  return { gw, workspaces }
}

async function invoke (gw: GatewayProcess, name: string, args: Record<string, unknown>, limits: Record<string, number> = {}): Promise<InvokeResult> {
  const res = await fetch(`${gw.url}/invoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name, userId: 'flood', arguments: args, context: { limits } })
  })
  assert.equal(res.status, 200)
  return await res.json() as InvokeResult
}

/** The output is valid JSON, within `cap`, flagged truncated, and returns the parsed value. */
function parsedUnderCap (r: InvokeResult, cap: number): Record<string, unknown> {
  assert.equal(r.isError, false, r.output.slice(0, 500))
  assert.ok(r.output.length <= cap, `output is ${r.output.length} chars, cap ${cap}`)
  let value: Record<string, unknown>
  try {
    value = JSON.parse(r.output) as Record<string, unknown>
  } catch (err) {
    assert.fail(`output is not valid JSON (${(err as Error).message}): ...${r.output.slice(-200)}`)
  }
  assert.equal(r.truncated, true)
  assert.equal(value.truncated, true)
  return value
}

test('bash exec: a `yes` flood stays valid JSON under the cap, the marker inside stdout', async (t) => {
  const { gw } = await gateway(t)
  const plain = parsedUnderCap(await invoke(gw, 'bash', { action: 'exec', command: 'yes' }), CAP)
  assert.match(String(plain.stdout), /^y\ny\n/)
  assert.match(String(plain.stdout), /\[\.\.\. truncated \d+ chars \.\.\.\]/)
  assert.equal(plain.command, 'yes')
  assert.equal(typeof plain.exitCode, 'number')

  // Characters JSON escapes (quotes, backslashes, control characters) on both streams.
  const noisy = '"\\ \t\u0001'
  const escaped = parsedUnderCap(await invoke(gw, 'bash', { action: 'exec', command: `yes '${noisy}' >&2 & yes '${noisy}'` }), CAP)
  assert.ok(String(escaped.stdout).startsWith(`${noisy}\n${noisy}\n`), String(escaped.stdout).slice(0, 40))
  assert.match(String(escaped.stderr), /truncated \d+ chars/)

  // A request may only lower the cap: the lower cap holds too.
  parsedUnderCap(await invoke(gw, 'bash', { action: 'exec', command: 'yes' }, { outputMaxChars: 1500 }), 1500)
})

test('read_file, grep and glob: long content, many matches and many files stay valid JSON under the cap', async (t) => {
  const { gw, workspaces } = await gateway(t)
  const root = join(workspaces, 'flood', 'default')
  await mkdir(join(root, 'many'), { recursive: true })
  // Lines with quotes, backslashes, tabs and non-BMP characters (surrogate pairs must not be split).
  const line = (i: number): string => `line ${i} "quoted" \\back\\ \t tab 😀 needle ${'x'.repeat(80)}\n`
  await writeFile(join(root, 'big.txt'), Array.from({ length: 400 }, (_, i) => line(i)).join(''))
  await Promise.all(Array.from({ length: 300 }, async (_, i) => await writeFile(join(root, 'many', `file-with-a-longish-name-${i}.txt`), '')))

  const read = parsedUnderCap(await invoke(gw, 'read_file', { path: 'big.txt' }), CAP)
  assert.match(String(read.content), /^line 0 "quoted"/)
  assert.match(String(read.content), /truncated \d+ chars/)
  assert.doesNotMatch(String(read.content), /\uFFFD/)

  const grep = parsedUnderCap(await invoke(gw, 'grep', { pattern: 'needle', maxResults: 100 }), CAP)
  assert.ok(Array.isArray(grep.matches) && grep.matches.length > 0)

  const glob = parsedUnderCap(await invoke(gw, 'glob', { pattern: 'many/*.txt' }), CAP)
  assert.ok(Array.isArray(glob.matches) && glob.matches.length > 0 && glob.matches.length < 300)
})

test('fitJsonValue: random values with escapes and surrogates always fit and parse', () => {
  let seed = 12345
  const rand = (n: number): number => { seed = (seed * 1103515245 + 12345) % 2147483648; return seed % n }
  const alphabet = ['a', 'b', '"', '\\', '\n', '\t', '\u0001', '😀', 'é', '\u2028', ' ']
  const str = (len: number): string => Array.from({ length: len }, () => alphabet[rand(alphabet.length)]).join('')
  const value = (depth: number): unknown => {
    const kind = rand(depth > 2 ? 2 : 4)
    if (kind === 0) return str(rand(500))
    if (kind === 1) return rand(1000)
    if (kind === 2) return Array.from({ length: rand(40) }, () => value(depth + 1))
    return Object.fromEntries(Array.from({ length: rand(6) }, (_, i) => [`k${i}`, value(depth + 1)]))
  }
  for (let i = 0; i < 300; i++) {
    const v = { stdout: str(rand(20_000)), nested: value(0) }
    const max = 300 + rand(8000)
    const fitted = fitJsonValue(v, max)
    const text = JSON.stringify(fitted.value)
    assert.ok(text.length <= max, `case ${i}: ${text.length} > ${max}`)
    assert.deepEqual(JSON.parse(text), fitted.value)
    assert.equal(fitted.truncated, JSON.stringify(v).length > max)
    assert.doesNotMatch(text, /\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])/i, 'a surrogate pair was split')
  }
})

test('cutJsonString keeps head and tail and never exceeds the target', () => {
  const s = 'H'.repeat(5000) + '"'.repeat(5000) + 'T'.repeat(5000)
  for (const target of [60, 100, 1000, 4321, 20_000]) {
    const cut = cutJsonString(s, target)
    assert.ok(JSON.stringify(cut).length <= target, `${target}`)
    if (target < JSON.stringify(s).length) {
      assert.match(cut, /^H+/)
      assert.match(cut, /T+$/)
      const n = Number(/truncated (\d+) chars/.exec(cut)?.[1])
      assert.equal(cut.length - `\n[... truncated ${n} chars ...]\n`.length + n, s.length)
    }
  }
})
