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
import { type Act, type FailureCode, type ItemFailure, matchAgent, noItemApplied, pushWhitelist, requestedMode, setMode } from './commands.js'
import type { AgentFilter, PeripheralFilter } from './filter.js'
import type { AgentRow, AgentStateStore, AgentStore, CommandStore, CommandType, ExportStore, PeripheralListRow, PeripheralModelRow, PeripheralStore, ReEnrollmentStore, Sort } from './ports.js'
import { type AgentDetails, agentAsset, maskMachineId } from './views.js'

type Schemas = components['schemas']
type ConfigurationItem = Schemas['AgentPendingConfigurationWrapper']
type ConfigurationResult = Schemas['AgentConfigurationResult']
type CommandItemResult = Schemas['AgentCommandItemResult']
type ItemResult = Schemas['ItemResult']
type PeripheralCommand = Schemas['PeripheralCommandRequest']

const ADMINISTRATOR = 30

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
export type Page<T> = { total: number; filtered: number } & ({ data: T } | { stream: AsyncIterable<string> })

/** Items applied and failed, for the per-item headers (lib/agents/commands.ts itemHeaders). */
export interface PerItem<T> {
  result: T
  succeeded: number
  failures: ItemFailure[]
}

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

  /** Audits the failed items of a request in one record (reasons shortened to keep it whole). */
  async function auditFailures(ctx: Context, what: string, failures: ItemFailure[], applied: number) {
    if (!failures.length) return
    await audit.record(ctx, {
      description: `${what}: ${failures.length} item(s) failed${applied ? `, ${applied} applied` : ', none applied'}`,
      details: { failed: failures.slice(0, 200).map((f) => ({ ...f, reason: f.reason.slice(0, 200) })), more: Math.max(0, failures.length - 200) },
      outcome: 'Failed',
    })
  }

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
        ctx,
        ctx.operation?.operationId ?? 'Agents',
        results.flatMap((r, index) => (r.status === 'failed' ? [{ index, code: r.code as FailureCode, reason: r.reason ?? '' }] : [])),
        results.length - failed,
      )
      return { succeeded: results.length - failed, failed, results }
    })
  }

  return {
    /** A page of GET agents: the agents' JSON as kept per row, or streamed for a very large page. */
    async list(filter: AgentFilter, order: Sort, pageSize: number, offset: number): Promise<Page<string>> {
      if (pageSize > streamedPages.above) {
        const { total, filtered, ids } = await agents.pageIds(filter, order, pageSize, offset)
        return { total, filtered, stream: await agents.viewChunks(ids) }
      }
      const { total, filtered, json } = await agents.page(filter, order, pageSize, offset)
      return { total, filtered, data: json }
    },

    /** The agent with its held re-enrollment, peripherals and commands. */
    async details(uuid: string): Promise<AgentDetails> {
      const agent = await agents.byUuid(uuid)
      if (!agent) throw problem('not-found', `No agent with uuid ${uuid}.`)
      return {
        agent,
        held: await deps.reEnrollments.heldReEnrollment(agent.id),
        peripherals: await peripherals.ofAgent(agent.id),
        commands: await commands.ofAgent(agent.id),
      }
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
    async configure(ctx: Context, items: ConfigurationItem[] | null, by: string): Promise<PerItem<ConfigurationResult[]>> {
      if (!Array.isArray(items) || items.length === 0) throw invalidField('body', '(root)', 'must be a non-empty array of agents to configure')
      items.forEach((item, i) => {
        const c = item.agentConfigViewResource
        if (c.isSystemArmed == null && c.approveAll !== true) {
          throw invalidField('body', `${i}/agentConfigViewResource`, 'asks for nothing: give isSystemArmed (ARM or free) or approveAll: true')
        }
      })
      const act: Act = { now: clock(), by }
      const isAdministrator = (ctx.profile ?? 0) >= ADMINISTRATOR
      const outcome = await uow.run(async () => {
        const results: ConfigurationResult[] = []
        const failures: ItemFailure[] = []
        for (const [index, item] of items.entries()) {
          const match = await matchAgent(agents, item)
          if ('code' in match) {
            failures.push({ index, ...match })
            continue
          }
          const agent = match.agent
          const mode = requestedMode(item.agentConfigViewResource.isSystemArmed)
          const approveAll = item.agentConfigViewResource.approveAll === true
          const commandIds: number[] = []
          const cancelled: number[] = []
          const approved: { vid: string; pid: string }[] = []
          if (approveAll) {
            const models = await peripherals.presentModels(agent.id)
            const tools: typeof models = []
            for (const m of models) if (await peripherals.attackToolName(m.vid, m.pid)) tools.push(m)
            if (tools.length && !isAdministrator) {
              const list = tools.map((m) => `${m.vid}:${m.pid}`).join(', ')
              failures.push({
                index,
                code: 'not-allowed',
                reason: `Approving all on ${agent.host_identifier} would approve the known attack tool(s) ${list}, which needs the Administrator profile.`,
              })
              continue
            }
            for (const m of models) if (await peripherals.setApproval(agent.id, m.vid, m.pid, 'Approved', act.now, act.by)) approved.push(m)
            // The policy goes first: an agent being armed then blocks nothing just approved.
            if (approved.length) {
              const pushed = await pushWhitelist(stores, act, agent)
              commandIds.push(pushed.id)
              cancelled.push(...pushed.cancelled)
            }
          }
          if (mode) {
            const set = await setMode(stores, act, agent, mode)
            commandIds.push(...set.ids)
            cancelled.push(...set.cancelled)
          }
          await agentState.refreshAgent(agent.id)
          const shown = mode ?? agent.operational_status
          results.push({
            uuid: agent.uuid,
            hostIdentifier: agent.host_identifier,
            ipAddress: agent.local_ip_address,
            agentConfigViewResource: { isSystemArmed: shown === 'Armed' ? 'ARM' : 'free', isSystemLocked: agent.is_system_locked === 1, centralizedConsoleIP: deps.publicAddress, approveAll },
            commandIds,
          })
          const did = [mode ? `mode ${mode}` : null, approveAll ? `approve all (${approved.length} model(s) newly approved)` : null].filter(Boolean).join(' and ')
          await audit.record(ctx, {
            description: `Configured agent ${agent.host_identifier}: ${did}`,
            details: {
              index,
              request: { uuid: item.uuid ?? null, hostIdentifier: item.hostIdentifier ?? null, ipAddress: item.ipAddress ?? null },
              mode: mode ?? null,
              approveAll,
              approved,
              commandIds,
              cancelledCommandIds: cancelled,
            },
            asset: agentAsset(agent),
          })
        }
        await auditFailures(ctx, 'Agent configuration', failures, results.length)
        return { results, failures }
      })
      // Thrown after the commit, so that the failures' audit record is kept.
      if (!outcome.results.length) throw noItemApplied(outcome.failures, String)
      return { result: outcome.results, succeeded: outcome.results.length, failures: outcome.failures }
    },

    /** peripherals/command: approve or disapprove models (VID/PID) on agents; answers the uuids of the agents affected. */
    async commandPeripherals(ctx: Context, body: PeripheralCommand, by: string): Promise<PerItem<string[]>> {
      const status = /^approve$/i.test(body.opCode) ? 'Approved' : 'Disapproved'
      const act: Act = { now: clock(), by }
      const isAdministrator = (ctx.profile ?? 0) >= ADMINISTRATOR
      const outcome = await uow.run(async () => {
        const failures: ItemFailure[] = []
        const affected = new Map<number, { agent: AgentRow; models: string[]; changed: string[]; indexes: number[] }>()
        for (const [index, item] of body.peripheralsIds.entries()) {
          const match = await matchAgent(agents, item)
          if ('code' in match) {
            failures.push({ index, ...match })
            continue
          }
          const { agent } = match
          const vid = item.vid.toUpperCase()
          const pid = item.pid.toUpperCase()
          if (!(await peripherals.hasModel(agent.id, vid, pid))) {
            failures.push({ index, code: 'not-found', reason: `Agent ${agent.host_identifier} has no peripheral ${vid}:${pid}.` })
            continue
          }
          const tool = status === 'Approved' ? await peripherals.attackToolName(vid, pid) : undefined
          if (tool && !isAdministrator) {
            failures.push({ index, code: 'not-allowed', reason: `${vid}:${pid} is a known attack tool (${tool}); approving it needs the Administrator profile.` })
            continue
          }
          const entry = affected.get(agent.id) ?? { agent, models: [], changed: [], indexes: [] }
          affected.set(agent.id, entry)
          entry.indexes.push(index)
          entry.models.push(`${vid}:${pid}`)
          if (await peripherals.setApproval(agent.id, vid, pid, status, act.now, act.by)) entry.changed.push(`${vid}:${pid}`)
        }
        for (const { agent, models, changed, indexes } of affected.values()) {
          const pushed = changed.length ? await pushWhitelist(stores, act, agent) : undefined
          await agentState.refreshAgent(agent.id)
          await audit.record(ctx, {
            description: `${status === 'Approved' ? 'Approved' : 'Disapproved'} ${models.join(', ')} on agent ${agent.host_identifier}`,
            details: {
              opCode: status === 'Approved' ? 'APPROVE' : 'DISAPPROVE',
              indexes,
              models,
              changed,
              unchanged: models.filter((m) => !changed.includes(m)),
              commandId: pushed?.id ?? null,
              cancelledCommandIds: pushed?.cancelled ?? [],
            },
            asset: agentAsset(agent),
          })
        }
        const applied = [...affected.values()].reduce((n, a) => n + a.indexes.length, 0)
        await auditFailures(ctx, `Peripheral ${status === 'Approved' ? 'approval' : 'disapproval'}`, failures, applied)
        return { uuids: [...affected.values()].map((a) => a.agent.uuid), applied, failures }
      })
      if (!outcome.applied) throw noItemApplied(outcome.failures, (i) => `peripheralsIds/${i}`)
      return { result: outcome.uuids, succeeded: outcome.applied, failures: outcome.failures }
    },

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
        const { total, filtered, ids } = await peripherals.pageIds(filter, order, pageSize, offset)
        return { total, filtered, stream: await peripherals.viewChunks(ids, peripheralView) }
      }
      const { total, filtered, rows } = await peripherals.list(filter, order, pageSize, offset)
      return { total, filtered, data: rows }
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
