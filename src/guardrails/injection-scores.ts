import { findInjection } from './injection.js'

/** One labelled text of an injection corpus (test/fixtures/guardrails/injection-corpus.json). */
export interface InjectionCase { id: string, source: string, injection: boolean, text: string }

/**
 * Precision and recall of findInjection on labelled cases (a case is flagged when it has any
 * finding), and the ids it got wrong: what the corpus test asserts and bench row 18 reports.
 */
export function injectionScores (cases: readonly InjectionCase[]): { precision: number, recall: number, wrong: string[] } {
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
