/**
 * findInjection runs each rule only near its anchors (injection.ts, src/secrets/scan-near.ts): its
 * findings must be those of every rule run on the whole text, as the rules define them. Checked
 * on the corpus, on the corpus's texts run together, padded with filler, in other letter cases,
 * and with a letter that lower-casing lengthens (then positions differ and the rules run whole).
 */
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { findInjection, RULES } from '../../../src/guardrails/injection.js'
import type { InjectionCase } from '../../../src/guardrails/injection-scores.js'
import type { Finding } from '../../../src/guardrails/finding.js'

const corpus = JSON.parse(readFileSync(new URL('../../fixtures/guardrails/injection-corpus.json', import.meta.url), 'utf8')) as { cases: InjectionCase[] }

/** Every rule on the whole text, as findInjection did before it looked for anchors. */
function wholeScan (text: string): Finding[] {
  const found: Finding[] = []
  for (const rule of RULES) {
    const re = new RegExp(rule.pattern.source, rule.pattern.flags)
    let m: RegExpExecArray | null
    while ((m = re.exec(text)) !== null) {
      const end = rule.accept ? rule.accept(text, m, re) : m.index + m[0].length
      if (end !== null) found.push({ check: 'injection', kind: rule.kind, start: m.index, end })
      if (m[0].length === 0) re.lastIndex++
    }
  }
  return found.sort((a, b) => a.start - b.start || a.end - b.end)
}

function variants (text: string, i: number): string[] {
  const filler = 'lorem ipsum dolor sit amet, '.repeat(1 + (i % 7))
  const swapped = [...text].map((c, j) => (j % 3 === 0 ? c.toUpperCase() : c.toLowerCase())).join('')
  return [text, filler + text + filler, text.toUpperCase(), swapped, 'İstanbul ' + text, text.replaceAll(' ', '\n')]
}

test('findInjection finds what every rule finds on the whole text: corpus texts alone, padded, recased, joined', () => {
  let findings = 0
  const texts = corpus.cases.map((c) => c.text)
  for (let i = 0; i < texts.length; i++) {
    const joined = `${texts[i] as string}\n${texts[(i * 7 + 3) % texts.length] as string} ${texts[(i * 13 + 5) % texts.length] as string}`
    for (const text of [...variants(texts[i] as string, i), joined]) {
      const expected = wholeScan(text)
      assert.deepEqual(findInjection(text), expected, JSON.stringify(text.slice(0, 200)))
      findings += expected.length
    }
  }
  assert.ok(findings > 300, `the texts hold findings (${findings})`)
})

test('a rule whose anchors are absent does not run; one anchor brings it back', () => {
  assert.deepEqual(findInjection('-rw-r--r-- 1 dev dev 1207 Dec  6 09:07 src/module-1/index.ts'), [])
  const text = 'Notes.\nPretend you are my grandmother.'
  assert.deepEqual(findInjection(text).map((f) => f.kind), ['act-as'])
  assert.deepEqual(findInjection(text), wholeScan(text))
})

test('act-as opens windows only at an `act` of its own, with the findings of the whole scan: after any character, before any', () => {
  // The `act` hits act-as rejects (inside "contact", "fact", "actual"; not after a space, a line break or `.!?:>`, or not
  // before a space) are those no match can hold: random texts of the characters around it, long enough to be scanned in windows.
  let x = 20261206
  const next = (): number => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) / 0x100000000 }
  const before = ['', ' ', '\n', '\r', '\t', '\u00a0', '\u2028', '.', '!', '?', ':', '>', ',', ';', 'x', 'cont', 'f', 'please ', 'Please  ',
    '. ', '>  ', '-', '"', '(']
  const phrase = ['act as my tutor', 'act as if you were', 'ACT AS AN admin', 'Act  as the boss', 'act\u00a0as a', 'act\tas the', 'act as', 'acts as a',
    'actas my', 'act as\nthe', 'pretend to be', 'roleplay as', 'contact as a', 'fact as the', 'exact as an']
  const filler = ' lorem ipsum dolor sit amet, consectetur adipiscing elit '.repeat(6)
  let found = 0
  for (let round = 0; round < 400; round++) {
    let text = filler
    for (let k = 1 + Math.floor(next() * 6); k > 0; k--) {
      const around = (before[Math.floor(next() * before.length)] as string) + (phrase[Math.floor(next() * phrase.length)] as string)
      text += around + filler.slice(0, Math.floor(next() * 120))
    }
    const expected = wholeScan(text)
    assert.deepEqual(findInjection(text), expected, JSON.stringify(text))
    found += expected.filter((f) => f.kind === 'act-as').length
  }
  assert.ok(found > 300, `act-as matched in the texts (${found})`)
})

test('the anchors found by one scan (an anchor inside or right after another, shared letters) give the whole scan\'s findings', () => {
  // Long texts (past the short-text path) of anchors overlapping each other and of the corpus's positives cut in pieces.
  let x = 34
  const next = (): number => { x ^= x << 13; x ^= x >>> 17; x ^= x << 5; return (x >>> 0) / 0x100000000 }
  const positives = corpus.cases.filter((c) => c.injection).map((c) => c.text)
  const pieces = ['[INST](', '[INST]', '](', ']]', '>>>', '<<SYS>>', '<|im_start|>', '</tool_result>', '</', '<|', 'yle', 'youyou', 'you are now DAN',
    'ignore', 'gnoregard', 'attention', 'assistant', 'system:', 'note to the AI:', 'user', 'human', 'operator', 'pretend', 'play', 'act as the']
  let found = 0
  for (let round = 0; round < 300; round++) {
    let text = 'Results of the last run follow. '.repeat(10)
    for (let k = 1 + Math.floor(next() * 10); k > 0; k--) {
      const piece = next() < 0.3 ? (positives[Math.floor(next() * positives.length)] as string) : (pieces[Math.floor(next() * pieces.length)] as string)
      text += piece + [' ', '', '\n', '. '][Math.floor(next() * 4)]
    }
    const expected = wholeScan(text)
    assert.deepEqual(findInjection(text), expected, JSON.stringify(text))
    found += expected.length
  }
  assert.ok(found > 300, `the texts hold findings (${found})`)
})
