import { Type } from '@sinclair/typebox'

/** GET /whoami: the caller as the gateway authenticated the request's key. */
export const WhoAmIResponse = Type.Object({
  role: Type.Union([Type.Literal('admin'), Type.Literal('tenant'), Type.Literal('approver')], {
    description: 'admin: any tenant and the admin routes; tenant: its own tools, servers, workspaces and journal; approver: its tenant\'s approvals and journal'
  }),
  userId: Type.Union([Type.String(), Type.Null()], { description: 'The tenant of a tenant or approver key; null for an admin' }),
  keyId: Type.Union([Type.String(), Type.Null()], {
    description: 'The key\'s non-reversible id (journal entries carry it; `oauth:...` for an access token, per issuer and subject); null in open mode'
  }),
  auth: Type.Union([Type.Literal('open'), Type.Literal('keyed')], { description: 'open: the gateway runs without API keys and every caller is admin' })
})
