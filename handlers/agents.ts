import { agentFilterFromQuery } from '../lib/agents/filter.js'
import { itemHeaders } from '../lib/agents/commands.js'
import { agentDetailView, logFileName } from '../lib/agents/views.js'
import { listAnswerJson, listAnswerStream, page, sort } from '../lib/listing.js'
import { contextOf } from '../lib/platform/context.js'
import type { Handlers } from './types.js'

export const agentsHandlers: Handlers<'getAgents' | 'getAgent' | 'getAgentDebugLogs' | 'setAgentsConfiguration' | 'deleteAgents' | 'deleteAgentsCommands' | 'updateAgents' | 'fetchAgentsDebugLogs'> = {
  async getAgents(req, reply) {
    const filter = agentFilterFromQuery(req.query as Record<string, unknown>)
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const { pageSize, offset } = page(req.query, req.routeOptions.config.op!)
    const p = await req.server.services.agents.list(filter, order, pageSize, offset)
    // The agents' JSON is kept per row (db/agents.ts agentViews): the page is sent as written.
    return reply.type('application/json').send('stream' in p ? listAnswerStream(p.total, p.filtered, p.stream, p.filteredExact) : listAnswerJson(p.total, p.filtered, p.data, p.filteredExact))
  },

  async getAgent(req) {
    return agentDetailView(await req.server.services.agents.details(req.params.agentId))
  },

  async getAgentDebugLogs(req, reply) {
    const { agent, logs } = await req.server.services.agents.debugLogs(contextOf(req), req.params.agentId)
    return reply
      .header('content-type', 'text/plain; charset=utf-8')
      .header('content-disposition', `attachment; filename="${logFileName(agent.host_identifier, logs.created_ms)}"`)
      .send(Buffer.from(logs.content, 'utf8'))
  },

  async setAgentsConfiguration(req, reply) {
    const { result, succeeded, failures } = await req.server.services.agents.configure(contextOf(req), req.body, req.principal!.name)
    reply.headers(itemHeaders(succeeded, failures))
    return result
  },

  async deleteAgents(req) {
    return req.server.services.agents.remove(contextOf(req), req.body)
  },

  async deleteAgentsCommands(req) {
    return req.server.services.agents.cancelCommands(contextOf(req), req.body, req.principal!.name)
  },

  async updateAgents(req) {
    return req.server.services.agents.queue(contextOf(req), req.body, 'UpdateAgent', req.principal!.name)
  },

  async fetchAgentsDebugLogs(req) {
    return req.server.services.agents.queue(contextOf(req), req.body, 'FetchDebugLogs', req.principal!.name)
  },
}
