import { Type } from '@sinclair/typebox'

export const AuthorizeBody = Type.Object({
  returnTo: Type.Optional(Type.String({
    maxLength: 2048,
    description: 'Where the callback sends the user afterwards; its origin must be in OAUTH_RETURN_ALLOW. Without it the callback answers a page saying connected'
  }))
}, { additionalProperties: false })

export const AuthorizeResponse = Type.Object({
  authorizationUrl: Type.String({ description: 'The authorization server\'s URL to send the user to (their browser)' }),
  expiresAt: Type.String({ format: 'date-time', description: 'Until when the callback completes this authorization (10 min)' })
})

export const OAuthStatusResponse = Type.Object({
  status: Type.Union([Type.Literal('connected'), Type.Literal('authorization_required'), Type.Literal('refresh_failed')]),
  issuer: Type.Optional(Type.String({ description: 'The authorization server that issued the tokens' })),
  scopes: Type.Optional(Type.Array(Type.String(), { description: 'The scopes granted' })),
  expiresAt: Type.Optional(Type.String({ format: 'date-time', description: 'When the access token expires (it is refreshed before)' })),
  error: Type.Optional(Type.String({ description: 'Why the last refresh or authorization failed' })),
  requiredScopes: Type.Optional(Type.Array(Type.String(), { description: 'Scopes the server asked for that the authorization lacks: authorize again' }))
}, { description: 'Never a token' })

export const CallbackQuery = Type.Object({
  code: Type.Optional(Type.String({ maxLength: 4096 })),
  state: Type.Optional(Type.String({ maxLength: 512 })),
  iss: Type.Optional(Type.String({ maxLength: 2048 })),
  error: Type.Optional(Type.String({ maxLength: 256 })),
  error_description: Type.Optional(Type.String({ maxLength: 2048 }))
})

export const ClientMetadataDocument = Type.Object({}, { additionalProperties: true, description: 'The gateway\'s OAuth client metadata (RFC 7591 fields)' })
