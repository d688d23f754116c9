import { problem } from '../lib/errors.js'
import { notReadyReason } from '../lib/probes.js'
import type { Handlers } from './types.js'

export const probeHandlers: Handlers<'getLiveness' | 'getReadiness'> = {
  async getLiveness() {
    return { status: 'ok' }
  },

  async getReadiness(req) {
    const reason = await notReadyReason(req.server)
    if (reason) throw problem('not-ready', reason)
    return { status: 'ready' }
  },
}
