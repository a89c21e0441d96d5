/**
 * The `injection` guardrail check (SPEC 18): text in a tool result (or arguments) that speaks to
 * the model instead of informing it. Heuristics, pure, no I/O, no dependency; measured on
 * test/fixtures/guardrails/injection-corpus.json (precision and recall >= 0.9, see its notes).
 *
 * The rules, each a finding `kind`, and why:
 * - `ignore-instructions`: "ignore/disregard/forget/override ... previous/above/prior/system
 *   instructions|prompt|rules", "forget everything above": the classic override. Only with an
 *   instruction noun after a position word, so "ignore the above warning" or `.gitignore` are not.
 * - `role-reassignment`: "you are now DAN / an unrestricted AI / in developer mode", "from now on
 *   you will|must|are", "you are no longer bound": a new persona. Not "you are now logged in",
 *   "you are now a member", "you are no longer subscribed".
 * - `act-as`: "Act as ..." / "Pretend (to be|you are)" opening a sentence: an imperative to the
 *   reader. Not "the proxy acts as a cache" (not sentence-initial, or not the bare verb).
 * - `new-instructions`: "new/updated/real/important instructions:" and "new system instructions:".
 * - `system-prompt`: "reveal/print/repeat/output/leak/disclose ... system prompt", and "your
 *   system prompt": asks for or about the model's own prompt. Docs that say "set the system
 *   prompt in the config" are not.
 * - `secrecy`: "do not tell/inform/mention ... the user", "without telling the user", "hide this
 *   from the user": an injection hides itself; results have no reason to ask that.
 * - `addressed-to-model`: "note/message/instructions to|for the AI/assistant/LLM/agent/model",
 *   "attention AI agents", "if you are an AI/LLM/language model": text aimed at the model by name,
 *   followed by punctuation or a word that keeps speaking to it (not "note to AI researchers").
 * - `chat-template`: template tokens (`<|im_start|>`, `<|im_end|>`, `<|system|>`, `[INST]`,
 *   `<<SYS>>`, `<start_of_turn>`, `<|start_header_id|>`, `<|eot_id|>`, `<|endoftext|>`): they forge
 *   turns of the conversation.
 * - `role-marker`: `<system>` (unless a short one-line value, as in a Maven POM's
 *   `<system>GitHub</system>`), `<system_prompt>`, `<IMPORTANT>` (tool-poisoning style), and
 *   `### System:` / `### Assistant:` headings: forged roles.
 * - `closing-tag`: `</tool_result>`, `</function_results>`, `</tool_response>`, `<function_calls>`
 *   and the like inside a result: it pretends the result ended and what follows is trusted.
 * - `tag-characters`: U+E0000-U+E007F, invisible ASCII smuggling, except the one use text has for
 *   them: an emoji subdivision flag (U+1F3F4, 2-6 tag letters or digits, CANCEL TAG: Scotland, Wales).
 * - `bidi-override`: U+202A-U+202E, U+2066-U+2069: text displayed in another order than the
 *   model reads it (a single RLM/LRM, U+200F/U+200E, as i18n text uses, is not one of them).
 * - `zero-width-run`: 3 or more zero-width characters in a row (U+200B-U+200D, U+2060, U+FEFF),
 *   and `zero-width-interleaved`: zero-width characters between Latin letters ("i\u200Bg\u200Bn..."):
 *   hidden payloads or split keywords. Emoji ZWJ sequences have one U+200D between emoji, no run.
 * - `invisible-text`: an element whose inline style hides it (`display:none`, `visibility:hidden`,
 *   `font-size:0`, `opacity:0`, far off-screen, or the same white colour as its background) and
 *   that holds at least 5 words: a reader never sees them, the model does. Empty hidden elements,
 *   and hidden labels such as "Loading..." or a short menu, are normal pages.
 * - `markdown-exfil`: a markdown image or link whose URL carries data: a query value or path
 *   segment of 64+ token characters, or a placeholder value (`{data}`, `SECRET`, `[CONVERSATION]`)
 *   the model is told to fill in. Rendering the image sends it; normal badges have short values.
 *
 * Every pattern is linear: no nested quantifier, every run bounded or ending at a character it
 * cannot contain, and phrase rules start on a literal word. Offsets are UTF-16 code units.
 */

import type { Finding } from './finding.js'
import { matchesNear } from '../secrets/scan-near.js'
import type { Reach } from '../secrets/scan-near.js'

interface Rule {
  kind: string
  pattern: RegExp
  /** Where a match really ends, or null when it is not one (checks a pattern alone cannot make simply). */
  accept?: (text: string, m: RegExpExecArray, re: RegExp) => number | null
  /**
   * What every match contains: parts of its words, lower-case (found in the lower-cased text), or
   * HIDDEN_CHARS for the rules on invisible characters. A text without one is not scanned by the
   * rule. Each is short (under 7 characters: indexOf builds a Boyer-Moore table for a longer one,
   * which cost more than the search) and starts, where the words allow, with a letter that is rare
   * in tool output, since indexOf stops at every occurrence of its first character.
   */
  anchors: readonly string[] | typeof HIDDEN_CHARS
  /** How far a match reaches (scan-near.ts): with it, the rule runs only in windows around its anchors. */
  reach?: Reach
  /**
   * Whether a hit (found in the lower-cased text, the same positions) can be the anchor a match holds, from the
   * characters the pattern requires around it: the hits it rejects open no window (see act-as).
   */
  hit?: (text: string, lower: string, at: number) => boolean
}

// Every character the rules on hidden text look for (tag characters by their high surrogate). A
// one-byte string holds none of them, which the regex engine answers without reading it.
const HIDDEN_CHARS = /[\u200B-\u200D\u2060\uFEFF\u202A-\u202E\u2066-\u2069\uDB40]/

/** A phrase rule's reach: matches under 100 characters (bounded runs, see each pattern), anchors under 16, the context read around. */
const PHRASE: Reach = { maxMatch: 100, maxHint: 16, behind: 1, ahead: 3 }

const GAP = String.raw`[^.!?\n]{0,40}?`

// After the model is named: punctuation or a word that keeps speaking to it ("Note to AI:", "if you are
// an LLM reading this"), not a noun it qualifies ("note to AI researchers", "if you are an AI engineer").
const AIMED = String.raw`(?:\s{0,3}[:,.!]|\s{1,3}(?:reading|processing|parsing|browsing|summari[sz]ing|assistants?|agents?|models?|that|who|here|tools?|systems?))`

const ZW = String.raw`\u200B-\u200D\u2060\uFEFF`

export const RULES: readonly Rule[] = [
  {
    kind: 'ignore-instructions',
    anchors: ['gnore', 'gard', 'forget', 'overri', 'bypass'],
    reach: PHRASE,
    pattern: new RegExp(String.raw`\b(?:ignore|disregard|forget|override|bypass)\b${GAP}\b(?:(?:previous|prior|above|earlier|preceding|original|initial|your|system|developer)\s{1,3}(?:instructions?|prompts?|directions|directives|rules|guidelines|guardrails|commands|system\s{1,3}prompt)|all\s{1,3}(?:instructions|directions|directives|guidelines|guardrails))\b|\bforget\s{1,3}everything\s{1,3}(?:above|before|prior|you\s{1,3}(?:were|have\s{1,3}been)\s{1,3}told)`, 'gi')
  },
  {
    kind: 'role-reassignment',
    anchors: ['you'],
    reach: PHRASE,
    pattern: /\byou\s{1,3}are\s{1,3}now\s{1,3}(?:DAN\b|an?\s{1,3}(?:unrestricted|uncensored|unfiltered|jailbroken|evil|different|new|rogue)\b|in\s{1,3}(?:developer|god|admin|jailbreak|DAN|unrestricted)\s{1,3}mode|free\s{1,3}(?:of|from)\b|no\s{1,3}longer\s{1,3}(?:bound|restricted|an?\s{1,3}assistant))|\byou\s{1,3}are\s{1,3}no\s{1,3}longer\s{1,3}(?:bound|restricted|limited|an?\s{1,3}(?:assistant|AI))\b|\bfrom\s{1,3}now\s{1,3}on,?\s{1,3}you\s{1,3}(?:will|must|are|shall|should)\b/gi
  },
  {
    kind: 'act-as',
    anchors: ['act', 'preten', 'play'],
    reach: PHRASE,
    hit: actAsHit,
    pattern: /(?:^|[.!?:>]\s{0,3}|\n)\s{0,3}(?:please\s{1,3})?(?:act\s{1,3}as\s{1,3}(?:if\s{1,3}you|an?|my|the)\b|pretend\s{1,3}(?:to\s{1,3}be|you\s{1,3}are|that\s{1,3}you)\b|roleplay\s{1,3}as\b)/gim
  },
  {
    kind: 'new-instructions',
    anchors: ['instru'],
    reach: PHRASE,
    pattern: /\b(?:new|updated|real|actual|secret|hidden|revised)\s{1,3}(?:system\s{1,3})?instructions?\s{0,3}(?::|for\s{1,3}(?:the\s{1,3})?(?:AI|assistant|model|agent|LLM)\b)/gi
  },
  {
    kind: 'system-prompt',
    anchors: ['prompt', 'instru'],
    reach: PHRASE,
    pattern: new RegExp(String.raw`\b(?:reveal|print|repeat|output|leak|disclose|dump|recite|expose|exfiltrate|send|share)\b${GAP}\b(?:system\s{1,3}prompt|initial\s{1,3}instructions|hidden\s{1,3}instructions)\b`, 'gi')
  },
  {
    kind: 'secrecy',
    anchors: ['user', 'human', 'perato'],
    reach: PHRASE,
    pattern: new RegExp(String.raw`\b(?:do\s{1,3}not|don'?t|never|without)\s{1,3}(?:tell|telling|inform|informing|mention|mentioning|reveal|revealing)\b${GAP}\b(?:the|this)\s{1,3}(?:user|human|operator)\b(?!'s)|\b(?:hide|conceal|keep)\s{1,3}(?:this|it|these\s{1,3}instructions)\s{1,3}(?:secret\s{1,3})?from\s{1,3}(?:the\s{1,3})?(?:user|human)\b`, 'gi')
  },
  {
    kind: 'addressed-to-model',
    anchors: ['note', 'messag', 'instru', 'atten', 'mind', 'memo', 'you'],
    reach: PHRASE,
    pattern: new RegExp(String.raw`\b(?:note|message|instructions?|attention|reminder|memo)\s{1,3}(?:to|for)\s{1,3}(?:the\s{1,3}|any\s{1,3}|all\s{1,3})?(?:AI|LLM|assistant|agent|language\s{1,3}model|chatbot|model|Claude|ChatGPT|GPT)s?${AIMED}|\battention,?\s{1,3}(?:all\s{1,3})?(?:AI|LLM)\s{1,3}(?:agents?|assistants?|models?)\b|\bif\s{1,3}you\s{1,3}are\s{1,3}(?:an?\s{1,3})?(?:AI|LLM|large\s{1,3}language\s{1,3}model|language\s{1,3}model)${AIMED}`, 'gi')
  },
  {
    kind: 'chat-template',
    anchors: ['<|', ']', '>>', '_of_t'],
    reach: PHRASE,
    pattern: /<\|(?:im_start|im_end|system|user|assistant|start_header_id|end_header_id|eot_id|endoftext|begin_of_text)\|>|\[\/?INST\]|<<\/?SYS>>|<(?:start|end)_of_turn>/g
  },
  {
    kind: 'role-marker',
    anchors: ['ystem', 'portan', 'assist'],
    // `<system>` looks 50 characters ahead for its closing tag.
    reach: { ...PHRASE, ahead: 51 },
    pattern: /<system>(?![^<\n]{0,40}<\/system>)|<\/?(?:system[_-]prompt|system[_-]message|important)>|^#{1,4}\s{0,3}(?:system|assistant)\s{0,3}:/gim
  },
  {
    kind: 'closing-tag',
    anchors: ['</', '<funct', '<tool_'],
    reach: PHRASE,
    pattern: /<\/(?:tool_result|tool_results|function_results?|tool_response|tool_output|tool_use)>|<(?:function_calls|tool_call)>/gi
  },
  { kind: 'tag-characters', pattern: /[\u{E0000}-\u{E007F}]+/gu, accept: notEmojiFlag, anchors: HIDDEN_CHARS },
  { kind: 'bidi-override', pattern: /[\u202A-\u202E\u2066-\u2069]+/g, anchors: HIDDEN_CHARS },
  { kind: 'zero-width-run', pattern: new RegExp(`[${ZW}]{3,}`, 'g'), anchors: HIDDEN_CHARS },
  { kind: 'zero-width-interleaved', pattern: new RegExp(`[A-Za-z][${ZW}]{1,2}[A-Za-z][${ZW}]{1,2}[A-Za-z]`, 'g'), anchors: HIDDEN_CHARS },
  {
    kind: 'invisible-text',
    anchors: ['yle'],
    pattern: /<([a-z][a-z0-9]{0,9})\s[^<>]{0,300}?\bstyle\s{0,2}=\s{0,2}(["'])([^"'<>]{1,400})\2[^<>]{0,300}>/gi,
    accept: hiddenWithWords
  },
  {
    kind: 'markdown-exfil',
    anchors: [']('],
    pattern: /!?\[[^[\]\n]{0,200}\]\(\s{0,3}(https?:\/\/[^\s()<>]{1,2048})(?:\s{1,3}"[^"\n]{0,200}")?\s{0,3}\)/gi,
    accept: carriesData
  }
]

// Every anchor of the rules above in one pattern, longest first (for short texts: findInjection), and for
// each, the anchors it starts with (itself too): all the anchors found where it is.
const ANCHORS = [...new Set(RULES.flatMap((r) => r.anchors === HIDDEN_CHARS ? [] : r.anchors as readonly string[]))].sort((a, b) => b.length - a.length)
const ANY_ANCHOR = new RegExp(ANCHORS.map((a) => a.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g')
const PREFIX_ANCHORS = new Map(ANCHORS.map((a) => [a, ANCHORS.filter((b) => a.startsWith(b))]))
const ANY_ANCHOR_MAX = 1024
// Up to this length a rule with an anchor in the text runs on all of it: cheaper than finding where its anchors are.
const WHOLE_SCAN_MAX = 256

/**
 * The anchors a lower-cased text holds, by one scan of the pattern of them all from each position
 * after the last found one's start (the longest anchor at a position, and the anchors it starts with).
 */
function anchorsIn (lower: string): Set<string> {
  const present = new Set<string>()
  ANY_ANCHOR.lastIndex = 0
  for (let m = ANY_ANCHOR.exec(lower); m !== null; m = ANY_ANCHOR.exec(lower)) {
    for (const a of PREFIX_ANCHORS.get(m[0]) ?? []) present.add(a)
    ANY_ANCHOR.lastIndex = m.index + 1
  }
  return present
}

/** The rule names, in the order above. */
export const INJECTION_KINDS: readonly string[] = RULES.map((r) => r.kind)

// --- act as -------------------------------------------------------------------------------------

const ACT_BEFORE = /[\s.!?:>]/
const SPACE = /\s/

/**
 * An `act` hit that act-as can hold: a word of its own, as the pattern has it (after the text's start, a line break,
 * spaces, `please ` or one of `.!?:>`, and before a space), so the `act` of "contact", "fact" or "actual" opens no
 * window. The rule's other anchors (`preten`, `play`) are kept as they are.
 */
function actAsHit (text: string, lower: string, at: number): boolean {
  if (!lower.startsWith('act', at)) return true
  return (at === 0 || ACT_BEFORE.test(text[at - 1] as string)) && SPACE.test(text[at + 3] ?? '')
}

// --- tag characters ---------------------------------------------------------------------------

// The one use of tag characters in text: a subdivision flag, U+1F3F4 then a code (`gbsct`) and CANCEL TAG.
const FLAG_TAGS = /^[\u{E0030}-\u{E0039}\u{E0061}-\u{E007A}]{2,6}\u{E007F}$/u

function notEmojiFlag (text: string, m: RegExpExecArray): number | null {
  const flag = text.codePointAt(m.index - 2) === 0x1F3F4 && FLAG_TAGS.test(m[0])
  return flag ? null : m.index + m[0].length
}

// --- invisible text -----------------------------------------------------------------------------

const WHITE = /^(?:#fff|#ffffff|white|rgba?\(\s?255\s?,\s?255\s?,\s?255\s?(?:,\s?1(?:\.0)?\s?)?\))$/i

/** Whether an inline style hides its element's text. */
function hidesText (style: string): boolean {
  const decl = new Map<string, string>()
  for (const part of style.split(';')) {
    const colon = part.indexOf(':')
    if (colon > 0) decl.set(part.slice(0, colon).trim().toLowerCase(), part.slice(colon + 1).replace(/!important/i, '').trim().toLowerCase())
  }
  const get = (name: string): string => decl.get(name) ?? ''
  if (get('display') === 'none' || get('visibility') === 'hidden') return true
  if (/^0(?:\.0{1,4})?(?:px|pt|em|rem|%)?$/.test(get('font-size')) || /^0(?:\.0{1,4})?$/.test(get('opacity'))) return true
  if (/^-\d{4,}(?:px)?$/.test(get('left')) || /^-\d{4,}(?:px)?$/.test(get('top')) || /^-\d{4,}(?:px)?$/.test(get('text-indent'))) return true
  const background = get('background-color') || get('background')
  return WHITE.test(get('color')) && WHITE.test(background)
}

/** How far the text of a hidden element is read, at most. */
const HIDDEN_SPAN = 2000

function hiddenWithWords (text: string, m: RegExpExecArray, re: RegExp): number | null {
  if (!hidesText(m[3] ?? '')) return null
  const from = m.index + m[0].length
  const span = text.slice(from, from + HIDDEN_SPAN)
  const close = span.indexOf(`</${m[1] ?? ''}`)
  const to = close < 0 ? from + span.length : from + close
  // The hidden element's text is read once: the tags inside it are not tried again (linear work).
  re.lastIndex = Math.max(re.lastIndex, to)
  const words = text.slice(from, to).replace(/<[^<>]{0,300}>/g, ' ').match(/\p{L}{2,}/gu) ?? []
  return words.length >= 5 ? to : null
}

// --- markdown exfiltration ----------------------------------------------------------------------

// A value the model is told to fill in, or a long run of token characters (base64, hex, URL-encoded text).
const PLACEHOLDER = /^(?:\{|\[|<|%7B|%5B|%3C|\$)?(?:data|secret|secrets|conversation|history|chat|summary|context|memory|password|passwords|credentials|api_?key|token|email|user_?data|info)(?:\}|\]|>|%7D|%5D|%3E)?$/i
const PAYLOAD = /[A-Za-z0-9+/=_%.-]{64,}/

function carriesData (_text: string, m: RegExpExecArray): number | null {
  const url = m[1] ?? ''
  const end = m.index + m[0].length
  const query = url.includes('?') ? url.slice(url.indexOf('?') + 1).split('#')[0] ?? '' : ''
  for (const pair of query.split('&')) {
    const value = pair.slice(pair.indexOf('=') + 1)
    if (PAYLOAD.test(value) || (pair.includes('=') && PLACEHOLDER.test(value))) return end
  }
  const path = url.replace(/^https?:\/\/[^/?#]{0,255}/i, '').split(/[?#]/)[0] ?? ''
  return path.split('/').some((segment) => PAYLOAD.test(segment)) ? end : null
}

// --- all ----------------------------------------------------------------------------------------

/**
 * Every rule's findings in `text`, in order of position (a span may be found by several rules).
 * A rule runs only where its anchors are (see Rule), found with indexOf in the lower-cased text;
 * a phrase rule then runs in windows around them (scan-near.ts), the others on the whole text.
 * When lower-casing changed the text's length (a few non-ASCII letters do), positions differ and
 * the phrase rules run on the whole text too; so do they on a short text (WHOLE_SCAN_MAX) that
 * holds one of their anchors, and a short text without any anchor (ANY_ANCHOR) runs no phrase rule.
 */
export function findInjection (text: string): Finding[] {
  const found: Finding[] = []
  const lower = text.toLowerCase()
  const aligned = lower.length === text.length
  const hidden = HIDDEN_CHARS.test(text)
  // A short text is asked once which anchors it holds (most strings of a structuredContent hold none), rather
  // than once per anchor: a pattern of them all costs more per character than indexOf, less per call.
  const present = text.length <= WHOLE_SCAN_MAX ? anchorsIn(lower) : undefined
  if (!hidden && (present?.size === 0 || (present === undefined && text.length <= ANY_ANCHOR_MAX && !anyAnchor(lower)))) return found
  // Rules share anchors: each is looked up once.
  const anchored = new Map<string, number[]>()
  for (const rule of RULES) {
    let hits: number[] | undefined
    if (rule.anchors === HIDDEN_CHARS) {
      if (!hidden) continue
    } else if (present !== undefined) {
      // A short text: whether an anchor is there at all, then the rule on the whole text (no positions, no windows).
      if (!(rule.anchors as readonly string[]).some((a) => present.has(a))) continue
    } else {
      hits = anchorHits(lower, anchored, rule.anchors as readonly string[])
      if (hits.length === 0) continue
    }
    const re = rule.pattern
    if (rule.reach !== undefined && hits !== undefined && aligned) {
      const near = rule.hit === undefined ? hits : hits.filter((at) => (rule.hit as NonNullable<Rule['hit']>)(text, lower, at))
      for (const m of matchesNear(text, re, near, rule.reach)) found.push({ check: 'injection', kind: rule.kind, start: m.index, end: m.index + m[0].length })
      continue
    }
    re.lastIndex = 0
    let m: RegExpExecArray | null
    while ((m = re.exec(text)) !== null) {
      const end = rule.accept ? rule.accept(text, m, re) : m.index + m[0].length
      if (end !== null) found.push({ check: 'injection', kind: rule.kind, start: m.index, end })
      if (m[0].length === 0) re.lastIndex++
    }
  }
  return found.sort((a, b) => a.start - b.start || a.end - b.end)
}

function anyAnchor (lower: string): boolean {
  ANY_ANCHOR.lastIndex = 0
  return ANY_ANCHOR.test(lower)
}

// Anchors that begin with a letter common in text, where indexOf stops often: found together by one pattern,
// which the engine skips through several characters at a time (none is shorter than 4, none starts another).
const COMMON_ANCHORS: readonly string[] = ['note', 'messag', 'instru', 'mind', 'memo', 'user', 'overri']
const COMMON_ANCHOR = new RegExp(COMMON_ANCHORS.join('|'), 'g')

/**
 * Where each of COMMON_ANCHORS is in `lower`, into `anchored`: every occurrence (the scan goes on
 * from the position after each one's start), as literalHits finds them and any that overlap those.
 */
function commonAnchorHits (lower: string, anchored: Map<string, number[]>): void {
  for (const anchor of COMMON_ANCHORS) anchored.set(anchor, [])
  COMMON_ANCHOR.lastIndex = 0
  for (let m = COMMON_ANCHOR.exec(lower); m !== null; m = COMMON_ANCHOR.exec(lower)) {
    anchored.get(m[0])?.push(m.index)
    COMMON_ANCHOR.lastIndex = m.index + 1
  }
}

// The other anchors, found together by one pattern too (longest first; a hit also counts for the anchors its anchor starts
// with, as `]` for `](`): indexOf stops at every occurrence of an anchor's first letter, one anchor after another, and `a`,
// `p`, `y` are common in prose (10 KiB of this README: 36 us for the anchors one by one, about 7 for the pattern; on the
// bench's listing 2 and 0.6).
const RARE_ANCHORS = ANCHORS.filter((a) => !COMMON_ANCHORS.includes(a))
const RARE_ANCHOR = new RegExp(RARE_ANCHORS.map((a) => a.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|'), 'g')
const RARE_PREFIXES = new Map(RARE_ANCHORS.map((a) => [a, RARE_ANCHORS.filter((b) => a.startsWith(b))]))

/**
 * Where each of RARE_ANCHORS is in `lower`, into `anchored`: every occurrence (the scan goes on from the position after
 * each hit's start, and at a position the longest anchor there is found, the shorter ones with it).
 */
function rareAnchorHits (lower: string, anchored: Map<string, number[]>): void {
  for (const anchor of RARE_ANCHORS) anchored.set(anchor, [])
  RARE_ANCHOR.lastIndex = 0
  for (let m = RARE_ANCHOR.exec(lower); m !== null; m = RARE_ANCHOR.exec(lower)) {
    for (const a of RARE_PREFIXES.get(m[0]) ?? []) anchored.get(a)?.push(m.index)
    RARE_ANCHOR.lastIndex = m.index + 1
  }
}

/** Where a rule's anchors are, in order (the hints of matchesNear: the longest sets maxHint). */
function anchorHits (lower: string, anchored: Map<string, number[]>, anchors: readonly string[]): number[] {
  let hits: number[] = []
  for (const anchor of anchors) {
    let more = anchored.get(anchor)
    if (more === undefined) {
      if (COMMON_ANCHORS.includes(anchor)) commonAnchorHits(lower, anchored)
      else rareAnchorHits(lower, anchored)
      more = anchored.get(anchor) ?? []
    }
    if (more.length > 0) hits = hits.length === 0 ? more : hits.concat(more).sort((a, b) => a - b)
  }
  return hits
}
