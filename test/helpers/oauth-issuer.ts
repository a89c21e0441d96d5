import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, exportSPKI, generateKeyPair, SignJWT } from 'jose'
import type { CryptoKey, JWK, JWTPayload } from 'jose'

/**
 * An OAuth authorization server on loopback as far as a resource server sees one: its metadata
 * document (RFC 8414, or OpenID discovery) and its JWKS, over real HTTP, with keys made by jose.
 * It signs access tokens with its current key, rotates keys, and can go down (every request
 * answers 503) to test what the gateway does while its issuer is unreachable.
 */
export interface TestIssuer {
  /** The issuer identifier (`iss`): `http://127.0.0.1:{port}` plus the path asked for. */
  issuer: string
  /** Signs `claims` (iss and a 5 min exp added unless given) with the current key and its kid. */
  sign: (claims: JWTPayload, opts?: { key?: SigningKey, header?: Record<string, unknown> }) => Promise<string>
  /** A key the JWKS does not publish (its own kid), to sign forged or unknown-kid tokens. */
  newKey: (kid?: string) => Promise<SigningKey>
  /** The current key's kid and its public key as PEM (the bytes an HS256 confusion attack uses as secret). */
  current: () => SigningKey
  /** Makes a new key current; the JWKS then publishes only it. */
  rotate: () => Promise<void>
  /** While down, every request (metadata, JWKS) answers 503. */
  setDown: (down: boolean) => void
  /** Pads the JWKS document with this many bytes of an unknown member (a hostile or broken issuer's huge answer). */
  setJwksPadding: (bytes: number) => void
  /** Requests served, by path. */
  hits: Map<string, number>
  close: () => Promise<void>
}

export interface SigningKey { kid: string, privateKey: CryptoKey, publicJwk: JWK, publicPem: string }

export interface TestIssuerOptions {
  /** The issuer's path (`/tenant1`): metadata is then found by path insertion. */
  path?: string
  /** Which metadata document exists: RFC 8414's (default), or OpenID discovery's only. */
  metadata?: 'oauth' | 'openid'
}

let kidCounter = 0

async function makeKey (kid = `k${++kidCounter}`): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true })
  const publicJwk = { ...await exportJWK(publicKey), kid, alg: 'RS256', use: 'sig' }
  return { kid, privateKey, publicJwk, publicPem: await exportSPKI(publicKey) }
}

export async function startTestIssuer (opts: TestIssuerOptions = {}): Promise<TestIssuer> {
  let key = await makeKey()
  let down = false
  let padding = 0
  const hits = new Map<string, number>()
  const path = opts.path ?? ''
  let issuer = ''
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1')
    hits.set(url.pathname, (hits.get(url.pathname) ?? 0) + 1)
    if (down) {
      res.writeHead(503).end()
      return
    }
    const metadataPath = opts.metadata === 'openid'
      ? `/.well-known/openid-configuration${path}`
      : `/.well-known/oauth-authorization-server${path}`
    const json = (body: unknown): void => {
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body))
    }
    if (url.pathname === metadataPath) {
      json({ issuer, jwks_uri: `${issuer}/jwks`, token_endpoint: `${issuer}/token`, response_types_supported: ['code'] })
    } else if (url.pathname === `${path}/jwks`) {
      json({ keys: [key.publicJwk], ...(padding > 0 ? { padding: 'x'.repeat(padding) } : {}) })
    } else {
      res.writeHead(404).end()
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`
  return {
    issuer,
    hits,
    current: () => key,
    setJwksPadding: (bytes) => { padding = bytes },
    newKey: makeKey,
    rotate: async () => { key = await makeKey() },
    setDown: (value) => { down = value },
    sign: async (claims, signOpts = {}) => {
      const k = signOpts.key ?? key
      const now = Math.floor(Date.now() / 1000)
      return await new SignJWT({ iss: issuer, iat: now, exp: now + 300, ...claims })
        .setProtectedHeader({ alg: 'RS256', kid: k.kid, typ: 'at+jwt', ...signOpts.header })
        .sign(k.privateKey)
    },
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}
