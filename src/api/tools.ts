import { Type } from '@sinclair/typebox'
import { BUILTIN_NAMES, BUILTIN_READONLY } from '../naming/builtin-names.js'
import { FORMATS } from '../routing/formats.js'
import { TIERS } from '../routing/types.js'
import type { TIER_TRAITS } from '../routing/types.js'
import { IdString } from './common.js'

const CommaList = (description: string): ReturnType<typeof Type.String> => Type.String({ maxLength: 16384, description })

export const ToolsQuery = Type.Object({
  functions: Type.Optional(CommaList(`Comma list of built-in, function and local MCP tool names; @builtin = all ${BUILTIN_NAMES.length} built-ins, @builtin-readonly = ${BUILTIN_READONLY.join(', ')}`)),
  mcp: Type.Optional(CommaList(
    'Comma list of serverIds (the tenant\'s server if it has one, else the global one); user_{userId}_service_{serverId} is accepted too'
  )),
  userId: Type.Optional(IdString),
  format: Type.Optional(Type.Union(FORMATS.map((f) => Type.Literal(f)), { default: 'openai', description: 'Provider format of the tool schemas' })),
  strict: Type.Optional(Type.Boolean({ default: false, description: 'Any unresolved name is a 400 instead of an entry in `unresolved`' })),
  mode: Type.Optional(Type.Union([Type.Literal('all'), Type.Literal('search'), Type.Literal('code')], {
    default: 'all',
    description: '`search`: list only the `tool_search` meta tool (it searches this allow-list) and the `pinned` tools; a found tool is then called by its name ' +
      'under the same allow-list. `code`: list only `run_tools_script` (its description is the typed API of this allow-list\'s tools, which its ' +
      'script calls) and the `pinned` tools'
  })),
  pinned: Type.Optional(CommaList(
    'Comma list of listed tool names always shown: beside `tool_search` (mode=search) or `run_tools_script` (mode=code), or not deferred (defer=true)'
  )),
  defer: Type.Optional(Type.Boolean({
    default: false,
    description: 'Provider-native tool search (format=responses or anthropic): every tool but the pinned ones is marked `defer_loading: true` and the provider\'s own tool search tool is added first'
  }))
}, { additionalProperties: false })

export const ToolSearchQuery = Type.Object({
  q: Type.String({ minLength: 1, maxLength: 1000, description: 'What the tool should do, in words (names, titles, descriptions and parameters are searched)' }),
  functions: ToolsQuery.properties.functions,
  mcp: ToolsQuery.properties.mcp,
  userId: Type.Optional(IdString),
  limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 50, default: 10, description: 'How many tools to answer, best first' })),
  format: ToolsQuery.properties.format
}, { additionalProperties: false })

const Tier = Type.Union(TIERS.map((r) => Type.Literal(r)))

/**
 * Which allow-list field selects each `route` (TierTraits.selectedBy), as a type: a client that
 * bundles no server code (the console) writes the table out, and this type holds it to TIER_TRAITS.
 */
export type SelectedByRoute = { readonly [T in keyof typeof TIER_TRAITS]: typeof TIER_TRAITS[T]['selectedBy'] }

const Unresolved = Type.Object({
  kind: Type.Union([Type.Literal('function'), Type.Literal('mcp'), Type.Literal('pinned')]),
  name: Type.String(),
  reason: Type.String()
})

const UnavailableServer = Type.Object({
  serverId: Type.String(),
  reason: Type.String(),
  retryAt: Type.Optional(Type.String({
    format: 'date-time',
    description: 'The server\'s circuit breaker is open: from this time one call or listing probes it again'
  })),
  code: Type.Optional(Type.Literal('GW_OAUTH_REQUIRED', {
    description: 'The server needs the tenant\'s OAuth authorization (missing, refresh failed, more scope): the user must connect it'
  })),
  authorize: Type.Optional(Type.String({ description: 'With code: the route (POST) that starts the authorization and answers the URL to show the user' }))
})

const Diagnostic = Type.Object({
  type: Type.String(),
  name: Type.String(),
  route: Tier,
  source: Type.String(),
  exposedAs: Type.Union([Type.String(), Type.Null()]),
  shadowedBy: Type.Optional(Tier),
  oldDigest: Type.Optional(Type.String({ description: '`definition_changed`: the pinned definition\'s digest (`sha256:<hex>`)' })),
  newDigest: Type.Optional(Type.String({ description: '`definition_changed`: the offered definition\'s digest' })),
  message: Type.String()
})

export const ToolsResponse = Type.Object({
  tools: Type.Array(Type.Object({}, { additionalProperties: true }), { description: 'Tool schemas in the requested format' }),
  unresolved: Type.Array(Unresolved),
  unavailable: Type.Array(UnavailableServer),
  diagnostics: Type.Array(Diagnostic)
})

export const ToolSearchResponse = Type.Object({
  tools: Type.Array(Type.Object({}, { additionalProperties: true }), { description: 'The best matches, best first, in the requested format' }),
  scores: Type.Array(Type.Number(), {
    description: 'Each tool\'s relevance score (BM25, higher is better; fused ranks with an embedder), in the order of `tools`'
  }),
  total: Type.Integer({ description: 'How many tools the allow-list\'s listing has (what was searched)' }),
  unresolved: Type.Array(Unresolved),
  unavailable: Type.Array(UnavailableServer)
})

export const CatalogQuery = Type.Object({
  userId: Type.Optional(IdString)
}, { additionalProperties: false })

export const CatalogResponse = Type.Object({
  tools: Type.Array(Type.Object({
    name: Type.String(),
    route: Tier,
    source: Type.String(),
    shadowedBy: Type.Union([Tier, Type.Null()])
  })),
  unavailable: Type.Array(UnavailableServer),
  diagnostics: Type.Array(Diagnostic)
})
