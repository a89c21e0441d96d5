import { Type } from '@sinclair/typebox'

/** userIds and serverIds (see docs/ARCHITECTURE.md#names): no underscore, so encoded names stay unambiguous. */
export const IdString = Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9-]{0,63}$', description: 'A userId or serverId: ^[A-Za-z0-9][A-Za-z0-9-]{0,63}$' })

/** The one JSON shape of every HTTP error (docs/ARCHITECTURE.md#errors). */
export const ErrorResponse = Type.Object({
  statusCode: Type.Integer(),
  code: Type.String({ description: 'Stable GW_ code' }),
  error: Type.String({ description: 'HTTP status text' }),
  message: Type.String()
}, { $id: 'ErrorResponse', description: 'Every HTTP error: no stack traces, host paths or secrets' })

export const errorResponses = (...codes: number[]): Record<number, typeof ErrorResponse> =>
  Object.fromEntries(codes.map((c) => [c, ErrorResponse]))
