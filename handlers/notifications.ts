// Risk and system-health notifications, their counts, states and live stream.
import { bearerToken } from '../lib/auth.js'
import { invalidField } from '../lib/errors.js'
import { counts, dismissHealth, dismissRisk, groups, listRisk, operationalStatus, pinHealth, pinRisk, readAll, setMuted } from '../lib/notifications/actions.js'
import { riskQuery } from '../lib/notifications/query.js'
import type { Handlers } from './types.js'

export const notificationsHandlers: Handlers<
  | 'getNotificationGroups'
  | 'getNotificationCounts'
  | 'getRiskNotifications'
  | 'getOperationalStatus'
  | 'dismissRiskNotification'
  | 'dismissHealthNotification'
  | 'pinRiskNotification'
  | 'pinHealthNotification'
  | 'readAllRiskNotifications'
  | 'readAllHealthNotifications'
  | 'updateNotificationGroup'
  | 'streamNotifications'
> = {
  async getNotificationGroups(req) {
    return groups(req)
  },

  async getNotificationCounts(req) {
    return counts(req)
  },

  async getRiskNotifications(req, reply) {
    const q = riskQuery(req.routeOptions.config.op!, req.query as Record<string, string | undefined>)
    const { filtered, data } = listRisk(req, q)
    reply.header('x-total-count', filtered)
    return data
  },

  async getOperationalStatus(req) {
    return operationalStatus(req)
  },

  async dismissRiskNotification(req) {
    return dismissRisk(req, req.body.id)
  },

  async dismissHealthNotification(req) {
    return dismissHealth(req, req.body)
  },

  async pinRiskNotification(req) {
    return pinRisk(req, req.body.id, req.body.pinned)
  },

  async pinHealthNotification(req) {
    return pinHealth(req, req.body)
  },

  async readAllRiskNotifications(req) {
    return readAll(req, 'risk')
  },

  async readAllHealthNotifications(req) {
    return readAll(req, 'health')
  },

  async updateNotificationGroup(req) {
    // The contract requires `muted`: validation has refused a body without it.
    return setMuted(req, req.body.name, req.body.muted === true)
  },

  async streamNotifications(req, reply) {
    const last = req.headers['last-event-id']
    if (last !== undefined && (typeof last !== 'string' || !/^[0-9]{1,19}$/.test(last))) {
      throw invalidField('header', 'Last-Event-ID', 'must be the id of an event received (1 to 19 digits)')
    }
    return req.server.notifications.hub.open(req, reply, bearerToken(req)!, last)
  },
}
