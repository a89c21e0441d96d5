/**
 * The credential words of the secret detector (detector.ts): "the API token is 9fQ...", where a
 * random-looking token after one is masked. Found one by one from where the detector goes on, and
 * tried only where one can start (starts.ts) unless those are too many to pay.
 */

import { credentialWordStarts } from './starts.js'

// A credential word, after which a random-looking token is masked.
// Its lookbehind (no letter or digit before the word) is checked in code (nextCredentialWord): a
// pattern that opens with a lookbehind is tried at every position, and cost half again as much.
export const CREDENTIAL_WORD = /(?:api[ _-]?keys?|access[ _-]?keys?|secret(?:[ _-]?keys?)?|secrets|tokens?|passwords?|passwd|passphrase|credentials?|auth|authorization|bearer)(?![A-Za-z0-9])/gi
export const CREDENTIAL_WORD_AT = new RegExp(CREDENTIAL_WORD.source, 'iy')

function alnumAt (text: string, i: number): boolean {
  const c = text.charCodeAt(i)
  return (c >= 97 && c <= 122) || (c >= 65 && c <= 90) || (c >= 48 && c <= 57)
}

/** CREDENTIAL_WORD's next match in `text` from its lastIndex, where no letter or digit comes before it. */
export function nextCredentialWord (text: string): RegExpExecArray | null {
  for (let m = CREDENTIAL_WORD.exec(text); m !== null; m = CREDENTIAL_WORD.exec(text)) {
    if (!alnumAt(text, m.index - 1)) return m
    CREDENTIAL_WORD.lastIndex = m.index + 1
  }
  return null
}

/**
 * The credential words of `text` one by one, each found from a position the caller gives (the end
 * of the last word, or of the token masked after it): what nextCredentialWord finds from there,
 * tried only where a word can start (starts.ts) unless those are too many to pay.
 */
export function credentialWords (text: string): (from: number) => RegExpExecArray | null {
  const starts = credentialWordStarts(text)
  if (starts === undefined) {
    return (from) => {
      CREDENTIAL_WORD.lastIndex = from
      return nextCredentialWord(text)
    }
  }
  let i = 0
  return (from) => {
    for (; i < starts.length; i++) {
      const s = starts[i] as number
      if (s < from) continue
      CREDENTIAL_WORD_AT.lastIndex = s
      const m = CREDENTIAL_WORD_AT.exec(text)
      if (m !== null && !alnumAt(text, s - 1)) {
        i++
        return m
      }
    }
    return null
  }
}
