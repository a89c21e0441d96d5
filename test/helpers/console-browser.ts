// What the console's browser tests share (test/browser): Debian's chromium (nothing downloads a
// browser), the watch on console errors, logging in and moving between views, and the API beside the page.
import { existsSync } from 'node:fs'
import type { ConsoleMessage, Page } from 'playwright-core'
import type { GatewayProcess } from '../../scripts/lib/gateway-process.js'

export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'

/** Why the browser tests skip (no Chromium), or undefined; under CI=true a missing Chromium fails instead. */
export const missingChromium = existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`
if (missingChromium !== undefined && process.env.CI === 'true') throw new Error(`${missingChromium}: the console browser tests cannot be skipped under CI=true`)

/** Every console error and uncaught page error, by the phase of the test it happened in. */
export function watchErrors (page: Page): { phase: (name: string) => void, errors: Array<{ phase: string, text: string }> } {
  let current = 'load'
  const errors: Array<{ phase: string, text: string }> = []
  page.on('console', (msg: ConsoleMessage) => { if (msg.type() === 'error') errors.push({ phase: current, text: msg.text() }) })
  page.on('pageerror', (err) => errors.push({ phase: current, text: `pageerror: ${err.message}` }))
  return { phase: (name) => { current = name }, errors }
}

/** One call of the gateway's API with a key, beside the page: the status and the parsed body. */
export async function api (gateway: GatewayProcess, key: string, method: string, path: string, body?: unknown): Promise<{ status: number, json: any }> {
  const res = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {})
  })
  const text = await res.text()
  return { status: res.status, json: text === '' ? null : JSON.parse(text) }
}

/** Fills the login form and submits it: the gateway says whose key it is (GET /whoami). */
export async function logIn (page: Page, key: string): Promise<void> {
  await page.fill('input[name=key]', key)
  await page.click('button[type=submit]')
}

export async function view (page: Page, name: string): Promise<void> {
  await page.locator('nav a', { hasText: new RegExp(`^${name}$`) }).click()
  await page.locator('main h1', { hasText: name }).waitFor()
}
