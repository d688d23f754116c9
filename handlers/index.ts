import { problem } from '../lib/errors.js'
import { adminHandlers } from './admin.js'
import { authHandlers } from './auth.js'
import { agentsHandlers } from './agents.js'
import { catalogueHandlers } from './catalogue.js'
import { exportsHandlers } from './exports.js'
import { gatewayHandlers } from './gateway.js'
import { insightsHandlers } from './insights.js'
import { peripheralsHandlers } from './peripherals.js'
import { eventsHandlers } from './events.js'
import { alarmsHandlers } from './alarms.js'
import { reportsHandlers } from './reports.js'
import { notificationsHandlers } from './notifications.js'
import { agentlessHandlers } from './agentless.js'
import { assetsHandlers } from './assets.js'
import { probeHandlers } from './probes.js'

/** Every implemented operation, by operationId. */
export const handlers: Record<string, (req: any, reply: any) => unknown> = {
  ...authHandlers,
  ...adminHandlers,
  ...gatewayHandlers,
  ...agentsHandlers,
  ...peripheralsHandlers,
  ...insightsHandlers,
  ...catalogueHandlers,
  ...exportsHandlers,
  ...eventsHandlers,
  ...alarmsHandlers,
  ...reportsHandlers,
  ...notificationsHandlers,
  ...agentlessHandlers,
  ...assetsHandlers,
  ...probeHandlers,
}

/** The handler of an operation, or an honest 501 for one that is not built yet. */
export function resolveHandler(operationId: string) {
  const handler = handlers[operationId]
  if (handler) return handler
  return async () => {
    throw problem('not-implemented', `Operation ${operationId} is not available in this version.`)
  }
}
