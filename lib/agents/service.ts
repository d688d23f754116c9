// Agents and their peripherals: the lists, an agent's details and debug logs, what operators
// do to agents (mode, approvals, commands, deletion) and the exports of agents and peripheral
// models. Takes plain inputs (the caller's context and the parsed request), so it runs
// without Fastify. Each change runs in one unit of work, answers per item and audits every
// agent it changed (with the agent as the asset).
import type { components } from '../../generated/openapi.js'
import { invalidField, problem } from '../errors.js'
import { streamedPages } from '../listing.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, UnitOfWork } from '../platform/ports.js'
import { peripheralView } from '../peripherals/views.js'
import { fileStamp } from '../reports/files.js'
import type { FailureCode } from './commands.js'
import { auditFailures, commandPeripherals, type ConfigurationState, configure, type PerItem } from './configuration.js'
import type { AgentFilter, PeripheralFilter } from './filter.js'
import type { AgentRow, AgentStateStore, Counts, AgentStore, CommandStore, CommandType, ExportStore, PeripheralListRow, PeripheralModelRow, PeripheralStore, ReEnrollmentStore, Sort } from './ports.js'
import { type AgentDetails, agentAsset, maskMachineId } from './views.js'

type Schemas = components['schemas']
type ConfigurationItem = Schemas['AgentPendingConfigurationWrapper']
type ConfigurationResult = Schemas['AgentConfigurationResult']
type CommandItemResult = Schemas['AgentCommandItemResult']
type ItemResult = Schemas['ItemResult']
type PeripheralCommand = Schemas['PeripheralCommandRequest']

export interface AgentServiceDeps {
  agents: AgentStore
  peripherals: PeripheralStore
  commands: CommandStore
  agentState: AgentStateStore
  reEnrollments: ReEnrollmentStore
  exports: ExportStore
  uow: UnitOfWork
  audit: AuditTrail
  /** PRIME_PUBLIC_ADDRESS: the console address a configured agent is shown. */
  publicAddress: string | null
  now?: () => number
}

/** A page of a list: small pages as a whole, larger ones streamed (lib/listing.ts streamedPages). */
export type Page<T> = Counts & ({ data: T } | { stream: AsyncIterable<string> })

export type { PerItem } from './configuration.js'

export type ExportFormat = 'csv' | 'pdf'

/** An export, audited: its file name and the filters given, and its rows. */
export interface ExportFile<R> {
  fileName: string
  records: number
  filters: [string, string][]
  generatedMs: number
  rows: R
}

// Paging is accepted from clients that send their list query as is, and means nothing in an export.
const IGNORED = new Set(['pagenumber', 'pagesize', 'format', 'sortby'])

/** The filters a caller gave, as label and value, for the export and its audit record. */
export function givenFilters(src: unknown): [string, string][] {
  if (!src || typeof src !== 'object') return []
  return Object.entries(src)
    .filter(([k, v]) => v !== null && v !== undefined && v !== '' && !IGNORED.has(k.toLowerCase()))
    .map(([k, v]) => [k, String(v)])
}

const unknownAgent = (id: string) => ({ id, status: 'failed' as const, reason: 'No agent with this uuid.', code: 'not-found' as const })

export function agentService(deps: AgentServiceDeps) {
  const { agents, peripherals, commands, agentState, uow, audit } = deps
  const clock = deps.now ?? Date.now
  const stores = { commands, peripherals }

  /** Runs `act` on each agent named by uuid in one unit of work; unknown uuids fail per item. */
  async function perAgent<R extends ItemResult>(ctx: Context, uuids: string[] | null, act: (agent: AgentRow, id: string) => Promise<R>, notFound: (id: string) => R) {
    if (!Array.isArray(uuids) || uuids.length === 0) throw invalidField('body', '(root)', 'must be a non-empty array of agent uuids')
    return uow.run(async () => {
      const results: R[] = []
      for (const id of uuids) {
        const agent = await agents.byUuid(id)
        results.push(agent ? await act(agent, id) : notFound(id))
      }
      const failed = results.filter((r) => r.status === 'failed').length
      await auditFailures(
        audit,
        ctx,
        ctx.operation?.operationId ?? 'Agents',
        results.flatMap((r, index) => (r.status === 'failed' ? [{ index, code: r.code as FailureCode, reason: r.reason ?? '' }] : [])),
        results.length - failed,
      )
      return { succeeded: results.length - failed, failed, results }
    })
  }

  const configuration: ConfigurationState = { agents, peripherals, agentState, uow, audit, stores, publicAddress: deps.publicAddress, clock }

  return {
    /** A page of GET agents: the agents' JSON as kept per row, or streamed for a very large page. */
    async list(filter: AgentFilter, order: Sort, pageSize: number, offset: number): Promise<Page<string>> {
      if (pageSize > streamedPages.above) {
        const { ids, ...counts } = await agents.pageIds(filter, order, pageSize, offset)
        return { ...counts, stream: await agents.viewChunks(ids) }
      }
      const { json, ...counts } = await agents.page(filter, order, pageSize, offset)
      return { ...counts, data: json }
    },

    /** The agent with its held re-enrollment, peripherals and commands. */
    async details(uuid: string): Promise<AgentDetails> {
      const agent = await agents.byUuid(uuid)
      if (!agent) throw problem('not-found', `No agent with uuid ${uuid}.`)
      // Three reads of their own: on PostgreSQL, three round trips at once rather than in turn.
      const [held, ofAgent, sent] = await Promise.all([deps.reEnrollments.heldReEnrollment(agent.id), peripherals.ofAgent(agent.id), commands.ofAgent(agent.id)])
      return { agent, held, peripherals: ofAgent, commands: sent }
    },

    /** The agent's most recently collected debug logs, audited as downloaded. */
    async debugLogs(ctx: Context, uuid: string): Promise<{ agent: AgentRow; logs: { created_ms: number; content: string } }> {
      return uow.run(async () => {
        const agent = await agents.byUuid(uuid)
        if (!agent) throw problem('not-found', `No agent with uuid ${uuid}.`)
        const logs = await commands.latestDebugLogs(agent.id)
        if (!logs) throw problem('not-found', `Agent ${agent.host_identifier} has sent no debug logs yet; ask for them with agents/fetchagentsdebuglogs.`)
        await audit.record(ctx, {
          description: `Downloaded the debug logs of agent ${agent.host_identifier}`,
          details: { uuid: agent.uuid, collected: new Date(logs.created_ms).toISOString(), bytes: Buffer.byteLength(logs.content) },
          asset: agentAsset(agent),
        })
        return { agent, logs }
      })
    },

    /** agents/configuration: arm or free agents and approve all their present peripherals. `by`: the caller's name, as commands record it. */
    configure: (ctx: Context, items: ConfigurationItem[] | null, by: string): Promise<PerItem<ConfigurationResult[]>> => configure(configuration, ctx, items, by),

    /** peripherals/command: approve or disapprove models (VID/PID) on agents; answers the uuids of the agents affected. */
    commandPeripherals: (ctx: Context, body: PeripheralCommand, by: string): Promise<PerItem<string[]>> => commandPeripherals(configuration, ctx, body, by),

    /** deleteAgents: the agent, its peripherals, approvals and commands go; its events and audit records stay. */
    async remove(ctx: Context, uuids: string[] | null) {
      return perAgent<ItemResult>(
        ctx,
        uuids,
        async (agent, id) => {
          await agents.remove(agent.id)
          await audit.record(ctx, {
            description: `Deleted agent ${agent.host_identifier} (${agent.uuid}) with its peripherals and commands`,
            details: {
              uuid: agent.uuid,
              hostIdentifier: agent.host_identifier,
              machineId: maskMachineId(agent.machine_id),
              peripherals: agent.approved_and_present + agent.approved_and_disconnected + agent.not_approved,
            },
            asset: agentAsset(agent),
          })
          return { id, status: 'done', reason: null, code: null }
        },
        unknownAgent,
      )
    },

    /** deleteAgentsCommands: every Pending command of each agent becomes Cancelled. */
    async cancelCommands(ctx: Context, uuids: string[] | null, by: string) {
      const now = clock()
      return perAgent<CommandItemResult>(
        ctx,
        uuids,
        async (agent, id) => {
          const cancelled = await commands.cancelPending(agent.id, now, `Cancelled by ${by}.`)
          if (cancelled.length) {
            await agentState.refreshAgent(agent.id)
            await audit.record(ctx, {
              description: `Cancelled ${cancelled.length} pending command(s) of agent ${agent.host_identifier}`,
              details: { uuid: agent.uuid, commandIds: cancelled },
              asset: agentAsset(agent),
            })
          }
          return { id, status: 'done', reason: null, code: null, commandIds: cancelled }
        },
        (id) => ({ ...unknownAgent(id), commandIds: [] }),
      )
    },

    /**
     * updateAgents / fetchAgentsDebugLogs: one command of the type per agent, one still
     * Pending reused (a Delivered one is in the agent's hands: a new request gets a new one).
     */
    async queue(ctx: Context, uuids: string[] | null, type: Extract<CommandType, 'UpdateAgent' | 'FetchDebugLogs'>, by: string) {
      const now = clock()
      return perAgent<CommandItemResult>(
        ctx,
        uuids,
        async (agent, id) => {
          const pending = (await commands.open(agent.id, type)).find((c) => c.status === 'Pending')
          const commandId = pending?.id ?? (await commands.queue(agent.id, type, {}, now, by))
          if (!pending) await agentState.refreshStatus(agent.id)
          await audit.record(ctx, {
            description: pending ? `${type} already pending for agent ${agent.host_identifier} (command ${commandId})` : `Queued ${type} for agent ${agent.host_identifier}`,
            details: { uuid: agent.uuid, type, commandId, reused: Boolean(pending) },
            asset: agentAsset(agent),
          })
          return { id, status: 'done', reason: null, code: null, commandIds: [commandId] }
        },
        (id) => ({ ...unknownAgent(id), commandIds: [] }),
      )
    },

    /** A page of GET peripherals: rows, or the views streamed for a very large page. */
    async peripherals(filter: PeripheralFilter, order: Sort, pageSize: number, offset: number): Promise<Page<PeripheralListRow[]>> {
      if (pageSize > streamedPages.above) {
        const { ids, ...counts } = await peripherals.pageIds(filter, order, pageSize, offset)
        return { ...counts, stream: await peripherals.viewChunks(ids, peripheralView) }
      }
      const { rows, ...counts } = await peripherals.list(filter, order, pageSize, offset)
      return { ...counts, data: rows }
    },

    /**
     * The agents matching the filter, as an export audited with what was asked. `rows(limit)`
     * reads them in order, a page at a time, as the file is written.
     */
    async exportAgents(
      ctx: Context,
      format: ExportFormat,
      filter: AgentFilter,
      order: Sort,
      given: unknown,
    ): Promise<ExportFile<(limit?: number) => Promise<AsyncIterable<AgentRow>>> & { sortBy: string }> {
      const now = clock()
      const ids = await deps.exports.agentIds(filter, order)
      const fileName = `agents-${fileStamp(now)}.${format}`
      const filters = givenFilters(given)
      const sortBy = `${order.field}_${order.direction}`
      await audit.record(ctx, {
        description: `Exported ${ids.length} agent(s) as ${format.toUpperCase()} (${fileName})`,
        details: { format, fileName, records: ids.length, filters: Object.fromEntries(filters), sortBy },
      })
      // The store's own iterable, not one wrapped in another generator: each layer costs
      // every row its own turns of the event loop.
      const rows = (limit?: number) => deps.exports.agents(limit === undefined ? ids : ids.slice(0, limit))
      return { fileName, records: ids.length, filters, sortBy, generatedMs: now, rows }
    },

    /** The peripherals matching the filter aggregated by model, as an export audited with what was asked. */
    async exportModels(ctx: Context, format: ExportFormat, filter: PeripheralFilter, given: unknown): Promise<ExportFile<PeripheralModelRow[]>> {
      const now = clock()
      const models = await deps.exports.peripheralModels(filter)
      const fileName = `peripherals-aggregated-${fileStamp(now)}.${format}`
      const filters = givenFilters(given)
      await audit.record(ctx, {
        description: `Exported ${models.length} peripheral model(s) as ${format.toUpperCase()} (${fileName})`,
        details: { format, fileName, records: models.length, filters: Object.fromEntries(filters) },
      })
      return { fileName, records: models.length, filters, generatedMs: now, rows: models }
    },
  }
}

export type AgentService = ReturnType<typeof agentService>
