/** What one grep call asks (Query) and what it gathers (Collector), whichever engine answers. */
import type picomatch from 'picomatch'
import type { RegexBudget } from './regex-worker.js'

export interface GrepMatch { file: string, line: number, content: string }

export interface Query {
  source: string
  flags: string
  pattern: string
  caseInsensitive: boolean
  include: picomatch.Matcher | undefined
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
