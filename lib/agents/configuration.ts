// What operators configure on agents: their mode and the approval of their peripherals
// (agents/configuration, peripherals/command), each in one unit of work, answered per item
// and audited per agent. The agent service (service.ts) gives its state.
import type { components } from '../../generated/openapi.js'
import { invalidField } from '../errors.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, UnitOfWork } from '../platform/ports.js'
import { type Act, type ItemFailure, matchAgent, noItemApplied, pushWhitelist, requestedMode, setMode } from './commands.js'
import type { AgentRow, AgentStateStore, AgentStore, CommandStore, PeripheralStore } from './ports.js'
import { agentAsset } from './views.js'

type Schemas = components['schemas']
type ConfigurationItem = Schemas['AgentPendingConfigurationWrapper']
type ConfigurationResult = Schemas['AgentConfigurationResult']
type PeripheralCommand = Schemas['PeripheralCommandRequest']

const ADMINISTRATOR = 30

/** What configuring reads and writes with (the agent service's). */
export interface ConfigurationState {
  agents: AgentStore
  peripherals: PeripheralStore
  agentState: AgentStateStore
  uow: UnitOfWork
  audit: AuditTrail
  /** The stores commands are queued with (lib/agents/commands.ts). */
  stores: { commands: CommandStore; peripherals: PeripheralStore }
  /** PRIME_PUBLIC_ADDRESS: the console address a configured agent is shown. */
  publicAddress: string | null
  clock: () => number
}

/** Items applied and failed, for the per-item headers (lib/agents/commands.ts itemHeaders). */
export interface PerItem<T> {
  result: T
  succeeded: number
  failures: ItemFailure[]
}

/** Audits the failed items of a request in one record (reasons shortened to keep it whole). */
export async function auditFailures(audit: AuditTrail, ctx: Context, what: string, failures: ItemFailure[], applied: number) {
  if (!failures.length) return
  await audit.record(ctx, {
    description: `${what}: ${failures.length} item(s) failed${applied ? `, ${applied} applied` : ', none applied'}`,
    details: { failed: failures.slice(0, 200).map((f) => ({ ...f, reason: f.reason.slice(0, 200) })), more: Math.max(0, failures.length - 200) },
    outcome: 'Failed',
  })
}

/** agents/configuration: arm or free agents and approve all their present peripherals. `by`: the caller's name, as commands record it. */
export async function configure(s: ConfigurationState, ctx: Context, items: ConfigurationItem[] | null, by: string): Promise<PerItem<ConfigurationResult[]>> {
  const { agents, peripherals, agentState, uow, audit, stores } = s
  if (!Array.isArray(items) || items.length === 0) throw invalidField('body', '(root)', 'must be a non-empty array of agents to configure')
  items.forEach((item, i) => {
    const c = item.agentConfigViewResource
    if (c.isSystemArmed == null && c.approveAll !== true) {
      throw invalidField('body', `${i}/agentConfigViewResource`, 'asks for nothing: give isSystemArmed (ARM or free) or approveAll: true')
    }
  })
  const act: Act = { now: s.clock(), by }
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
        agentConfigViewResource: { isSystemArmed: shown === 'Armed' ? 'ARM' : 'free', isSystemLocked: agent.is_system_locked === 1, centralizedConsoleIP: s.publicAddress, approveAll },
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
    await auditFailures(audit, ctx, 'Agent configuration', failures, results.length)
    return { results, failures }
  })
  // Thrown after the commit, so that the failures' audit record is kept.
  if (!outcome.results.length) throw noItemApplied(outcome.failures, String)
  return { result: outcome.results, succeeded: outcome.results.length, failures: outcome.failures }
}

/** peripherals/command: approve or disapprove models (VID/PID) on agents; answers the uuids of the agents affected. */
export async function commandPeripherals(s: ConfigurationState, ctx: Context, body: PeripheralCommand, by: string): Promise<PerItem<string[]>> {
  const { agents, peripherals, agentState, uow, audit, stores } = s
  const status = /^approve$/i.test(body.opCode) ? 'Approved' : 'Disapproved'
  const act: Act = { now: s.clock(), by }
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
    await auditFailures(audit, ctx, `Peripheral ${status === 'Approved' ? 'approval' : 'disapproval'}`, failures, applied)
    return { uuids: [...affected.values()].map((a) => a.agent.uuid), applied, failures }
  })
  if (!outcome.applied) throw noItemApplied(outcome.failures, (i) => `peripheralsIds/${i}`)
  return { result: outcome.uuids, succeeded: outcome.applied, failures: outcome.failures }
}
