/**
 * Row 18: guardrails (issue 34, SPEC 18).
 * - 18.1 the CPU a policy's guardrails add to one call, in process: every built-in check on the
 *   result (secrets, pii, injection, each `redact`) and on the arguments (secrets, pii), run by
 *   the router's GuardrailEngine on a realistic 10 KiB result (a bash listing with e-mail addresses,
 *   a card number and a token in it) and a small arguments object; baseline: the same number of
 *   calls of a policy without guardrails (the router's one array check). Target: <= 25 us added.
 *   The notes give each result check's CPU alone on the same text, and the result checks' CPU on
 *   that text with a structuredContent mirroring it (SPEC 18: both are checked) against the text alone,
 *   and on the costliest structuredContent the router reads (short strings up to its bound) against a
 *   text at the default output cap.
 * - 18.2 / 18.3 precision and recall of the injection check on the labelled corpus
 *   (test/fixtures/guardrails/injection-corpus.json, read as data).
 */
import { readFile } from 'node:fs/promises'
import path from 'node:path'
import assert from 'node:assert/strict'
import { GuardrailEngine } from '../src/guardrails/engine.js'
import { injectionScores } from '../src/guardrails/injection-scores.js'
import type { InjectionCase } from '../src/guardrails/injection-scores.js'
import { boundStructured, STRUCTURED_STRING_WEIGHT } from '../src/routing/guardrails.js'
import type { CheckedResult } from '../src/routing/guardrails.js'
import type { Guardrail } from '../src/routing/policy.js'
import type { CatalogEntry } from '../src/routing/source.js'
import { REPO_ROOT } from './fixtures/procs.js'
import { cpuPerCall, makeRow, median, round } from './stats.js'
import type { BenchContext, Row } from './types.js'

const ENTRY: CatalogEntry = {
  route: 'user_mcp', source: 'bench', name: 'post_note', spec: { name: 'post_note', description: 'bench', inputSchema: { type: 'object' } }
}
const RULES: Guardrail[] = [
  { id: 'tenant guardrails/0', on: 'result', check: 'secrets', action: 'redact' },
  { id: 'tenant guardrails/1', on: 'result', check: 'pii', action: 'redact' },
  { id: 'tenant guardrails/2', on: 'result', check: 'injection', action: 'flag' },
  { id: 'tenant guardrails/3', on: 'arguments', check: 'secrets', action: 'redact' },
  { id: 'tenant guardrails/4', on: 'arguments', check: 'pii', action: 'redact' }
]

/** A 10 KiB tool result as a coding agent sees them: lines of a listing, a few of them carrying data a guardrail is for. */
function result10k (): string {
  const lines: string[] = []
  for (let i = 0; lines.join('\n').length < 10 * 1024; i++) {
    if (i % 40 === 7) lines.push(`-rw-r--r-- 1 dev dev  ${1200 + i} Dec  6 09:${String(i % 60).padStart(2, '0')} contact.txt: jane.doe+${i}@example.com, +44 20 7946 0${String(i % 1000).padStart(3, '0')}`)
    else if (i % 97 === 13) lines.push('billing: card 4111 1111 1111 1111 token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8')
    else lines.push(`-rw-r--r-- 1 dev dev  ${1200 + i * 7} Dec  6 09:${String(i % 60).padStart(2, '0')} src/module-${i}/index.ts`)
  }
  return lines.join('\n').slice(0, 10 * 1024)
}

export async function run (ctx: BenchContext): Promise<Row[]> {
  const engine = new GuardrailEngine()
  const text = result10k()
  const checked = { text, structuredContent: undefined }
  const args = { text: 'Deploy the release notes to jane.doe@example.com with the usual token', channel: 'ops' }
  const signal = ctx.signal
  const guarded = async (): Promise<void> => {
    await engine.arguments(RULES.filter((r) => r.on === 'arguments'), { entry: ENTRY, name: 'post_note', userId: 'bench', value: args, signal })
    await engine.result(RULES.filter((r) => r.on === 'result'), { entry: ENTRY, name: 'post_note', userId: 'bench', value: checked, signal })
  }
  // The router's path without guardrails: the policy answers the same empty array; nothing else runs.
  const none: readonly Guardrail[] = []
  const unguarded = async (): Promise<void> => { if (none.length > 0) await guarded() }
  // Warm-up long enough for the JIT to settle. The detectors do most of their work in the regex engine and builtins, so
  // V8 reaches its optimising tier for them late: with 5,000 calls TurboFan still compiled maskPlain, mapStrings,
  // findEmails, maskTokenFormats... during the first four rounds (`node --trace-opt`), on compiler threads whose CPU
  // process.cpuUsage counts (20 ms for maskPlain alone, 40 us over a round's 500 calls): rounds ran 73, 42, 39, 49, then
  // 34 us each. After 20,000 calls none is compiled in the rounds. (With 300 calls they drifted from ~100 to ~65 us.)
  for (let i = 0; i < 20_000 && !signal.aborted; i++) await guarded()
  const on: number[] = []
  const off: number[] = []
  for (let round_ = 0; round_ < 7 && !signal.aborted; round_++) {
    on.push(await cpuPerCall(500, guarded))
    off.push(await cpuPerCall(500, unguarded))
  }
  // Each result check alone on the same text: where the CPU goes.
  const perCheck: string[] = []
  for (const rule of RULES.filter((r) => r.on === 'result')) {
    const one = async (): Promise<void> => { await engine.result([rule], { entry: ENTRY, name: 'post_note', userId: 'bench', value: checked, signal }) }
    const runs: number[] = []
    for (let round_ = 0; round_ < 5 && !signal.aborted; round_++) runs.push(await cpuPerCall(300, one))
    perCheck.push(`${rule.check} ${round(median(runs))}`)
  }
  // The result checks with a structuredContent that mirrors the text (its lines as an array), side by side with the text alone.
  const resultRules = RULES.filter((r) => r.on === 'result')
  const checkResult = async (value: CheckedResult): Promise<unknown> =>
    await engine.result(resultRules, { entry: ENTRY, name: 'post_note', userId: 'bench', value, signal })
  const mirrored = { text, structuredContent: { lines: text.split('\n') } }
  const textOnly: number[] = []
  const withStructured: number[] = []
  for (let round_ = 0; round_ < 5 && !signal.aborted; round_++) {
    textOnly.push(await cpuPerCall(300, async () => await checkResult(checked)))
    withStructured.push(await cpuPerCall(300, async () => await checkResult(mirrored)))
  }
  // The worst structuredContent within the bound (many short strings, each counted as STRUCTURED_STRING_WEIGHT) against a text at the default cap.
  const cap = 100_000
  const atCap = { text: text.repeat(Math.ceil(cap / text.length)).slice(0, cap), structuredContent: undefined }
  const manyStrings = { text: '', structuredContent: new Array(Math.floor((cap - 2) / (STRUCTURED_STRING_WEIGHT + 1))).fill('you act') }
  assert.equal(boundStructured(manyStrings.structuredContent, cap), undefined)
  const capText: number[] = []
  const capStrings: number[] = []
  for (let round_ = 0; round_ < 5 && !signal.aborted; round_++) {
    capText.push(await cpuPerCall(10, async () => await checkResult(atCap)))
    capStrings.push(await cpuPerCall(10, async () => await checkResult(manyStrings)))
  }
  // Prose: 10 KiB of a project's README, as a one-byte string (V8's representation of a text whose characters are all
  // under U+0100), and the same text with an em dash at its end: a single character over U+00FF makes the whole string
  // two-byte, where lower-casing and character-class scans cost several times as much.
  const readme = (await readFile(path.join(REPO_ROOT, 'bench/fixtures/replay/picomatch/README.md'), 'utf8')).slice(0, 10 * 1024 - 1)
  const latin1 = Buffer.from(readme, 'latin1').toString('latin1')
  const proseOneByte = { text: latin1 + '-', structuredContent: undefined }
  const prose = { text: latin1 + '\u2014', structuredContent: undefined }
  const proseRuns: number[] = []
  const proseOneByteRuns: number[] = []
  for (let round_ = 0; round_ < 5 && !signal.aborted; round_++) {
    proseRuns.push(await cpuPerCall(100, async () => await checkResult(prose)))
    proseOneByteRuns.push(await cpuPerCall(100, async () => await checkResult(proseOneByte)))
  }
  const reports = await engine.result(RULES.filter((r) => r.on === 'result'), { entry: ENTRY, name: 'post_note', userId: 'bench', value: checked, signal })
  ctx.log(`guardrails on 10 KiB: ${JSON.stringify(reports.reports.map((r) => [r.check, r.outcome, r.kinds]))}`)

  const corpus = JSON.parse(await readFile(path.join(REPO_ROOT, 'test/fixtures/guardrails/injection-corpus.json'), 'utf8')) as { cases: InjectionCase[] }
  const scores = injectionScores(corpus.cases)
  const positives = corpus.cases.filter((c) => c.injection).length
  return [
    makeRow({
      id: '18.1',
      name: 'guardrails: CPU a call gains with secrets+pii+injection on a 10 KiB result and secrets+pii on its arguments vs a policy without guardrails',
      metric: 'CPU us/call (median of 7 x 500)',
      value: round(median(on)),
      baseline: round(median(off)),
      target: { on: 'delta', op: '<=', limit: 25 },
      notes: 'in process (the router\'s GuardrailEngine); each check redacts what it finds (the 10 KiB holds e-mails, phones, a card, a token); ' +
        `per result check alone, us: ${perCheck.join(', ')}; the three result checks with a structuredContent mirroring the text ` +
        `(its lines as an array): ${round(median(withStructured))} us vs ${round(median(textOnly))} us on the text alone; ` +
        `a structuredContent at the bound (${manyStrings.structuredContent.length} short strings): ${round(median(capStrings))} us vs ` +
        `${round(median(capText))} us for a text at the 100,000 cap; on 10 KiB of prose (a README) ` +
        `${round(median(proseOneByteRuns))} us, the same ending in an em dash (a two-byte string) ${round(median(proseRuns))} us; runs ${on.map(round).join(', ')}`
    }),
    makeRow({
      id: '18.2',
      name: 'guardrails: injection check precision on the labelled corpus',
      metric: 'precision',
      value: round(scores.precision),
      baseline: null,
      target: { on: 'value', op: '>=', limit: 0.9 },
      notes: `${corpus.cases.length} cases (${positives} positive); written by the rules' authors: an upper bound. ${scores.wrong.join('; ')}`
    }),
    makeRow({
      id: '18.3',
      name: 'guardrails: injection check recall on the labelled corpus',
      metric: 'recall',
      value: round(scores.recall),
      baseline: null,
      target: { on: 'value', op: '>=', limit: 0.9 },
      notes: `${positives} positives`
    })
  ]
}
