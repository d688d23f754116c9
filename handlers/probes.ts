import { problem } from '../lib/errors.js'
import { expectedSchemaVersion, notReadyReason } from '../lib/probes.js'
import type { Handlers } from './types.js'

export const probeHandlers: Handlers<'getLiveness' | 'getReadiness'> = {
  async getLiveness() {
    return { status: 'ok' }
  },

  async getReadiness(req) {
    const reason = notReadyReason(req.server, expectedSchemaVersion)
    if (reason) throw problem('not-ready', reason)
    return { status: 'ready' }
  },
}
