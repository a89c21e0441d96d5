/**
 * The secret detector's credentials in URLs (detector.ts): `scheme://user:password@` and
 * `scheme://<token>@`. Each pattern is tried once per `://`, where the scheme before it starts,
 * not by a scan of every position.
 */

import { literalHits } from './scan-near.js'
import { DENSE, matchesFrom } from './starts.js'

// scheme://user:password@ (the password may hold an unencoded `@`: the last one before the host counts).
const URL_USERINFO = /(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,30}:\/\/)([^\s:/?#@'"\\]{0,256}):([^\s/?#'"\\]{1,256})@/g
// scheme://<token>@ (a token as the user: `https://ghp_x@github.com`, `https://<40 hex>@host`).
const URL_TOKEN_USER = /(?<![A-Za-z0-9+.-])([A-Za-z][A-Za-z0-9+.-]{0,30}:\/\/)([A-Za-z0-9._~-]{16,256})@/g
// Both open with a lookbehind, tried at every position by a scan: they are tried only at schemeStarts, where the scheme
// before a `://` starts (10 KiB of this README with its links: 140 us for the detector, 52 of them these two in a scan).
const URL_USERINFO_AT = new RegExp(URL_USERINFO.source, 'y')
const URL_TOKEN_USER_AT = new RegExp(URL_TOKEN_USER.source, 'y')

/** A character of a URL scheme (`[A-Za-z0-9+.-]`), by its code. */
function isSchemeChar (c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 43 || c === 46 || c === 45
}

/**
 * Where URL_USERINFO and URL_TOKEN_USER can start (sorted), given the `://`s of the text: one place
 * per `://`, the start of the run of scheme characters right before it, when that run is 1 to 31
 * characters long and starts with a letter. Every match holds a `://` right after its scheme (no
 * scheme character is `:` or `/`), and the lookbehind lets a match start only where such a run
 * starts: no other place can.
 */
export function schemeStarts (text: string, hits: readonly number[] = literalHits(text, '://')): number[] {
  const starts: number[] = []
  for (const h of hits) {
    let s = h
    while (s > 0 && h - s < 32 && isSchemeChar(text.charCodeAt(s - 1))) s--
    const first = text.charCodeAt(s)
    if (s < h && h - s <= 31 && ((first >= 97 && first <= 122) || (first >= 65 && first <= 90))) starts.push(s)
  }
  return starts
}

/** The matches of a URL pattern in `text` (what a global scan finds): its sticky copy tried at schemeStarts, or the scan itself where `://`s are dense. */
function urlMatches (text: string, re: RegExp, sticky: RegExp): RegExpExecArray[] {
  const hits = literalHits(text, '://')
  if (hits.length > text.length / DENSE) return [...text.matchAll(re)]
  return matchesFrom(text, sticky, schemeStarts(text, hits))
}

/** URL_USERINFO's matches in `text`. */
export function userinfoMatches (text: string): RegExpExecArray[] {
  return urlMatches(text, URL_USERINFO, URL_USERINFO_AT)
}

/** URL_TOKEN_USER's matches in `text`. */
export function tokenUserMatches (text: string): RegExpExecArray[] {
  return urlMatches(text, URL_TOKEN_USER, URL_TOKEN_USER_AT)
}

/** The patterns, each with its sticky copy tried at schemeStarts and what the detector runs: the test compares them with a scan. */
export const URL_SCANS: ReadonlyArray<{ re: RegExp, sticky: RegExp, matches: (text: string) => RegExpExecArray[] }> = [
  { re: URL_USERINFO, sticky: URL_USERINFO_AT, matches: userinfoMatches },
  { re: URL_TOKEN_USER, sticky: URL_TOKEN_USER_AT, matches: tokenUserMatches }
]

/** Every pattern here, for the detector's test that checks they are linear. */
export const URL_PATTERNS: readonly RegExp[] = [URL_USERINFO, URL_TOKEN_USER, URL_USERINFO_AT, URL_TOKEN_USER_AT]
