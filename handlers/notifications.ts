// Risk and system-health notifications, their counts, states and live stream.
import net from 'node:net'
import type { FastifyRequest } from 'fastify'
import { bearerToken } from '../lib/auth.js'
import { invalidField } from '../lib/errors.js'
import { contextOf } from '../lib/platform/context.js'
import { riskQuery } from '../lib/notifications/query.js'
import type { Reader } from '../lib/notifications/service.js'
import { callerKey } from '../lib/notifications/stream.js'
import type { Handlers } from './types.js'

/** The caller whose read state is read and whose name a change carries. */
const readerOf = (req: FastifyRequest): Reader => ({ key: callerKey(req.principal!), name: req.principal!.name })

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
    return req.server.services.notifications.groups(readerOf(req))
  },

  async getNotificationCounts(req) {
    return req.server.services.notifications.counts(readerOf(req))
  },

  async getRiskNotifications(req, reply) {
    const q = riskQuery(req.routeOptions.config.op!, req.query as Record<string, string | undefined>)
    const { filtered, data } = await req.server.services.notifications.listRisk(readerOf(req), q)
    reply.header('x-total-count', filtered)
    return data
  },

  async getOperationalStatus(req) {
    return req.server.services.notifications.operationalStatus(readerOf(req))
  },

  async dismissRiskNotification(req) {
    return req.server.services.notifications.dismissRisk(contextOf(req), readerOf(req), req.body.id)
  },

  async dismissHealthNotification(req) {
    return req.server.services.notifications.dismissHealth(contextOf(req), readerOf(req), req.body)
  },

  async pinRiskNotification(req) {
    return req.server.services.notifications.pinRisk(contextOf(req), readerOf(req), req.body.id, req.body.pinned)
  },

  async pinHealthNotification(req) {
    return req.server.services.notifications.pinHealth(contextOf(req), readerOf(req), req.body)
  },

  async readAllRiskNotifications(req) {
    return req.server.services.notifications.readAll(contextOf(req), readerOf(req), 'risk')
  },

  async readAllHealthNotifications(req) {
    return req.server.services.notifications.readAll(contextOf(req), readerOf(req), 'health')
  },

  async updateNotificationGroup(req) {
    // The contract requires `muted`: validation has refused a body without it.
    return req.server.services.notifications.setMuted(contextOf(req), readerOf(req), req.body.name, req.body.muted === true)
  },

  async streamNotifications(req, reply) {
    const last = req.headers['last-event-id']
    if (last !== undefined && (typeof last !== 'string' || !/^[0-9]{1,19}$/.test(last))) {
      throw invalidField('header', 'Last-Event-ID', 'must be the id of an event received (1 to 19 digits)')
    }
    const stream = await req.server.notifications.hub.open({
      principal: req.principal!,
      token: bearerToken(req)!,
      lastEventId: last,
      onClose: (end) => reply.raw.on('close', end),
      // An in-process request (app.inject) has no connection to hold open: it gets the
      // stream's opening and its end.
      endAtOnce: !(req.raw.socket instanceof net.Socket),
    })
    reply.header('content-type', 'text/event-stream; charset=utf-8').header('cache-control', 'no-cache').header('x-accel-buffering', 'no')
    return reply.send(stream)
  },
}
