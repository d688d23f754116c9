// Alarm destinations: list, add or update, remove, test.
import { destinationView } from '../lib/alarms/destinations.js'
import type { DestinationState } from '../lib/alarms/service.js'
import { problem } from '../lib/errors.js'
import { contextOf } from '../lib/platform/context.js'
import type { Handlers } from './types.js'

function requireIds(body: unknown): string[] {
  if (!Array.isArray(body) || body.length === 0) {
    throw problem('validation', 'The body must be a non-empty array of alarm destination ids.', { errors: [{ location: 'body', name: '(root)', reason: 'must be a non-empty array of ids' }] })
  }
  return body as string[]
}

const view = ({ row, counts }: DestinationState) => destinationView(row, counts)

export const alarmsHandlers: Handlers<'getAlarmDests' | 'addOrUpdateAlarmDest' | 'removeAlarmDest' | 'testAlarmDests'> = {
  async getAlarmDests(req) {
    const data = (await req.server.services.alarms.list()).map(view)
    return { recordsTotal: data.length, recordsFiltered: data.length, data }
  },

  async addOrUpdateAlarmDest(req) {
    return view(await req.server.services.alarms.save(contextOf(req), req.body))
  },

  async removeAlarmDest(req) {
    return req.server.services.alarms.remove(contextOf(req), requireIds(req.body))
  },

  async testAlarmDests(req) {
    return req.server.services.alarms.test(contextOf(req), requireIds(req.body))
  },
}
