/**
 * The one line of a tool's description that code mode's typed API shows (SPEC 19): a model reads the API on
 * every turn, so each tool gets its first sentence, whitespace collapsed, at most {@link MAX_DOC} characters.
 * The text comes from tool servers (untrusted): control characters and lone surrogates become spaces here,
 * and each renderer escapes what would end its comment or docstring.
 */

/** Longest doc line, counted in code points; a longer sentence is cut and ends in "...". */
const MAX_DOC = 120

/** Characters of a description read at all (a description may be megabytes; the first sentence is near its start). */
const SCAN = 2000

/**
 * Sentence end: a stop followed by a space and something that does not start a lowercase word, or the end
 * ("e.g. the file" and "v1.2" do not end a sentence).
 */
const SENTENCE_END = /[.!?](?= [^a-z]|$)/

/** The first sentence of `description` on one line; '' when there is none (or it is not a string). */
export function docLine (description: unknown): string {
  if (typeof description !== 'string') return ''
  const text = description.slice(0, SCAN).replace(/[\p{Cc}\p{Cs}]/gu, ' ').replace(/\s+/g, ' ').trim()
  const end = SENTENCE_END.exec(text)
  const sentence = end ? text.slice(0, end.index + 1) : text
  const chars = Array.from(sentence)
  return chars.length <= MAX_DOC ? sentence : `${chars.slice(0, MAX_DOC - 3).join('').trimEnd()}...`
}
