import { problem } from '../lib/errors.js'
import { notReadyReason } from '../lib/probes.js'
import type { Handlers } from './types.js'

export const probeHandlers: Handlers<'getLiveness' | 'getReadiness' | 'getMetrics'> = {
  async getLiveness() {
    return { status: 'ok' }
  },

  async getReadiness(req) {
    const reason = await notReadyReason(req.server)
    if (reason) throw problem('not-ready', reason)
    return { status: 'ready' }
  },

  /** This node's metrics (lib/platform/metrics.ts), in Prometheus' text format. */
  async getMetrics(req, reply) {
    const { metrics } = req.server
    return reply.type(metrics.contentType).send(await metrics.text())
  },
}
