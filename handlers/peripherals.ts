import { peripheralView } from '../lib/peripherals/views.js'
import { peripheralFilterFromQuery } from '../lib/agents/filter.js'
import { commandPeripherals } from '../lib/agents/commands.js'
import { listAnswer, listAnswerStream, page, sort, streamedPages } from '../lib/listing.js'
import type { Handlers } from './types.js'

export const peripheralsHandlers: Handlers<'getPeripherals' | 'peripheralsCommand'> = {
  async getPeripherals(req, reply) {
    const filter = peripheralFilterFromQuery(req.query as Record<string, unknown>)
    const order = sort(req.routeOptions.config.op!, req.query.sortBy, 'sortBy')
    const { pageSize, offset } = page(req.query)
    const { peripherals } = req.server.repos
    if (pageSize > streamedPages.above) {
      const { total, filtered, ids } = peripherals.pageIds(filter, order, pageSize, offset)
      return reply.type('application/json').send(listAnswerStream(total, filtered, peripherals.viewChunks(ids, peripheralView)))
    }
    const { total, filtered, rows } = peripherals.list(filter, order, pageSize, offset)
    return listAnswer(total, filtered, rows.map(peripheralView))
  },

  async peripheralsCommand(req, reply) {
    return commandPeripherals(req, reply, req.body)
  },
}
