import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { injectionScores } from '../../../src/guardrails/injection-scores.js'
import type { InjectionCase } from '../../../src/guardrails/injection-scores.js'

type Case = InjectionCase

const corpus = JSON.parse(readFileSync(new URL('../../fixtures/guardrails/injection-corpus.json', import.meta.url), 'utf8')) as { cases: Case[] }

test('the corpus has at least 60 positives and 60 negatives, with unique ids', () => {
  assert.ok(corpus.cases.filter((c) => c.injection).length >= 60)
  assert.ok(corpus.cases.filter((c) => !c.injection).length >= 60)
  assert.equal(new Set(corpus.cases.map((c) => c.id)).size, corpus.cases.length)
})

test('findInjection has precision and recall of at least 0.9 on the corpus', (t) => {
  const { precision, recall, wrong } = injectionScores(corpus.cases)
  t.diagnostic(`precision ${precision.toFixed(3)}, recall ${recall.toFixed(3)} on ${corpus.cases.length} cases`)
  for (const w of wrong) t.diagnostic(w)
  assert.ok(precision >= 0.9, `precision ${precision}`)
  assert.ok(recall >= 0.9, `recall ${recall}`)
})

test('the scores count what they should: flipping every label makes both collapse', () => {
  const flipped = corpus.cases.map((c) => ({ ...c, injection: !c.injection }))
  const { precision, recall } = injectionScores(flipped)
  assert.ok(precision < 0.1 && recall < 0.1, `precision ${precision}, recall ${recall}`)
})
