import { performance } from 'node:perf_hooks'
import { HttpError, quoted } from '../errors.js'
import { parseUserToolName, toWireName } from '../naming/names.js'
import { expandFunctionNames, parseServerSelection } from './allow-list.js'
import type { AllowList, Unresolved } from './allow-list.js'
import { capOutput, stringifyToolValue, toolErrorCode, toolErrorOutput } from './output.js'
import { sameEntry, unsupportedReason } from './source.js'
import type { CatalogEntry, SourceScope, SurfaceServer, ToolSource, Unavailable } from './source.js'
import { definitionChangeMessage } from './policy.js'
import type { ToolPolicy } from './policy.js'
import { guardArguments, guardResult, NO_RULES, withGuardrails } from './guardrails.js'
import type { GuardrailReport, GuardrailRunner } from './guardrails.js'
import type { MetaTools } from './meta.js'
import type { Diagnostic } from './diagnostic.js'
import type { CallContext, CreatedTask, InputRequired, Tier, TierTraits, ToolFailureReason, ToolOutcome } from './types.js'
import { TIER_RANK, TIER_TRAITS, TIERS } from './types.js'
import { ArgumentValidator } from './validate.js'
import { AllowListings } from './allow-listings.js'
import { parseArguments } from './arguments.js'

/** Why a tool is exposed under another name, or not at all. */

export interface ListedTool {
  /** The wire name the model sees; /invoke resolves it through the same catalog. */
  name: string
  entry: CatalogEntry
}

export interface Listing {
  tools: ListedTool[]
  /** Selected tools the gateway cannot run (see unsupportedReason), with their diagnostic; never offered. */
  withheld?: ListedTool[]
  unresolved: Unresolved[]
  unavailable: Unavailable[]
  diagnostics: Diagnostic[]
}

export interface InvokeRequest {
  name: string
  /** An object, or the JSON string a model emitted (parsed here so a bad one is a tool-level error). */
  arguments: Record<string, unknown> | string
  callId: string
  /** The tenant the call acts for (already checked against the caller). */
  userId: string | undefined
  allow?: AllowList
  ctx: Omit<CallContext, 'callId'>
  /** Include the source's structured trace in the result. */
  includeTrace: boolean
  /** Told which catalog entry the name resolved to, before the call runs (the journal records its server). */
  onResolved?: (entry: CatalogEntry) => void
  /** The tenant's tool policy: a denied tool is refused (403) once resolved, before anything runs. */
  policy?: ToolPolicy
  /** A lower output cap than the server's for this call (a policy's limits.outputMaxChars). */
  outputMaxChars?: number
  /**
   * Holds a call the policy says needs a human's approval (once its arguments passed every check),
   * answering the approvalId and the message the model sees. Without it such a call runs.
   */
  hold?: (entry: CatalogEntry, rule: string, args: unknown) => Promise<{ approvalId: string, message: string }>
  /** The call was approved: run it even though the policy requires an approval. */
  approved?: boolean
}

export interface InvokeResult {
  callId: string
  name: string
  route: Tier
  output: string
  isError: boolean
  error: { code: string, message: string } | null
  truncated: boolean
  trace: unknown
  durationMs: number
  /** Time spent inside the tool itself; the rest is gateway overhead. */
  toolMs: number
  /** The checkpoint a mutating built-in took before it ran (context.checkpoint). */
  checkpointId?: string
  /** What the policy's guardrails did (SPEC 18); also in `trace`. Absent when none applied. */
  guardrails?: GuardrailReport[]
  /**
   * The server asks for input before it answers (MCP `input_required`; only for a caller whose
   * context had `input`): not a result and not an error. `output` only names what it asks.
   * The router's, with the server's own state: the gateway replaces it with the three fields
   * below before anyone else sees the result.
   */
  inputRequired?: InputRequired
  /** The tool's server refused the call for these undeclared client capabilities (ToolOutcome.requiredCapabilities). */
  requiredCapabilities?: unknown
  /** Set with inputRequests and requestState when the server asks for input (the wire form of REST and /mcp). */
  status?: 'input_required'
  /** What the server asks, exactly as it sent it. */
  inputRequests?: Record<string, unknown>
  /** The gateway's sealed handle for the retry (src/routing/input-rounds.ts), never the server's own state. */
  requestState?: string
  /** The server runs the call as a task (MCP Tasks extension; only for a caller that declared it): not a result and not an error. */
  task?: CreatedTask
}

/** `pending`: the call was held for an approval and has not run; its result says so (isError, GW_APPROVAL_PENDING). */
export type InvokeOutcome = { ok: true, result: InvokeResult, pending?: { approvalId: string } } | { ok: false, error: HttpError, toolMs: 0 }

/** A call's scope: its `signal` read through from the call's context (made only when a source reads it), by a class getter, not a literal's. */
class CallScope implements SourceScope {
  readonly #ctx: { readonly signal: AbortSignal }
  constructor (readonly userId: string | undefined, ctx: { readonly signal: AbortSignal }) {
    this.#ctx = ctx
  }

  get signal (): AbortSignal { return this.#ctx.signal }
}

/** What a name resolves to for a scope: the entry, or why not (GW_TOOL_NOT_FOUND, GW_TENANT_MISMATCH). */
type Resolution = { ok: true, entry: CatalogEntry } | { ok: false, error: HttpError }

export interface CatalogRow {
  name: string
  route: Tier
  source: string
  shadowedBy: Tier | null
}

export interface RouterOptions {
  /**
   * One source per tier, every tier named: `null` for a tier this gateway does not offer (it offers
   * nothing), so a tier added to TIERS and not wired here is a type error (docs/ARCHITECTURE.md#add-a-tier).
   */
  sources: Readonly<Record<Tier, ToolSource | null>>
  outputMaxChars: number
  validator?: ArgumentValidator
  /** Tools the gateway answers itself (tool_search), asked before every tier. */
  meta?: MetaTools | undefined
  /** Runs the policies' guardrails (SPEC 18); without it a policy's guardrails are not run. */
  guardrails?: GuardrailRunner | undefined
}

/** A wired tier: its source and the traits the router reads on every call, looked up once. */
interface Wired {
  readonly tier: Tier
  readonly source: ToolSource
  readonly traits: TierTraits
  readonly rank: number
}

/** The tier whose names are encoded `user_{u}_tool_{t}` (TierTraits.encodedNames), if any. */
const ENCODED_TIER: Tier | undefined = TIERS.find((t) => TIER_TRAITS[t].encodedNames)
const NO_TIERS: readonly Wired[] = []

/**
 * The tool router (docs/ARCHITECTURE.md#the-model): assembles request-scoped listings from an allow-list and
 * routes calls by the fixed five-tier priority. Listing and invoking share one policy: with
 * an allow-list, /invoke resolves the name in exactly the listing /tools would return.
 */
export class ToolRouter {
  readonly #byTier: Readonly<Record<Tier, ToolSource | null>>
  /** Every wired tier, in priority order. */
  readonly #wired: readonly Wired[]
  /** The reserved tier's source (TierTraits.reserved): asked first, before encoded names. */
  readonly #reserved: ToolSource | undefined
  /** The wired tiers a raw name goes through after the reserved one, in priority order. */
  readonly #unreserved: readonly Wired[]
  /** The tiers `functions=` selects (by name), in priority order. */
  readonly #byName: readonly Wired[]
  /** The tiers `mcp=` selects (by serverId), in priority order. */
  readonly #byServer: readonly Wired[]
  /** The tenant-scoped tiers, in priority order (the `ambiguous` diagnostic). */
  readonly #tenantTiers: readonly Wired[]
  readonly #outputMaxChars: number
  readonly #validator: ArgumentValidator
  readonly #meta: MetaTools | undefined
  readonly #guardrails: GuardrailRunner | undefined
  /** The listings invokes with an allow-list resolve their names in (allow-listings.ts). */
  readonly #allowed = new AllowListings<Listing>()

  constructor (opts: RouterOptions) {
    this.#byTier = opts.sources
    this.#wired = TIERS.flatMap((tier): Wired[] => {
      const source = opts.sources[tier]
      if (source === null) return []
      if (source.tier !== tier) throw new Error(`the source wired as ${tier} says it is ${source.tier}`)
      return [{ tier, source, traits: TIER_TRAITS[tier], rank: TIER_RANK[tier] }]
    })
    if (TIERS.filter((t) => TIER_TRAITS[t].reserved).length > 1) throw new Error('TIER_TRAITS: at most one tier is reserved')
    if (TIERS.filter((t) => TIER_TRAITS[t].encodedNames).length > 1) throw new Error('TIER_TRAITS: at most one tier has encoded names')
    this.#reserved = this.#wired.find((w) => w.traits.reserved)?.source
    this.#unreserved = this.#wired.filter((w) => !w.traits.reserved)
    this.#byName = this.#wired.filter((w) => w.traits.selectedBy === 'functions')
    this.#byServer = this.#wired.filter((w) => w.traits.selectedBy === 'mcp')
    this.#tenantTiers = this.#wired.filter((w) => w.traits.tenantScoped)
    this.#outputMaxChars = opts.outputMaxChars
    this.#validator = opts.validator ?? new ArgumentValidator()
    this.#meta = opts.meta
    this.#guardrails = opts.guardrails
  }

  /**
   * Resolves a model-facing name through the full priority (docs/ARCHITECTURE.md#tiers). An encoded
   * `user_{u}_tool_{t}` name goes straight to the encoded-names tier (tier 2) of tenant u and never falls back.
   */
  async resolve (name: string, scope: SourceScope): Promise<Resolution> {
    const now = this.#resolveNow(name, scope)
    return now instanceof Promise ? await now : now
  }

  /**
   * `resolve`, answered at once while every source asked answers at once (the static tiers:
   * built-ins, local MCP, functions); from the first source that answers a promise, it waits.
   */
  #resolveNow (name: string, scope: SourceScope): Resolution | Promise<Resolution> {
    const meta = this.#meta?.resolve(name)
    if (meta !== undefined) return { ok: true, entry: meta }
    const reserved = this.#reserved?.resolve(name, scope)
    if (reserved instanceof Promise) return reserved.then((entry) => entry ? { ok: true, entry } : this.#resolvePastReserved(name, scope))
    if (reserved) return { ok: true, entry: reserved }
    return this.#resolvePastReserved(name, scope)
  }

  /** A name the reserved tier does not have: an encoded tenant name goes to its tier alone, any other to the tiers in order. */
  #resolvePastReserved (name: string, scope: SourceScope): Resolution | Promise<Resolution> {
    const encoded = ENCODED_TIER === undefined ? undefined : parseUserToolName(name)
    if (encoded) {
      if (scope.userId !== encoded.userId) {
        return { ok: false, error: new HttpError('GW_TENANT_MISMATCH', `Tool '${name}' belongs to another tenant than the request's`) }
      }
      const found = this.#byTier[ENCODED_TIER as Tier]?.resolve(name, scope)
      const answer = (entry: CatalogEntry | undefined): Resolution => entry ? { ok: true, entry } : { ok: false, error: notFound(name) }
      return found instanceof Promise ? found.then(answer) : answer(found)
    }
    return this.#resolveFrom(0, name, scope)
  }

  /** The unreserved tiers from index `from` on, in priority order, for a name that is not an encoded tenant name. */
  #resolveFrom (from: number, name: string, scope: SourceScope): Resolution | Promise<Resolution> {
    const tiers = this.#unreserved
    for (let i = from; i < tiers.length; i++) {
      const { source, traits } = tiers[i] as Wired
      if (traits.tenantScoped && scope.userId === undefined) continue
      const entry = source.resolve(name, scope)
      if (entry instanceof Promise) return entry.then((hit) => hit ? { ok: true, entry: hit } : this.#resolveFrom(i + 1, name, scope))
      if (entry) return { ok: true, entry }
    }
    return { ok: false, error: notFound(name) }
  }

  /** The request-scoped listing of GET /tools: only what the allow-list names. */
  async list (allow: AllowList, scope: SourceScope): Promise<Listing> {
    const unresolved: Unresolved[] = []
    const unavailable: Unavailable[] = []
    const candidates: CatalogEntry[] = []

    const names = expandFunctionNames(allow.functions ?? [])
    for (const name of names) {
      // A meta tool named in `functions=` (`@code`) is listed like a built-in; its description is the listing's (listing/).
      let found: CatalogEntry | undefined = this.#meta?.resolve(name)
      for (const { source, traits } of found === undefined ? this.#byName : NO_TIERS) {
        if (traits.tenantScoped && scope.userId === undefined) continue
        found = await source.resolve(name, scope)
        if (found) break
      }
      if (found) candidates.push(found)
      else unresolved.push({ kind: 'function', name, reason: 'No built-in, local MCP or function tool has this name' })
    }

    const { serverIds, userOnly, errors } = parseServerSelection(allow.mcp ?? [], scope.userId)
    unresolved.push(...errors)
    let pending = serverIds
    for (const { source, traits } of this.#byServer) {
      if (pending.length === 0) break
      if (traits.tenantScoped && scope.userId === undefined) continue
      // A tenant-only id (user_{u}_service_{s}) never selects a server of a tier that is not the tenant's.
      const selected = traits.tenantScoped ? pending : pending.filter((id) => !userOnly.has(id))
      const listing = await source.list({ serverIds: selected }, scope)
      candidates.push(...listing.tools)
      unavailable.push(...listing.unavailable)
      const matched = new Set(listing.matched)
      pending = pending.filter((id) => !matched.has(id))
    }
    for (const id of pending) {
      unresolved.push({
        kind: 'mcp',
        name: id,
        reason: userOnly.has(id) ? 'The tenant has no server with this id' : 'No server with this id is registered for the tenant or globally'
      })
    }

    const { tools, withheld, diagnostics } = await this.#expose(candidates, scope)
    return { tools, withheld, unresolved, unavailable, diagnostics }
  }

  /**
   * Gives each candidate the name a model will see. A natural name that the full priority
   * would route elsewhere is replaced by the qualified name, so every listed name routes to
   * exactly the listed tool.
   */
  async #expose (candidates: CatalogEntry[], scope: SourceScope): Promise<{ tools: ListedTool[], withheld: ListedTool[], diagnostics: Diagnostic[] }> {
    const tools: ListedTool[] = []
    const withheld: ListedTool[] = []
    const diagnostics: Diagnostic[] = []
    const byWire = new Map<string, CatalogEntry>()
    const tenantTiers = scope.userId === undefined ? NO_TIERS : this.#tenantTiers
    // Raw names are checked without the tenant: tenant servers are listed under encoded
    // names, so only built-ins, local tools and other global servers can take a raw name.
    const rawScope: SourceScope = { userId: undefined, signal: scope.signal }
    for (const entry of candidates) {
      const unsupported = unsupportedReason(entry)
      if (unsupported !== undefined) {
        diagnostics.push({ type: 'unsupported', name: entry.name, route: entry.route, source: entry.source, exposedAs: null, message: unsupported })
        withheld.push({ name: toWireName(entry.name), entry })
        continue
      }
      let natural = entry.name
      const winner = await this.resolve(natural, TIER_TRAITS[entry.route].tenantScoped ? scope : rawScope)
      if (!winner.ok || !sameEntry(winner.entry, entry)) {
        const fallback = entry.qualifiedName
        const shadowedBy = winner.ok ? winner.entry.route : undefined
        if (!fallback) {
          diagnostics.push({ type: 'shadowed', name: natural, route: entry.route, source: entry.source, exposedAs: null, shadowedBy, message: `'${natural}' routes to ${shadowedBy ?? 'another tool'}; this tool has no other name` })
          continue
        }
        diagnostics.push({ type: 'shadowed', name: natural, route: entry.route, source: entry.source, exposedAs: toWireName(fallback), shadowedBy, message: `'${natural}' routes to ${shadowedBy ?? 'another tool'}; exposed under its qualified name` })
        natural = fallback
      } else {
        // A tenant's tier before the entry's could take its natural name on an invoke without `allow`.
        for (const tenant of tenantTiers) {
          if (tenant.rank >= TIER_RANK[entry.route]) break
          // Only a diagnostic: a registry outage must not fail a listing that names no tenant server.
          const tenantTool = await Promise.resolve(tenant.source.resolve(natural, scope)).catch(() => undefined)
          if (tenantTool) {
            diagnostics.push({ type: 'ambiguous', name: natural, route: entry.route, source: entry.source, exposedAs: toWireName(natural), shadowedBy: tenant.tier, message: `The tenant's server '${tenantTool.source}' also has a tool '${natural}': an invoke with userId and without \`allow\` routes it there (tier 2 comes before tiers 3 to 5); pass \`allow\` to route by this listing` })
            break
          }
        }
      }
      const wire = toWireName(natural)
      const existing = byWire.get(wire)
      if (existing) {
        if (!sameEntry(existing, entry)) {
          diagnostics.push({ type: 'duplicate', name: natural, route: entry.route, source: entry.source, exposedAs: null, message: `Wire name '${wire}' is already used by ${existing.route} ${existing.source}` })
        }
        continue
      }
      if (wire !== natural) {
        diagnostics.push({
          type: 'renamed',
          name: natural,
          route: entry.route,
          source: entry.source,
          exposedAs: wire,
          message: 'Shortened or sanitised to fit ^[a-zA-Z][a-zA-Z0-9_-]{0,63}$'
        })
      }
      byWire.set(wire, entry)
      tools.push({ name: wire, entry })
    }
    return { tools, withheld, diagnostics }
  }

  /**
   * The MCP servers an allow-list selects, for /mcp's resources, prompts and completion: the local
   * MCP services whose tools (or own names) `functions=` names, and the servers `mcp=` names with
   * the same tenancy and tier order as list() (tier 2 only ever the scope's tenant). In tier order,
   * then priority (higher first), then source.
   */
  async surface (allow: AllowList, scope: SourceScope): Promise<{ servers: SurfaceServer[], unavailable: Unavailable[] }> {
    const servers: SurfaceServer[] = []
    const unavailable: Unavailable[] = []
    const names = expandFunctionNames(allow.functions ?? [])
    for (const { source, traits } of this.#byName) {
      if (names.length === 0 || source.surface === undefined || (traits.tenantScoped && scope.userId === undefined)) continue
      const listing = await source.surface({ names }, scope)
      servers.push(...listing.servers)
      unavailable.push(...listing.unavailable)
    }
    const { serverIds, userOnly } = parseServerSelection(allow.mcp ?? [], scope.userId)
    let pending = serverIds
    for (const { source, traits } of this.#byServer) {
      if (pending.length === 0) break
      if (traits.tenantScoped && scope.userId === undefined) continue
      const selected = traits.tenantScoped ? pending : pending.filter((id) => !userOnly.has(id))
      if (source.surface === undefined) continue
      const listing = await source.surface({ serverIds: selected }, scope)
      servers.push(...listing.servers)
      unavailable.push(...listing.unavailable)
      const matched = new Set(listing.matched)
      pending = pending.filter((id) => !matched.has(id))
    }
    servers.sort((a, b) => TIER_RANK[a.route] - TIER_RANK[b.route] || b.priority - a.priority || (a.source < b.source ? -1 : a.source > b.source ? 1 : 0))
    return { servers, unavailable }
  }

  /** Tokens that stay identical (===) while nothing any source offers the scope changes. */
  async catalogVersion (scope: SourceScope): Promise<unknown[]> {
    // Asked on every listing: only the sources that have a token are awaited (one promise each, not one per tier).
    const tokens: unknown[] = new Array(this.#wired.length).fill(undefined)
    const pending: Array<Promise<void>> = []
    this.#wired.forEach(({ source, traits }, i) => {
      if (source.catalogToken === undefined || (traits.tenantScoped && scope.userId === undefined)) return
      pending.push(source.catalogToken(scope).then((token) => { tokens[i] = token }))
    })
    await Promise.all(pending)
    return tokens
  }

  /** A remote server's live tool list, for debugging with curl. */
  async liveTools (
    route: 'user_mcp' | 'global_mcp',
    serverId: string,
    scope: SourceScope
  ): Promise<{ ok: true, tools: unknown[] } | { ok: false, error: HttpError }> {
    const source = this.#byTier[route]
    if (!source?.serverTools) return { ok: false, error: new HttpError('GW_SERVER_NOT_FOUND', 'No remote MCP servers are configured') }
    const result = await source.serverTools(serverId, scope)
    if (result.ok) return { ok: true, tools: result.tools }
    const code = result.reason === 'not-found' ? 'GW_SERVER_NOT_FOUND' : result.reason === 'oauth-required' ? 'GW_OAUTH_REQUIRED' : 'GW_UPSTREAM_ERROR'
    return { ok: false, error: new HttpError(code, result.message) }
  }

  /** Every name each tier could offer the tenant, with shadowing (GET /catalog). */
  async catalog (scope: SourceScope): Promise<{ tools: CatalogRow[], unavailable: Unavailable[] }> {
    const rows: CatalogRow[] = []
    const unavailable: Unavailable[] = []
    for (const { tier: route, source, traits } of this.#wired) {
      if (traits.tenantScoped && scope.userId === undefined) continue
      const listing = await source.list('all', scope)
      unavailable.push(...listing.unavailable)
      for (const entry of listing.tools) {
        const winner = await this.resolve(entry.name, scope)
        const shadowedBy = winner.ok && !sameEntry(winner.entry, entry) ? winner.entry.route : null
        rows.push({ name: toWireName(shadowedBy && entry.qualifiedName ? entry.qualifiedName : entry.name), route, source: entry.source, shadowedBy })
      }
    }
    return { tools: rows, unavailable }
  }

  /** POST /invoke: resolve, enforce the allow-list, validate, call, shape the result. */
  async invoke (req: InvokeRequest): Promise<InvokeOutcome> {
    const started = performance.now()
    // Read on demand: the call's signal may be made only when something needs it (CallerAbort).
    const scope: SourceScope = new CallScope(req.userId, req.ctx)
    let entry: CatalogEntry
    // A meta tool works over the request's own allow-list: it is in every allow-list.
    const meta = this.#meta?.resolve(req.name)
    if (meta !== undefined) {
      entry = meta
    } else if (req.allow) {
      const allow = req.allow
      const listing = await this.#allowed.get(allow, scope, async () => await this.catalogVersion(scope), async () => await this.list(allow, scope))
      const hit = listing.tools.find((t) => t.name === req.name) ??
        listing.tools.find((t) => t.entry.name === req.name || t.entry.qualifiedName === req.name)
      // A selected tool that is withheld is refused below as a tool error, which says why.
      const withheld = hit ? undefined : listing.withheld?.find((t) => t.name === req.name || t.entry.name === req.name || t.entry.qualifiedName === req.name)
      if (!hit && !withheld) {
        const any = await this.resolve(req.name, scope)
        if (!any.ok) return { ok: false, error: any.error, toolMs: 0 }
        return { ok: false, error: new HttpError('GW_NOT_ALLOWED', `Tool '${req.name}' is not in the request's allow-list`), toolMs: 0 }
      }
      entry = (hit ?? withheld as ListedTool).entry
    } else {
      const now = this.#resolveNow(req.name, scope)
      const resolved = now instanceof Promise ? await now : now
      if (!resolved.ok) return { ok: false, error: resolved.error, toolMs: 0 }
      entry = resolved.entry
    }

    req.onResolved?.(entry)
    // The same decision as listing: it depends on the resolved entry, not on the name used.
    const decision = req.policy?.decide(entry)
    if (decision?.kind === 'deny') return { ok: false, error: new HttpError('GW_POLICY_DENIED', decision.message), toolMs: 0 }
    const changed = req.policy?.definitionCheck?.(entry)
    // The caller's context object itself (made for this call), not a spread copy: a spread would read
    // a lazily made `signal` (CallerAbort) on every call.
    const ctx = req.ctx as CallContext
    ctx.callId = req.callId
    const args = parseArguments(req.arguments)
    const checked = args.ok ? this.#validator.validate(entry.spec.inputSchema, args.value) : args
    let outcome: ToolOutcome
    let toolMs = 0
    let reports: GuardrailReport[] | undefined
    const unsupported = unsupportedReason(entry)
    if (unsupported !== undefined) {
      outcome = { ok: false, reason: 'tool-error', message: unsupported }
    } else if (changed?.held === true) {
      outcome = { ok: false, reason: 'definition-changed', message: definitionChangeMessage(req.name, changed) }
    } else if (!args.ok || !checked.ok) {
      outcome = { ok: false, reason: 'invalid-arguments', message: (checked as { message: string }).message }
    } else {
      const check = req.policy?.checkCall(entry, args.value)
      const refused = check instanceof Promise ? await check : check
      const rules = refused === undefined && this.#guardrails !== undefined ? req.policy?.guardrailsFor?.(entry) ?? NO_RULES : NO_RULES
      // Made only for guardrails: reading ctx.signal makes the call's AbortSignal (CallerAbort).
      const subject = rules.length > 0 ? { entry, name: req.name, userId: req.userId, signal: ctx.signal } : undefined
      const guarded = subject !== undefined ? await guardArguments(this.#guardrails as GuardrailRunner, rules, { ...subject, value: args.value }) : undefined
      if (guarded !== undefined) reports = guarded.reports
      if (refused !== undefined) {
        outcome = { ok: false, reason: 'policy', message: refused }
      } else if (guarded?.blocked !== undefined) {
        outcome = { ok: false, reason: 'guardrail', message: guarded.blocked }
      } else if (decision?.kind === 'approval-required' && req.approved !== true && req.hold !== undefined) {
        // What the approver sees is what would run: the arguments after the guardrails' redaction.
        const held = await req.hold(entry, decision.rule, guarded?.value ?? args.value)
        const result = this.#shape(req, entry, { ok: false, reason: 'approval-pending', message: held.message })
        result.durationMs = round(performance.now() - started)
        return { ok: true, result, pending: { approvalId: held.approvalId } }
      } else {
        const toolStart = performance.now()
        // A source that throws has a bug, but the caller still gets a tool-level error, never a 500.
        try {
          const callArgs = guarded?.value ?? args.value
          outcome = meta !== undefined
            ? await (this.#meta as MetaTools).call(meta, callArgs, {
              allow: req.allow, userId: req.userId, policy: req.policy, signal: ctx.signal, ctx, includeTrace: req.includeTrace
            })
            : await this.#sourceFor(entry).call(entry, callArgs, ctx)
        } catch (err) {
          outcome = { ok: false, reason: 'tool-error', message: `The tool failed: ${(err as Error)?.message ?? String(err)}` }
        }
        toolMs = performance.now() - toolStart
        if (rules.length > 0 && outcome.ok) {
          // Only what the caller can receive is checked (and kept): the same cap as #shape's.
          const maxChars = Math.min(this.#outputMaxChars, req.outputMaxChars ?? Infinity)
          const checked = await guardResult(this.#guardrails as GuardrailRunner, rules, outcome, subject as NonNullable<typeof subject>, maxChars)
          outcome = checked.outcome
          reports = [...reports ?? [], ...checked.reports]
        }
      }
    }
    const result = this.#shape(req, entry, outcome)
    if (reports !== undefined && reports.length > 0) withGuardrails(result, reports, req.includeTrace)
    result.toolMs = toolMs
    result.durationMs = round(performance.now() - started)
    return { ok: true, result }
  }

  #sourceFor (entry: CatalogEntry): ToolSource {
    const source = this.#byTier[entry.route]
    if (!source) throw new Error(`no source for route ${entry.route}`)
    return source
  }

  /** One object literal of a fixed shape per result: spreads here were the largest single cost of a trivial call. */
  #shape (req: InvokeRequest, entry: CatalogEntry, outcome: ToolOutcome): InvokeResult {
    const trace = req.includeTrace ? (outcome.trace ?? null) : null
    const maxChars = Math.min(this.#outputMaxChars, req.outputMaxChars ?? Infinity)
    let failure: { reason: ToolFailureReason, message: string } | undefined
    let text = ''
    if (!outcome.ok) {
      failure = { reason: outcome.reason, message: outcome.message }
    } else {
      const str = stringifyToolValue(outcome.value)
      if (!str.ok) failure = { reason: 'tool-error', message: str.message }
      else if (outcome.isError === true) failure = { reason: 'tool-error', message: str.text }
      else text = str.text
    }
    let result: InvokeResult
    if (failure) {
      const message = failure.message.length > 4000 ? capOutput(failure.message, 4000).text : failure.message
      const capped = capOutput(toolErrorOutput(failure.reason, message, req.name, req.callId), maxChars)
      result = {
        callId: req.callId,
        name: req.name,
        route: entry.route,
        output: capped.text,
        isError: true,
        error: { code: toolErrorCode(failure.reason), message },
        truncated: capped.truncated,
        trace,
        durationMs: 0,
        toolMs: 0
      }
    } else {
      const capped = capOutput(text, maxChars)
      const trimmed = outcome.ok && outcome.truncated === true
      result = {
        callId: req.callId,
        name: req.name,
        route: entry.route,
        output: capped.text,
        isError: false,
        error: null,
        truncated: capped.truncated || trimmed,
        trace,
        durationMs: 0,
        toolMs: 0
      }
    }
    if (outcome.checkpointId !== undefined) result.checkpointId = outcome.checkpointId
    if (outcome.ok && outcome.inputRequired !== undefined) result.inputRequired = outcome.inputRequired
    else if (!outcome.ok && outcome.requiredCapabilities !== undefined) result.requiredCapabilities = outcome.requiredCapabilities
    if (outcome.ok && outcome.task !== undefined) result.task = outcome.task
    return result
  }
}

function notFound (name: string): HttpError {
  return new HttpError('GW_TOOL_NOT_FOUND', `No tool named '${quoted(name)}'`)
}

function round (ms: number): number {
  return Math.round(ms * 1000) / 1000
}
