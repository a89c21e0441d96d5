/**
 * OAuth fixtures for tests (SPEC 16), all on loopback, in-process. Everything closes cleanly.
 *
 * - startAuthorizationServer: oidc-provider with PKCE, resource indicators (JWT access tokens),
 *   rotating refresh tokens, dynamic registration, revocation, client_credentials (authorization-server.ts)
 * - startProtectedMcpServer: a streamable-HTTP MCP server behind a bearer check, with RFC 9728
 *   metadata and scope step-up (protected-mcp-server.ts)
 * - browser: the user's side of the authorization code flow (browser.ts)
 */
export * from './authorization-server.js'
export * from './browser.js'
export * from './protected-mcp-server.js'
