import { peripheralView } from '../lib/peripherals/views.js'
import { peripheralFilterFromQuery } from '../lib/agents/filter.js'
import { itemHeaders } from '../lib/agents/commands.js'
import { listAnswer, listAnswerStream, page, sort } from '../lib/listing.js'
import { contextOf } from '../lib/platform/context.js'
import type { Handlers } from './types.js'

export const peripheralsHandlers: Handlers<'getPeripherals' | 'peripheralsCommand'> = {
  async getPeripherals(req, reply) {
    const filter = peripheralFilterFromQuery(req.query as Record<string, unknown>)
    const order = sort(req.routeOptions.config.op!, req.query.sortBy, 'sortBy')
    const { pageSize, offset } = page(req.query, req.routeOptions.config.op!)
    const p = await req.server.services.agents.peripherals(filter, order, pageSize, offset)
    if ('stream' in p) return reply.type('application/json').send(listAnswerStream(p.total, p.filtered, p.stream, p.filteredExact))
    return listAnswer(p.total, p.filtered, p.data.map(peripheralView), p.filteredExact)
  },

  async peripheralsCommand(req, reply) {
    const { result, succeeded, failures } = await req.server.services.agents.commandPeripherals(contextOf(req), req.body, req.principal!.name)
    reply.headers(itemHeaders(succeeded, failures))
    return result
  },
}
