/** What one grep call asks (Query) and what it gathers (Collector), whichever engine answers. */
import type { RegexBudget } from './regex-worker.js'

export interface GrepMatch { file: string, line: number, content: string }

export interface Query {
  source: string
  flags: string
  pattern: string
  caseInsensitive: boolean
  /** Whether a file name passes `include` (a promise when it is matched in the regex workers: glob-match.ts). */
  include: ((name: string) => boolean | Promise<boolean>) | undefined
  includeGlob: string | undefined
  max: number
  signal: AbortSignal
  budget: RegexBudget
  /** Whose call it is (Workspace.tenant): the regex workers are shared fairly between tenants. */
  tenant: string
}

/** Accumulates matches in path order; the first `max` are kept, the rest only counted. */
export class Collector {
  matches: GrepMatch[] = []
  filesSearched = 0
  filesMatched = 0
  totalMatches = 0
  constructor (readonly max: number) {}
}
