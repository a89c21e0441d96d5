import { BUILTIN_READONLY } from '../naming/builtin-names.js'
import { toWireName } from '../naming/names.js'
import type { Guardrail, PolicyDecision, PolicyLimits, ToolPolicy } from '../routing/policy.js'
import type { CatalogEntry } from '../routing/source.js'
import { TIER_TRAITS } from '../routing/types.js'
import { CommandCheckTimeout } from './command-guard.js'
import type { CommandGuard } from './command-guard.js'
import { LIMIT_KEYS } from './document.js'
import type { AnnotationRule, GuardrailRule, PolicyDocument } from './document.js'
import { compileNamePattern } from './pattern.js'

interface Pattern {
  source: string
  /** `default` or `tenant`: which policy the pattern comes from, for messages. */
  origin: string
  test: (name: string) => boolean
}

function compileGuardrail (rule: GuardrailRule, id: string, origin: string): CompiledGuardrail {
  return {
    id,
    on: rule.on,
    check: rule.check,
    action: rule.action,
    url: rule.url,
    timeoutMs: rule.timeoutMs,
    failOpen: rule.failOpen,
    tools: rule.tools === undefined ? undefined : compile(rule.tools, origin)
  }
}

function compile (patterns: readonly string[] | undefined, origin: string): Pattern[] {
  return (patterns ?? []).map((source) => {
    const test = compileNamePattern(source)
    // Stored policies were validated on write; a pattern that no longer compiles matches nothing.
    return { source, origin, test: test ?? (() => false) }
  })
}

const READONLY_BUILTINS: ReadonlySet<string> = new Set(BUILTIN_READONLY)
const NO_GUARDRAILS: readonly Guardrail[] = []

/**
 * Whether a tool's annotations give it a hint, read as MCP defines them: `destructiveHint` and
 * `openWorldHint` are true when absent, and `destructiveHint` means nothing for a tool that says
 * `readOnlyHint: true`. A tool that declares nothing is held: the safe reading of no promise.
 */
function hasHint (entry: CatalogEntry, hint: AnnotationRule['annotation']): boolean {
  const a = entry.spec.annotations ?? {}
  if (hint === 'destructiveHint') return a.readOnlyHint !== true && a.destructiveHint !== false
  return a.openWorldHint !== false
}

interface CompiledGuardrail extends Guardrail { tools: Pattern[] | undefined }

/**
 * Every name a call can use to reach the entry: its natural and qualified names, the raw MCP
 * tool name remote servers also answer to, and the wire forms of all of them. A pattern matches
 * the tool when it matches any of them, so a deny cannot be dodged by calling a tool by another
 * of its names, and the decision is the same whichever name listed or invoked it.
 */
function namesOf (entry: CatalogEntry): string[] {
  const names = new Set<string>([entry.name, toWireName(entry.name)])
  if (entry.qualifiedName !== undefined) {
    names.add(entry.qualifiedName)
    names.add(toWireName(entry.qualifiedName))
  }
  if (TIER_TRAITS[entry.route].answersToToolName) names.add(entry.spec.name)
  return [...names]
}

function firstMatch (patterns: readonly Pattern[], names: readonly string[]): Pattern | undefined {
  for (const p of patterns) {
    if (names.some((n) => p.test(n))) return p
  }
  return undefined
}

/**
 * The policy in force for one tenant: the default policy and the tenant's own, combined so that
 * the tenant's can only add restrictions (a default is a floor for every tenant):
 * - `deny`, `requireApproval`, `bash.denyCommands`: the union of both;
 * - `allowOnly`: a tool must pass each list that is present (the intersection);
 * - `readOnly`: either;
 * - `limits`: the lower of the two for each key.
 */
export class EffectivePolicy implements ToolPolicy {
  readonly limits: PolicyLimits
  readonly pinning: 'warn' | 'hold'
  readonly #deny: Pattern[]
  readonly #allowOnly: Pattern[][]
  readonly #requireApproval: Pattern[]
  readonly #approvalHints: Array<{ hint: AnnotationRule['annotation'], origin: string }>
  readonly #guardrails: CompiledGuardrail[]
  readonly #guardrailsOf = new WeakMap<CatalogEntry, readonly Guardrail[]>()
  readonly #readOnly: string | undefined
  readonly #commandRules: Array<{ source: string, origin: string, index: number }>
  readonly #commandKey: string
  readonly #guard: CommandGuard
  /** Decisions per catalog entry (sources reuse their entry objects, so a warm listing decides nothing). */
  readonly #decisions = new WeakMap<CatalogEntry, PolicyDecision>()

  constructor (docs: { default?: PolicyDocument | undefined, tenant?: PolicyDocument | undefined }, guard: CommandGuard) {
    this.#guard = guard
    const layers = [['default', docs.default], ['tenant', docs.tenant]] as const
    this.#deny = layers.flatMap(([origin, doc]) => compile(doc?.deny, origin))
    this.#requireApproval = layers.flatMap(([origin, doc]) => compile(doc?.requireApproval?.filter((r) => typeof r === 'string'), origin))
    this.#approvalHints = layers.flatMap(([origin, doc]) =>
      (doc?.requireApproval ?? []).flatMap((r) => typeof r === 'string' ? [] : [{ hint: r.annotation, origin }]))
    // The default's guardrails first, then the tenant's: both apply.
    this.#guardrails = layers.flatMap(([origin, doc]) => (doc?.guardrails ?? []).map((g, i) => compileGuardrail(g, `${origin} guardrails/${i}`, origin)))
    this.#allowOnly = layers.flatMap(([origin, doc]) => doc?.allowOnly !== undefined ? [compile(doc.allowOnly, origin)] : [])
    this.#readOnly = layers.find(([, doc]) => doc?.readOnly === true)?.[0]
    this.pinning = layers.some(([, doc]) => doc?.pinning === 'hold') ? 'hold' : 'warn'
    this.#commandRules = layers.flatMap(([origin, doc]) => (doc?.bash?.denyCommands ?? []).map((source, index) => ({ source, origin, index })))
    this.#commandKey = JSON.stringify(this.#commandRules.map((r) => r.source))
    const limits: PolicyLimits = {}
    for (const key of LIMIT_KEYS) {
      const values = layers.flatMap(([, doc]) => doc?.limits?.[key] !== undefined ? [doc.limits[key]] : [])
      if (values.length > 0) limits[key] = Math.min(...values)
    }
    this.limits = limits
  }

  /** True when the policy restricts nothing (the common case needs no per-tool work). */
  get empty (): boolean {
    return this.#deny.length === 0 && this.#allowOnly.length === 0 && this.#readOnly === undefined &&
      this.#requireApproval.length === 0 && this.#approvalHints.length === 0 && this.#guardrails.length === 0 && this.pinning === 'warn' &&
      this.#commandRules.length === 0 && Object.keys(this.limits).length === 0
  }

  decide (entry: CatalogEntry): PolicyDecision {
    let decision = this.#decisions.get(entry)
    if (decision === undefined) {
      decision = this.#decide(entry)
      this.#decisions.set(entry, decision)
    }
    return decision
  }

  #decide (entry: CatalogEntry): PolicyDecision {
    const shown = entry.name
    if (this.#readOnly !== undefined) {
      // The reserved tier's tools are the built-ins: the gateway knows which read, whatever their annotations say.
      const readOnly = TIER_TRAITS[entry.route].reserved ? READONLY_BUILTINS.has(entry.spec.name) : entry.spec.annotations?.readOnlyHint === true
      if (!readOnly) {
        return { kind: 'deny', message: `Tool '${shown}' is denied by the ${this.#readOnly} tool policy: readOnly allows only read_file, glob, grep and tools annotated readOnlyHint` }
      }
    }
    const names = namesOf(entry)
    const denied = firstMatch(this.#deny, names)
    if (denied !== undefined) return { kind: 'deny', message: `Tool '${shown}' is denied by the ${denied.origin} tool policy (deny '${denied.source}')` }
    for (const list of this.#allowOnly) {
      if (firstMatch(list, names) === undefined) {
        return { kind: 'deny', message: `Tool '${shown}' is denied by the ${list[0]?.origin ?? 'tool'} tool policy: it matches no allowOnly pattern` }
      }
    }
    // allowOnly [] of either policy allows nothing: handled above (no pattern can match).
    const approval = firstMatch(this.#requireApproval, names)
    if (approval !== undefined) return { kind: 'approval-required', rule: approval.source }
    const hinted = this.#approvalHints.find((h) => hasHint(entry, h.hint))
    if (hinted !== undefined) return { kind: 'approval-required', rule: `annotation:${hinted.hint}` }
    return { kind: 'allow' }
  }

  guardrailsFor (entry: CatalogEntry): readonly Guardrail[] {
    if (this.#guardrails.length === 0) return NO_GUARDRAILS
    let rules = this.#guardrailsOf.get(entry)
    if (rules === undefined) {
      const names = namesOf(entry)
      rules = this.#guardrails.filter((g) => g.tools === undefined || firstMatch(g.tools, names) !== undefined)
      this.#guardrailsOf.set(entry, rules.length === 0 ? NO_GUARDRAILS : rules)
    }
    return rules
  }

  checkCall (entry: CatalogEntry, args: Record<string, unknown>): string | undefined | Promise<string | undefined> {
    // Answered at once when no command rule applies (every call but a policed bash command).
    if (this.#commandRules.length === 0 || !TIER_TRAITS[entry.route].reserved || entry.spec.name !== 'bash') return undefined
    if ((args.action !== 'exec' && args.action !== 'start') || typeof args.command !== 'string') return undefined
    return this.#checkCommand(args.command)
  }

  async #checkCommand (command: string): Promise<string | undefined> {
    let index: number
    try {
      index = await this.#guard.firstMatch(this.#commandKey, this.#commandRules.map((r) => r.source), command)
    } catch (err) {
      const why = err instanceof CommandCheckTimeout ? err.message : `the policy check of the command failed (${(err as Error).message})`
      return `Command refused: ${why}; the tool policy refuses what it cannot check`
    }
    const rule = this.#commandRules[index]
    if (rule === undefined) return undefined
    return `Command refused by the ${rule.origin} tool policy: it matches bash.denyCommands/${rule.index} ${JSON.stringify(rule.source)}`
  }
}
