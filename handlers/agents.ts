import { peripheralView } from '../lib/peripherals/views.js'
import { agentAsset, agentView, commandView, heldView, maskMachineId } from '../lib/agents/views.js'
import { agentFilterFromQuery } from '../lib/agents/filter.js'
import { cancelAgentsCommands, configureAgents, deleteAgents, queueForAgents } from '../lib/agents/commands.js'
import { audit } from '../lib/audit.js'
import { problem } from '../lib/errors.js'
import { listAnswerJson, listAnswerStream, page, sort, streamedPages } from '../lib/listing.js'
import type { components } from '../generated/openapi.js'
import type { Handlers } from './types.js'

type AgentNic = components['schemas']['AgentNic']

/** JSON the gateway stored; whatever it holds, the answer keeps to the contract's shape and limits. */
function parseList(json: string): unknown[] {
  try {
    const v = JSON.parse(json)
    return Array.isArray(v) ? v.slice(0, 32) : []
  } catch {
    return []
  }
}

const nicView = (n: any): AgentNic => ({
  name: String(n?.name || '(unnamed)').slice(0, 256),
  macAddress: n?.macAddress == null ? null : String(n.macAddress).slice(0, 32),
  ipAddresses: Array.isArray(n?.ipAddresses) ? n.ipAddresses.slice(0, 16).map((a: unknown) => String(a).slice(0, 64)) : [],
  status: ['Up', 'Down', 'Unknown'].includes(n?.status) ? n.status : 'Unknown',
  isEthernet: n?.isEthernet === true,
})

/** `<host>-debuglogs-<UTC time>.log`, with only characters safe in a file name. */
const logFileName = (host: string, ms: number) => `${host.replace(/[^\w.-]/g, '_').slice(0, 100)}-debuglogs-${new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d+/, '')}.log`

export const agentsHandlers: Handlers<'getAgents' | 'getAgent' | 'getAgentDebugLogs' | 'setAgentsConfiguration' | 'deleteAgents' | 'deleteAgentsCommands' | 'updateAgents' | 'fetchAgentsDebugLogs'> = {
  async getAgents(req, reply) {
    const query = req.query as Record<string, unknown>
    const filter = agentFilterFromQuery(query)
    const order = sort(req.routeOptions.config.op!, req.query.SortBy)
    const { pageSize, offset } = page(req.query)
    const { agents } = req.server.repos
    if (pageSize > streamedPages.above) {
      const { total, filtered, ids } = agents.pageIds(filter, order, pageSize, offset)
      return reply.type('application/json').send(listAnswerStream(total, filtered, agents.viewChunks(ids)))
    }
    const { total, filtered, rows } = agents.list(filter, order, pageSize, offset)
    // The agents' JSON is kept per row (db/agents.ts agentViews): the page is sent as written.
    return reply.type('application/json').send(listAnswerJson(total, filtered, agents.views(rows)))
  },

  async getAgent(req) {
    const { agents, peripherals, commands } = req.server.repos
    const agent = agents.byUuid(req.params.agentId)
    if (!agent) throw problem('not-found', `No agent with uuid ${req.params.agentId}.`)
    return {
      ...agentView(agent),
      machineId: maskMachineId(agent.machine_id),
      pendingReEnrollment: heldView(req.server.repos.gateway.heldReEnrollment(agent.id)),
      enrolledTime: new Date(agent.enrolled_ms).toISOString(),
      isSystemLocked: agent.is_system_locked === 1,
      checkInIntervalSeconds: agent.check_in_interval_s,
      loggedOnUsers: parseList(agent.logged_on_users).map((u) => String(u).slice(0, 128)),
      nics: parseList(agent.nics_json).map(nicView),
      peripherals: peripherals.ofAgent(agent.id).map(peripheralView),
      commands: commands.ofAgent(agent.id).map((c) => commandView(c, agent.uuid)),
    }
  },

  async getAgentDebugLogs(req, reply) {
    const { agents, commands } = req.server.repos
    const agent = agents.byUuid(req.params.agentId)
    if (!agent) throw problem('not-found', `No agent with uuid ${req.params.agentId}.`)
    const logs = commands.latestDebugLogs(agent.id)
    if (!logs) throw problem('not-found', `Agent ${agent.host_identifier} has sent no debug logs yet; ask for them with agents/fetchagentsdebuglogs.`)
    audit(req, {
      description: `Downloaded the debug logs of agent ${agent.host_identifier}`,
      details: { uuid: agent.uuid, collected: new Date(logs.created_ms).toISOString(), bytes: Buffer.byteLength(logs.content) },
      asset: agentAsset(agent),
    })
    return reply
      .header('content-type', 'text/plain; charset=utf-8')
      .header('content-disposition', `attachment; filename="${logFileName(agent.host_identifier, logs.created_ms)}"`)
      .send(Buffer.from(logs.content, 'utf8'))
  },

  async setAgentsConfiguration(req, reply) {
    return configureAgents(req, reply, req.body)
  },

  async deleteAgents(req) {
    return deleteAgents(req, req.body)
  },

  async deleteAgentsCommands(req) {
    return cancelAgentsCommands(req, req.body)
  },

  async updateAgents(req) {
    return queueForAgents(req, req.body, 'UpdateAgent')
  },

  async fetchAgentsDebugLogs(req) {
    return queueForAgents(req, req.body, 'FetchDebugLogs')
  },
}
