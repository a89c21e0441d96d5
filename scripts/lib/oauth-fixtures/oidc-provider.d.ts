// oidc-provider ships no types and @types/oidc-provider trails its releases; this declares only the
// part of its API the fixture uses (authorization-server.ts), loosely where the fixture passes values through.
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http'

  export type ClientMetadata = Record<string, unknown> & { client_id: string }

  export interface Client {
    clientId: string
    grantTypeAllowed: (type: string) => boolean
  }

  export interface KoaContextWithOIDC {
    status: number
    oidc?: { route?: string, params?: Record<string, unknown> }
  }

  export interface Interaction {
    uid: string
    grantId?: string
    prompt: { name: string, details: Record<string, unknown> }
    params: Record<string, unknown>
  }

  export class Grant {
    constructor (init: { accountId: string, clientId: string })
    addOIDCScope (scope: string): void
    addResourceScope (resource: string, scope: string): void
    save (): Promise<string>
    static find (id: string): Promise<Grant | undefined>
  }

  export type Configuration = Record<string, unknown> & {
    findAccount?: (ctx: unknown, sub: string) => Promise<{ accountId: string, claims: () => Promise<Record<string, unknown>> }>
    interactions?: { url: (ctx: unknown, interaction: Interaction) => Promise<string> }
    issueRefreshToken?: (ctx: unknown, client: Client) => Promise<boolean>
  }

  export default class Provider {
    constructor (issuer: string, configuration: Configuration)
    Grant: typeof Grant
    callback (): (req: IncomingMessage, res: ServerResponse) => void
    use (middleware: (ctx: KoaContextWithOIDC, next: () => Promise<void>) => Promise<void>): void
    on (event: string, listener: (ctx: KoaContextWithOIDC, ...rest: unknown[]) => void): this
    interactionDetails (req: IncomingMessage, res: ServerResponse): Promise<Interaction>
    interactionFinished (
      req: IncomingMessage, res: ServerResponse, result: Record<string, unknown>, options?: { mergeWithLastSubmission?: boolean }
    ): Promise<void>
  }
}
