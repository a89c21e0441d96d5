/**
 * The `pii` guardrail check (SPEC 18): e-mail addresses, phone numbers, payment card numbers and
 * IBANs in a tool's arguments or result. Pure, no I/O, no dependency.
 *
 * Each kind is a simple pattern that finds candidates, and a check in code that keeps only the
 * real ones: a card passes the Luhn checksum and starts with a known network's prefix, an IBAN has
 * its country's length and mod-97 == 1, a phone number has 8-15 digits in sane groups. Patterns
 * are linear: no nested quantifier, every run bounded, and every candidate starts where the
 * character before it cannot continue it (a lookbehind), so a long run of digits or letters is
 * tried once, not at each of its positions.
 *
 * What is deliberately not a finding: dates (`2026-12-06`), versions and IP addresses (`1.2.3.4`),
 * ISO timestamps, long plain ids (digits without `+` and not a valid card), a card number seen as
 * a phone (a finding of a stronger kind wins where two overlap: IBAN, card, e-mail, phone).
 */

import type { Finding } from './finding.js'
import { hintHits, literalHits, matchesNear } from '../secrets/scan-near.js'
import type { Reach } from '../secrets/scan-near.js'

// --- where to look -----------------------------------------------------------------------------

// The exact patterns run only near these (scan-near.ts): an e-mail has an `@`, an international
// phone a `+`; the rest share one scan of the text for what each must contain: a card 8 digits
// (one separator at most between two groups of 4), a North American phone `ddd-dddd` or `ddd.dddd`,
// an IBAN two capitals and two digits. Most texts have few of them; each pattern's windows are its own.
const DIGITS_HINT = /\d\d\d(?:\d[ -]?\d\d\d\d|[.-]\d\d\d\d)|[A-Z][A-Z]\d\d/g
const DIGITS_HINT_MAX = 9

interface Hints { capitals: number[], digits: number[] }

/**
 * DIGITS_HINT's hits, by branch: those that start with a capital (`[A-Z][A-Z]\d\d`, an IBAN's start) and the others
 * (digits: a card's or a North American phone's). Each pattern runs only near its own branch's hits, with the same
 * matches: an IBAN_START match at `s` is a hit of the scan at `s` (no hit can cover `s`: the digits branch holds no
 * letter, and a capitals hit starting before `s` would need the letter or digit at `s - 1` that its lookbehind
 * forbids), and the hint every CARD or PHONE_NA match holds is a digits one (a capitals hit reaching into it would
 * hold a letter at most two before a digit of the match, inside it or right before it, where none can be).
 */
function splitHits (text: string, hits: readonly number[]): Hints {
  const capitals: number[] = []
  const digits: number[] = []
  for (const h of hits) {
    const c = text.charCodeAt(h)
    if (c >= 65 && c <= 90) capitals.push(h)
    else digits.push(h)
  }
  return { capitals, digits }
}
const DIGIT_OR_AT = /[0-9@]/

// --- e-mail -------------------------------------------------------------------------------------

// Local part (at most 64) @ a domain run; the domain's labels and TLD are checked in code. What
// emailMatches finds (the test compares them); a scan with this pattern tried every position.
export const EMAIL = /(?<![\w.%+-])[\w.%+-]{1,64}@[A-Za-z0-9.-]{3,253}/g

function emailEnd (text: string, at: number, matchEnd: number): number | null {
  let end = matchEnd
  while (end > at && (text[end - 1] === '.' || text[end - 1] === '-')) end--
  const labels = text.slice(at, end).split('.')
  if (labels.length < 2) return null
  if (labels.some((l) => l.length === 0 || l.length > 63 || l.startsWith('-') || l.endsWith('-'))) return null
  const tld = labels[labels.length - 1] ?? ''
  return /^(?:[A-Za-z]{2,24}|xn--[a-z0-9-]{2,20})$/i.test(tld) ? end : null
}

/** A character of a domain run (`[A-Za-z0-9.-]`), by its code. */
function domainChar (c: number): boolean {
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57) || c === 46 || c === 45
}

/** A character of a local part (`[\w.%+-]`), by its code. */
function localChar (c: number): boolean {
  return domainChar(c) || c === 95 || c === 37 || c === 43
}

/**
 * EMAIL's matches, found from each `@` (indexOf, no scan of every position) with what the pattern
 * says: the lookbehind lets a match start only where a run of local-part characters starts, so
 * the run right before the `@` is the local part, 1-64 long; then 3-253 domain characters, greedy.
 * As a global scan, the next match starts at or after the end of the last one.
 */
export function emailMatches (text: string, onMatch: (start: number, at: number, end: number) => void): void {
  let lastEnd = 0
  for (let at = text.indexOf('@'); at >= 0; at = text.indexOf('@', at + 1)) {
    let start = at
    while (start > 0 && at - start <= 64 && localChar(text.charCodeAt(start - 1))) start--
    if (start === at || at - start > 64 || start < lastEnd) continue
    let end = at + 1
    while (end < text.length && end - at - 1 < 253 && domainChar(text.charCodeAt(end))) end++
    if (end - at - 1 < 3) continue
    lastEnd = end
    onMatch(start, at, end)
  }
}

function findEmails (text: string, out: Finding[]): void {
  emailMatches(text, (matchStart, at, matchEnd) => {
    let start = matchStart
    while (text[start] === '.') start++
    if (start >= at) return
    const end = emailEnd(text, at + 1, matchEnd)
    if (end !== null) out.push({ check: 'pii', kind: 'email', start, end })
  })
}

// --- phone --------------------------------------------------------------------------------------

// International: `+`, a country code's first digit, then digits and separators, ending on a digit.
const PHONE_INTL = /(?<![\w+])\+[1-9][\d ().-]{6,24}\d/g
// North American: `(555) 123-4567`, `555-123-4567`, `555.123.4567`, optionally after `1-`/`+1 `.
const PHONE_NA = /(?<![\w+.-])(?:\+?1[ .-])?(?:\(\d{3}\) ?|\d{3}[.-])\d{3}[.-]\d{4}(?![\w-]|\.\d)/g

/** Whether `+44 (20) 7946-0958` is a phone: 8-15 digits, one separator between groups, balanced parentheses. */
function saneInternational (s: string): boolean {
  let digits = 0
  let depth = 0
  let prevSep = false
  for (let i = 1; i < s.length; i++) {
    const c = s[i] as string
    if (c >= '0' && c <= '9') { digits++; prevSep = false; continue }
    if (c === '(') {
      if (depth > 0) return false
      depth++
    } else if (c === ')') {
      if (depth === 0 || s[i - 1] === '(') return false
      depth--
    } else if (prevSep && s[i - 1] !== ')' && s[i - 1] !== '(') {
      return false
    }
    prevSep = true
  }
  if (depth !== 0 || digits < 8 || digits > 15) return false
  // `+2026-12-06` is a date with a sign, `+100.200.30.40` an IP address.
  return !/^\+\d{4}-\d{2}-\d{2}$/.test(s) && !/^\+\d{1,3}(?:\.\d{1,3}){3}$/.test(s)
}

const PHONE_INTL_REACH: Reach = { maxMatch: 27, maxHint: 1, lead: 0, behind: 1, ahead: 1 }
const PHONE_NA_REACH: Reach = { maxMatch: 17, maxHint: DIGITS_HINT_MAX, behind: 1, ahead: 2 }

function findPhones (text: string, out: Finding[], { digits }: Hints): void {
  for (const m of matchesNear(text, PHONE_INTL, literalHits(text, '+'), PHONE_INTL_REACH)) {
    let s = m[0]
    // A `(` opened and not closed at the end belongs to the text after ("+44 20 7946 0958 (mobile)").
    const open = s.lastIndexOf('(')
    if (open > s.lastIndexOf(')')) s = s.slice(0, open).trimEnd()
    if (saneInternational(s)) out.push({ check: 'pii', kind: 'phone', start: m.index, end: m.index + s.length })
  }
  for (const m of matchesNear(text, PHONE_NA, digits, PHONE_NA_REACH)) {
    const area = m[0].replace(/^\+?1[ .-]/, '').replace('(', '')
    if (area[0] !== '0' && area[0] !== '1') out.push({ check: 'pii', kind: 'phone', start: m.index, end: m.index + m[0].length })
  }
}

// --- card ---------------------------------------------------------------------------------------

// 13-19 plain digits, 4-4-4-(1-4)[-3] groups, or the 4-6-5 (Amex) and 4-6-4 (Diners) groupings.
const CARD = new RegExp([
  String.raw`(?<![\w.,+-])(?:\d{13,19}`,
  String.raw`|\d{4}([ -])\d{4}\1\d{4}\1\d{1,4}(?:\1\d{3})?`,
  String.raw`|\d{4}([ -])\d{6}\2\d{4,5})(?![\w]|[.,-]\d)`
].join(''), 'g')

/** Known networks: [lowest prefix, highest prefix, shortest length, longest length]. */
const NETWORKS: ReadonlyArray<readonly [string, string, number, number]> = [
  ['4', '4', 13, 19], // Visa
  ['51', '55', 16, 16], ['2221', '2720', 16, 16], // Mastercard
  ['34', '34', 15, 15], ['37', '37', 15, 15], // American Express
  ['6011', '6011', 16, 19], ['644', '649', 16, 19], ['65', '65', 16, 19], // Discover
  ['3528', '3589', 16, 19], // JCB
  ['300', '305', 14, 19], ['36', '36', 14, 19], ['38', '39', 16, 19], // Diners Club
  ['62', '62', 16, 19], // UnionPay
  ['50', '50', 12, 19], ['56', '58', 12, 19], ['6759', '6759', 12, 19] // Maestro
]

function knownNetwork (digits: string): boolean {
  return NETWORKS.some(([low, high, min, max]) => {
    const prefix = digits.slice(0, low.length)
    return digits.length >= min && digits.length <= max && prefix >= low && prefix <= high
  })
}

/** The Luhn checksum: from the right, every second digit doubled (minus 9 above 9); the sum ends in 0. */
export function luhnValid (digits: string): boolean {
  let sum = 0
  for (let i = 0; i < digits.length; i++) {
    let d = digits.charCodeAt(digits.length - 1 - i) - 48
    if (i % 2 === 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2
    sum += d
  }
  return sum % 10 === 0
}

const CARD_REACH: Reach = { maxMatch: 23, maxHint: DIGITS_HINT_MAX, behind: 1, ahead: 2 }

function findCards (text: string, out: Finding[], { digits }: Hints): void {
  for (const m of matchesNear(text, CARD, digits, CARD_REACH)) {
    const digits = m[0].replace(/[ -]/g, '')
    if (digits.length >= 13 && knownNetwork(digits) && luhnValid(digits)) {
      out.push({ check: 'pii', kind: 'card', start: m.index, end: m.index + m[0].length })
    }
  }
}

// --- IBAN ---------------------------------------------------------------------------------------

/** IBAN lengths of the SEPA countries and other common ones (the IBAN registry). */
const IBAN_LENGTHS: ReadonlyMap<string, number> = new Map([
  'AD24 AE23 AL28 AT20 AZ28 BA20 BE16 BG22 BH22 BR29 CH21 CR22 CY28 CZ24 DE22 DK18 DO28 EE20 EG29 ES24 FI18 FO18 FR27',
  'GB22 GE22 GI23 GL18 GR27 GT28 HR21 HU28 IE22 IL23 IS26 IT27 JO30 KW30 KZ20 LB28 LI21 LT20 LU20 LV21 MC27 MD24 ME22',
  'MK19 MR27 MT31 MU30 NL18 NO15 PK24 PL28 PS29 PT25 QA29 RO24 RS22 SA24 SE24 SI19 SK24 SM27 TN24 TR26 UA29 VA22 VG24 XK20'
].join(' ').split(' ').map((entry) => [entry.slice(0, 2), Number(entry.slice(2))]))

// Where an IBAN may start; the rest is read in code up to the country's length.
const IBAN_START = /(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?=[ A-Z0-9])/g

/** The end of an IBAN of `length` characters starting at `start` (spaces only between groups of 4), or null. */
function ibanEnd (text: string, start: number, length: number): { end: number, compact: string } | null {
  let compact = ''
  let i = start
  while (compact.length < length && i < text.length) {
    const c = text[i] as string
    if (c === ' ') {
      if (compact.length % 4 !== 0 || text[i - 1] === ' ') return null
    } else if (/[A-Z0-9]/.test(c)) {
      compact += c
    } else {
      return null
    }
    i++
  }
  if (compact.length < length || /[A-Za-z0-9]/.test(text[i] ?? '')) return null
  return { end: i, compact }
}

/** ISO 13616 check: the first four characters moved to the end, letters as 10-35, the number mod 97 is 1. */
export function ibanValid (compact: string): boolean {
  const moved = compact.slice(4) + compact.slice(0, 4)
  let rest = 0
  for (const c of moved) {
    const code = c.charCodeAt(0)
    const value = code >= 65 ? code - 55 : code - 48
    rest = value > 9 ? (rest * 100 + value) % 97 : (rest * 10 + value) % 97
  }
  return rest === 1
}

const IBAN_REACH: Reach = { maxMatch: 4, maxHint: DIGITS_HINT_MAX, behind: 1, ahead: 1 }

function findIbans (text: string, out: Finding[], { capitals }: Hints): void {
  for (const m of matchesNear(text, IBAN_START, capitals, IBAN_REACH)) {
    const length = IBAN_LENGTHS.get(m[0].slice(0, 2))
    if (length === undefined) continue
    const iban = ibanEnd(text, m.index, length)
    if (iban !== null && ibanValid(iban.compact)) out.push({ check: 'pii', kind: 'iban', start: m.index, end: iban.end })
  }
}

// --- all ----------------------------------------------------------------------------------------

/**
 * Every e-mail address, phone number, valid card number and valid IBAN in `text`, in order of
 * position. Where findings overlap, the stronger kind is kept (IBAN, card, e-mail, phone): the
 * digits of an IBAN are no card, a card number is no phone.
 */
export function findPii (text: string): Finding[] {
  // Every kind holds a digit or an `@`: a text without either (most short strings of a structuredContent) has none.
  if (!DIGIT_OR_AT.test(text)) return []
  let found: Finding[] = []
  const hints = splitHits(text, hintHits(text, DIGITS_HINT))
  for (const find of [findIbans, findCards, findEmails, findPhones]) {
    const more: Finding[] = []
    find(text, more, hints)
    more.sort((a, b) => a.start - b.start || b.end - a.end)
    let last = -1
    const kept = more.filter((f) => {
      if (f.start < last || overlapsAny(found, f)) return false
      last = f.end
      return true
    })
    found = found.concat(kept).sort((a, b) => a.start - b.start)
  }
  return found
}

/** Whether `f` overlaps one of `sorted` (disjoint, by start, so their ends are sorted too): a binary search. */
function overlapsAny (sorted: Finding[], f: Finding): boolean {
  let low = 0
  let high = sorted.length
  while (low < high) {
    const mid = (low + high) >> 1
    if ((sorted[mid] as Finding).end <= f.start) low = mid + 1
    else high = mid
  }
  const next = sorted[low]
  return next !== undefined && next.start < f.end
}

/** Each exact pattern, the hits it runs near (as findPii finds them) and its reach: the test compares matchesNear with a whole scan. */
export const NEAR_SCANS: ReadonlyArray<{ re: RegExp, hits: (text: string) => number[], reach: Reach }> = [
  { re: PHONE_INTL, hits: (text) => literalHits(text, '+'), reach: PHONE_INTL_REACH },
  { re: PHONE_NA, hits: (text) => splitHits(text, hintHits(text, DIGITS_HINT)).digits, reach: PHONE_NA_REACH },
  { re: CARD, hits: (text) => splitHits(text, hintHits(text, DIGITS_HINT)).digits, reach: CARD_REACH },
  { re: IBAN_START, hits: (text) => splitHits(text, hintHits(text, DIGITS_HINT)).capitals, reach: IBAN_REACH }
]
