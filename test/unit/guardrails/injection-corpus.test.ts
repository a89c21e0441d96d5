import { test } from 'node:test'
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { findInjection } from '../../../src/guardrails/injection.js'

interface Case { id: string, source: string, injection: boolean, text: string }

const corpus = JSON.parse(readFileSync(new URL('../../fixtures/guardrails/injection-corpus.json', import.meta.url), 'utf8')) as { cases: Case[] }

/** Precision and recall of findInjection on labelled cases (a case is flagged when it has any finding), and the cases it got wrong. */
function injectionScores (cases: Case[]): { precision: number, recall: number, wrong: string[] } {
  let truePositives = 0
  let falsePositives = 0
  let falseNegatives = 0
  const wrong: string[] = []
  for (const c of cases) {
    const flagged = findInjection(c.text).length > 0
    if (flagged && c.injection) truePositives++
    if (flagged && !c.injection) { falsePositives++; wrong.push(`false positive: ${c.id}`) }
    if (!flagged && c.injection) { falseNegatives++; wrong.push(`false negative: ${c.id}`) }
  }
  return {
    precision: truePositives / (truePositives + falsePositives),
    recall: truePositives / (truePositives + falseNegatives),
    wrong
  }
}

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
