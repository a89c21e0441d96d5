/**
 * The well-known token formats of the secret detector (detector.ts): OpenAI and Anthropic `sk-...`,
 * GitHub, GitLab, AWS access key ids, Slack, Google, JWTs, Stripe, npm, PyPI, Hugging Face,
 * SendGrid, DigitalOcean, Shopify. Masked where one starts a token; tried only where a format's
 * prefix is (starts.ts), or on the whole text where those are many.
 */

import { replaceMatches } from './scan-near.js'
import { matchesFrom, tokenFormatStarts } from './starts.js'

/**
 * Well-known token formats; each alternative is a fixed prefix and one bounded run (no
 * backtracking). Where a token may start is checked on each match (tokenStartsAt): a lookbehind
 * in front of the alternatives made the pattern four times slower.
 */
export const TOKEN_FORMATS = new RegExp('(?:' + [
  String.raw`sk-[A-Za-z0-9_-]{20,400}`, // OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-api03-...)
  String.raw`gh[pousr]_[A-Za-z0-9]{30,255}`, // GitHub tokens
  String.raw`github_pat_\w{22,255}`,
  String.raw`glpat-[\w-]{20,255}`, // GitLab
  String.raw`(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])`, // AWS access key ids
  String.raw`xox[abposre]-[A-Za-z0-9-]{10,255}`, // Slack
  String.raw`xapp-[A-Za-z0-9-]{10,255}`,
  String.raw`AIza[\w-]{35}`, // Google API keys
  String.raw`ya29\.[\w-]{20,2048}`, // Google OAuth access tokens
  // JWTs, tried only where the head starts a token (tokenStartsAt's rule, as a lookbehind after the literal): a run of
  // back-to-back `eyJ...` heads with no dot was otherwise read up to 4,096 characters from each (1 MB: 1.2 s).
  String.raw`eyJ(?:(?<![\w-]eyJ)|(?<=\\[nrt]eyJ))[\w-]{8,4096}\.eyJ[\w-]{8,8192}\.[\w-]{0,1024}`,
  String.raw`[sr]k_(?:live|test)_[A-Za-z0-9]{16,255}`, // Stripe
  String.raw`whsec_[A-Za-z0-9+/=]{24,255}`,
  String.raw`npm_[A-Za-z0-9]{36}`,
  String.raw`hf_[A-Za-z0-9]{30,255}`, // Hugging Face
  String.raw`pypi-AgE[\w-]{50,1024}`,
  String.raw`SG\.[\w-]{16,64}\.[\w-]{16,128}`, // SendGrid
  String.raw`dop_v1_[a-f0-9]{64}`, // DigitalOcean
  String.raw`shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}` // Shopify
].join('|') + ')', 'g')
// Tried only where a format's prefix is (starts.ts); the whole-text scan where those are many.
export const TOKEN_FORMATS_AT = new RegExp(TOKEN_FORMATS.source, 'y')

export function isNameChar (c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 95 || c === 46 || c === 45 // a-z A-Z 0-9 _ . -
}

/** Whether a token format's match at `at` starts a token: not inside a longer run, or right after an escaped newline or tab. */
function tokenStartsAt (text: string, at: number): boolean {
  const before = text.charCodeAt(at - 1)
  if (Number.isNaN(before) || !(isNameChar(before) && before !== 46)) return true
  return text[at - 2] === '\\' && (before === 110 || before === 114 || before === 116)
}

/** A token format's match masked, unless it does not start a token or is an `sk-` without a digit (`sk-learn-helpers`). */
function keepsToken (m: string, at: number, all: string): boolean {
  return !tokenStartsAt(all, at) || (m.startsWith('sk-') && !/[0-9]/.test(m))
}

/** Every token format's match masked (keepsToken), tried where a format's prefix is (starts.ts) unless those are too many to pay. */
export function maskTokenFormats (text: string, mask: string): string {
  const starts = tokenFormatStarts(text)
  if (starts === undefined) return text.replace(TOKEN_FORMATS, (m: string, at: number, all: string) => (keepsToken(m, at, all) ? m : mask))
  return replaceMatches(text, matchesFrom(text, TOKEN_FORMATS_AT, starts).filter((m) => !keepsToken(m[0], m.index, text)), () => mask)
}
