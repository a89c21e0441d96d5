import { Type } from '@sinclair/typebox'

const Definition = Type.Union([
  Type.Object({
    name: Type.String(),
    title: Type.Optional(Type.String()),
    description: Type.String(),
    inputSchema: Type.Object({}, { additionalProperties: true }),
    outputSchema: Type.Optional(Type.Object({}, { additionalProperties: true })),
    annotations: Type.Optional(Type.Object({}, { additionalProperties: true }))
  }),
  Type.Null()
], {
  description: 'A tool definition as pinned: name, title, description, inputSchema, outputSchema, annotations (null: not known, or over 16 KiB and kept as a digest only)'
})

const ToolPin = Type.Object({
  name: Type.String({ description: 'The tool\'s own name at its server' }),
  status: Type.Union([Type.Literal('pinned'), Type.Literal('changed'), Type.Literal('unpinned'), Type.Literal('removed')], {
    description: 'pinned: offered as pinned; changed: offered with another definition (reported as `definition_changed`; held under `pinning: hold`); unpinned: not seen yet (pinned when first listed or called); removed: pinned, no longer offered'
  }),
  pinnedDigest: Type.Union([Type.String(), Type.Null()], { description: '`sha256:<hex>` of the pinned definition\'s canonical JSON' }),
  currentDigest: Type.Union([Type.String(), Type.Null()], { description: 'The offered definition\'s digest (the one to pass in `digests` to accept it)' }),
  pinnedAt: Type.Union([Type.String(), Type.Null()]),
  fields: Type.Array(Type.String(), { description: 'The top-level fields that changed (name, title, description, inputSchema, outputSchema, annotations)' }),
  pinned: Definition,
  current: Definition
})

export const PinsResponse = Type.Object({
  serverId: Type.String(),
  route: Type.Union([Type.Literal('user_mcp'), Type.Literal('global_mcp')]),
  pinning: Type.Union([Type.Literal('warn'), Type.Literal('hold')], { description: 'The scope\'s policy for a changed definition' }),
  unavailable: Type.Union([Type.String(), Type.Null()], {
    description: 'Why the server\'s tools could not be read now (statuses then come from the pins, `current` is the last changed definition seen); null when they were read'
  }),
  tools: Type.Array(ToolPin)
})

export const AcceptPinsBody = Type.Union([
  Type.Object({
    tools: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), {
      maxItems: 5000,
      description: 'The tools to accept (their own names at the server); absent: every tool the server offers, and the pins of tools it no longer offers are dropped'
    })),
    digests: Type.Optional(Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 80 }), {
      maxProperties: 5000,
      description: 'Accept only if each named tool is still offered with this digest (`currentDigest` as read): else 409 GW_DEFINITION_CHANGED and nothing is pinned'
    }))
  }, { additionalProperties: false }),
  Type.Null()
])

export const AcceptPinsResponse = Type.Object({
  ...PinsResponse.properties,
  accepted: Type.Array(Type.String(), { description: 'The tools whose offered definitions are now pinned' })
})
