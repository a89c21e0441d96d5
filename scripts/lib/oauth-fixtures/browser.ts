/**
 * The user's browser in an authorization code flow against the fixture authorization server
 * (authorization-server.ts): it requests the authorization URL, follows the server's redirects by
 * hand with a small cookie jar (oidc-provider ties the interaction to cookies), signs in as
 * `account` by POSTing the interaction form (consent is given with it), and stops at the first
 * redirect that leaves the authorization server's origin: the client's redirect URI with `code`,
 * `state` and `iss`.
 *
 * Options (BrowserOptions): `account` (required), `follow` (request that last redirect too, without
 * following its own redirects, and return the Response: the client's callback answer), `maxSteps`
 * (default 20). An authorization error page or a loop throws, with the path and status only.
 */

/** Options of browser (see the header comment). */
export interface BrowserOptions {
  account: string
  follow?: boolean
  maxSteps?: number
}

interface Cookie { name: string, value: string, path: string }

/** Cookies of one origin, with their paths (oidc-provider scopes the interaction cookies by path). */
class CookieJar {
  #cookies = new Map<string, Cookie>()

  store (headers: Headers): void {
    for (const line of headers.getSetCookie()) {
      const [pair = '', ...attributes] = line.split(';').map((s) => s.trim())
      const eq = pair.indexOf('=')
      if (eq <= 0) continue
      const cookie: Cookie = { name: pair.slice(0, eq), value: pair.slice(eq + 1), path: '/' }
      let expired = false
      for (const attribute of attributes) {
        const [key = '', value = ''] = attribute.split('=')
        const k = key.toLowerCase()
        if (k === 'path' && value.startsWith('/')) cookie.path = value
        if (k === 'max-age' && Number(value) <= 0) expired = true
        if (k === 'expires' && Date.parse(value) <= Date.now()) expired = true
      }
      const key = `${cookie.name};${cookie.path}`
      if (expired) this.#cookies.delete(key)
      else this.#cookies.set(key, cookie)
    }
  }

  header (url: URL): string {
    return [...this.#cookies.values()]
      .filter((c) => url.pathname === c.path || url.pathname.startsWith(c.path.endsWith('/') ? c.path : `${c.path}/`))
      .map((c) => `${c.name}=${c.value}`)
      .join('; ')
  }
}

/**
 * Runs the user's side of the authorization; returns the redirect to the client (see the header
 * comment), or with `follow: true` the client's Response to it.
 */
export async function browser (authorizationUrl: string | URL, options: BrowserOptions & { follow?: false }): Promise<string>
export async function browser (authorizationUrl: string | URL, options: BrowserOptions & { follow: true }): Promise<Response>
export async function browser (authorizationUrl: string | URL, options: BrowserOptions): Promise<string | Response> {
  const jar = new CookieJar()
  let url = new URL(authorizationUrl)
  const origin = url.origin
  let form: URLSearchParams | undefined
  for (let step = 0; step < (options.maxSteps ?? 20); step++) {
    const cookie = jar.header(url)
    const res = await fetch(url, {
      method: form === undefined ? 'GET' : 'POST',
      redirect: 'manual',
      headers: cookie === '' ? {} : { cookie },
      body: form
    })
    jar.store(res.headers)
    form = undefined
    const location = res.headers.get('location')
    if (res.status >= 300 && res.status < 400 && location !== null) {
      await res.body?.cancel()
      const next = new URL(location, url)
      if (next.origin !== origin) {
        if (options.follow !== true) return next.href
        return await fetch(next, { redirect: 'manual' })
      }
      url = next
      continue
    }
    const text = await res.text()
    if (res.status === 200 && url.pathname.startsWith('/interaction/')) {
      form = new URLSearchParams({ account: options.account })
      continue
    }
    // oidc-provider's error page names the error and its description; neither holds a secret.
    const message = text.replace(/<[^>]+>/g, ' ').replace(/\s+/g, ' ').trim().slice(0, 300)
    throw new Error(`authorization stopped at ${url.pathname} with ${res.status}: ${message}`)
  }
  throw new Error('authorization did not leave the authorization server')
}
