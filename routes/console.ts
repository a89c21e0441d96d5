import { existsSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import fp from 'fastify-plugin'
import fastifyStatic from '@fastify/static'
import type { FastifyInstance, FastifyReply } from 'fastify'
import { HttpError } from '../src/errors.js'

/**
 * The console's Content-Security-Policy: its own script and styles only, no inline script, nothing
 * fetched from another origin (fonts and icons are bundled), never framed.
 */
export const CONSOLE_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"

/** Hashed asset names never change content: a year, immutable. */
const ASSET_CACHE = 'public, max-age=31536000, immutable'

const here = dirname(fileURLToPath(import.meta.url))

/**
 * Where `npm run build:console` writes: console/dist beside routes/ when run from the sources
 * (npm start), or two levels up when run compiled (dist/routes/console.js, the Docker image).
 */
function consoleDistDir (): string {
  const candidates = [join(here, '..', 'console', 'dist'), join(here, '..', '..', 'console', 'dist')]
  return candidates.find((dir) => existsSync(join(dir, 'index.html'))) ?? candidates[0] as string
}

function securityHeaders (reply: FastifyReply): void {
  reply.header('content-security-policy', CONSOLE_CSP)
  reply.header('x-content-type-options', 'nosniff')
  reply.header('referrer-policy', 'no-referrer')
}

/**
 * GET /console: the web console, a single-page app that calls only the public HTTP API with the
 * key its user typed. Its pages and assets are public (the key stays in the browser), out of the
 * rate limit and openapi.yaml, and never counted as invocations. The page itself is never cached
 * (it names the current hashed assets); the assets are cached for good.
 */
export interface ConsoleRoutesOptions {
  /** The built console (index.html and assets/); defaults to consoleDistDir(). */
  distDir?: string
}

async function consoleRoutes (app: FastifyInstance, opts: ConsoleRoutesOptions): Promise<void> {
  const dist = opts.distDir ?? consoleDistDir()
  // Every route of this context, @fastify/static's too, is public and hidden from the API docs.
  app.addHook('onRoute', (route) => {
    route.config = { ...route.config, public: true }
    route.schema = { ...route.schema, hide: true }
  })

  let page: string | undefined
  const indexHtml = async (): Promise<string> => {
    if (page !== undefined) return page
    try {
      page = await readFile(join(dist, 'index.html'), 'utf8')
      return page
    } catch {
      throw new HttpError('GW_NOT_READY', 'The console is not built: run `npm run build:console` (npm ci does it too)')
    }
  }

  const servePage = async (_request: unknown, reply: FastifyReply): Promise<FastifyReply> => {
    const html = await indexHtml()
    securityHeaders(reply)
    return await reply.header('cache-control', 'no-cache').type('text/html; charset=utf-8').send(html)
  }
  app.get('/console', servePage)
  app.get('/console/', servePage)

  await app.register(fastifyStatic, {
    root: join(dist, 'assets'),
    prefix: '/console/assets/',
    decorateReply: false,
    // The directory is read per request: a build after start-up is served without a restart.
    wildcard: true,
    index: false,
    list: false,
    dotfiles: 'deny',
    cacheControl: false,
    setHeaders: (res) => {
      res.setHeader('cache-control', ASSET_CACHE)
      res.setHeader('content-security-policy', CONSOLE_CSP)
      res.setHeader('x-content-type-options', 'nosniff')
    }
  })
}

export default fp(consoleRoutes, { name: 'routes-console', dependencies: ['gateway-errors', 'gateway-docs', 'gateway-auth'], encapsulate: true })
