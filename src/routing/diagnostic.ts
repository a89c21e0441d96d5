import type { Tier } from './types.js'

/** Why a selected tool is listed under another name, or not at all: GET /tools' `diagnostics`. */
export interface Diagnostic {
  /**
   * `denied`: the tenant's tool policy hides the tool; `definition_changed`: its definition is not the
   * one the tenant pinned (SPEC 18; exposedAs null when `pinning: hold` withholds it). GET /tools adds
   * these two; the router never does.
   */
  type: 'shadowed' | 'renamed' | 'duplicate' | 'ambiguous' | 'unsupported' | 'denied' | 'definition_changed'
  /** The natural name that could not be used as is. */
  name: string
  route: Tier
  source: string
  /** The name the tool is exposed under in this listing (null when it is not exposed). */
  exposedAs: string | null
  /** The route that wins over this tool for `name`, for `shadowed`. */
  shadowedBy?: Tier
  /** `definition_changed`: the pinned definition's digest and the offered one's (`sha256:<hex>`). */
  oldDigest?: string
  newDigest?: string
  message: string
}
