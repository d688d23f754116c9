// What operators do to agents: name them by their identifiers, change their mode and
// approvals, queue and cancel their commands. Each operation runs in one transaction,
// answers per item and audits every agent it changed (with the agent as the asset).
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { AgentIdentifiers, AgentRow } from '../../db/agents.js'
import type { CommandType } from '../../db/commands.js'
import type { components } from '../../generated/openapi.js'
import { audit } from '../audit.js'
import { problem, invalidField } from '../errors.js'
import { agentAsset, maskMachineId } from './views.js'

type Schemas = components['schemas']
type ConfigurationItem = Schemas['AgentPendingConfigurationWrapper']
type ConfigurationResult = Schemas['AgentConfigurationResult']
type CommandItemResult = Schemas['AgentCommandItemResult']
type ItemResult = Schemas['ItemResult']
type PeripheralCommand = Schemas['PeripheralCommandRequest']

const ADMINISTRATOR = 30
const MAX_LISTED_FAILURES = 20
const MAX_FAILURES_HEADER = 4096

export type FailureCode = 'not-found' | 'ambiguous' | 'not-allowed' | 'invalid'
export interface ItemFailure {
  index: number
  code: FailureCode
  reason: string
}

/** Request items name agents; the answer and the audit name them by these. */
const describe = (ids: AgentIdentifiers) =>
  (['uuid', 'hostIdentifier', 'ipAddress'] as const)
    .filter((k) => ids[k] != null)
    .map((k) => `${k}=${String(ids[k]).slice(0, 100)}`)
    .join(', ')

/** The one agent whose uuid, hostIdentifier and localIpAddress equal every identifier given (case-insensitively). */
export function matchAgent(req: FastifyRequest, ids: AgentIdentifiers): { agent: AgentRow } | { code: FailureCode; reason: string } {
  if (ids.uuid == null && ids.hostIdentifier == null && ids.ipAddress == null) {
    return { code: 'invalid', reason: 'Names no agent: give uuid, hostIdentifier or ipAddress.' }
  }
  const found = req.server.repos.agents.matching(ids)
  if (found.length === 0) return { code: 'not-found', reason: `No agent matches ${describe(ids)}.` }
  if (found.length > 1) return { code: 'ambiguous', reason: `Several agents match ${describe(ids)}; add another identifier.` }
  return { agent: found[0] }
}

/** The per-item headers of agents/configuration and peripherals/command. */
export function itemHeaders(reply: FastifyReply, succeeded: number, failures: ItemFailure[]): void {
  reply.header('x-items-succeeded', String(succeeded)).header('x-items-failed', String(failures.length))
  if (!failures.length) return
  // Header values are ASCII: anything else travels as \uXXXX, and the list stays under the declared length.
  const ascii = (v: unknown) => JSON.stringify(v).replace(/[^\x20-\x7e]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'))
  const listed = failures.slice(0, MAX_LISTED_FAILURES).map((f) => ({ index: f.index, code: f.code, reason: f.reason.slice(0, 300) }))
  let text = ascii(listed)
  while (text.length > MAX_FAILURES_HEADER && listed.length > 1) {
    listed.pop()
    text = ascii(listed)
  }
  reply.header('x-item-failures', text)
}

/** The 400 of a request none of whose items could be applied: one error per item (the first 20). */
export function noItemApplied(failures: ItemFailure[], name: (index: number) => string) {
  const counts = new Map<string, number>()
  for (const f of failures) counts.set(f.code, (counts.get(f.code) ?? 0) + 1)
  const summary = [...counts].map(([code, n]) => `${n} ${code.replace('-', ' ')}`).join(', ')
  const more = failures.length > MAX_LISTED_FAILURES ? ` The first ${MAX_LISTED_FAILURES} are listed.` : ''
  return problem('no-agent-matched', `No item could be applied: ${summary}.${more}`, {
    errors: failures.slice(0, MAX_LISTED_FAILURES).map((f) => ({ location: 'body', name: name(f.index), reason: `${f.code}: ${f.reason}` })),
  })
}

/** Audits the failed items of a request in one record (reasons shortened to keep it whole). */
function auditFailures(req: FastifyRequest, what: string, failures: ItemFailure[], applied: number) {
  if (!failures.length) return
  audit(req, {
    description: `${what}: ${failures.length} item(s) failed${applied ? `, ${applied} applied` : ', none applied'}`,
    details: { failed: failures.slice(0, 200).map((f) => ({ ...f, reason: f.reason.slice(0, 200) })), more: Math.max(0, failures.length - 200) },
    outcome: 'Failed',
  })
}

interface Ctx {
  req: FastifyRequest
  now: number
  by: string
}

const context = (req: FastifyRequest): Ctx => ({ req, now: Date.now(), by: req.principal!.name })

/**
 * Queues an UpdatePolicy carrying the agent's whole whitelist; it replaces any older one
 * still Pending (which would carry an outdated list).
 */
function pushWhitelist(ctx: Ctx, agent: AgentRow): { id: number; cancelled: number[] } {
  const { commands, peripherals } = ctx.req.server.repos
  const cancelled = commands.cancelPending(agent.id, ctx.now, `Superseded by a newer UpdatePolicy from ${ctx.by}.`, 'UpdatePolicy')
  const id = commands.queue(agent.id, 'UpdatePolicy', { approvedPeripherals: peripherals.whitelist(agent.id) }, ctx.now, ctx.by)
  return { id, cancelled }
}

/**
 * Asks the agent for a mode. A SetMode still Pending is superseded (cancelled), unless it
 * already asks for this mode; nothing is queued when the agent is, or is being put, in
 * that mode already.
 */
function setMode(ctx: Ctx, agent: AgentRow, mode: 'Armed' | 'Free'): { ids: number[]; cancelled: number[] } {
  const { commands } = ctx.req.server.repos
  const open = commands.open(agent.id, 'SetMode')
  const modeOf = (c: { parameters: string }) => (JSON.parse(c.parameters) as { mode?: string }).mode
  const latest = open[0]
  if (latest?.status === 'Pending' && modeOf(latest) === mode) return { ids: [latest.id], cancelled: [] }
  const cancelled = commands.cancelPending(agent.id, ctx.now, `Superseded by a newer SetMode (${mode}) from ${ctx.by}.`, 'SetMode')
  const delivered = open.find((c) => c.status === 'Delivered')
  const heading = delivered ? modeOf(delivered) : agent.operational_status
  if (heading === mode) return { ids: [], cancelled }
  return { ids: [commands.queue(agent.id, 'SetMode', { mode }, ctx.now, ctx.by)], cancelled }
}

const requestedMode = (v: string | null | undefined): 'Armed' | 'Free' | undefined => (v == null ? undefined : /^arm/i.test(v) ? 'Armed' : 'Free')

/** agents/configuration: arm or free agents and approve all their present peripherals. */
export function configureAgents(req: FastifyRequest, reply: FastifyReply, items: ConfigurationItem[] | null) {
  if (!Array.isArray(items) || items.length === 0) throw invalidField('body', '(root)', 'must be a non-empty array of agents to configure')
  items.forEach((item, i) => {
    const c = item.agentConfigViewResource
    if (c.isSystemArmed == null && c.approveAll !== true) {
      throw invalidField('body', `${i}/agentConfigViewResource`, 'asks for nothing: give isSystemArmed (ARM or free) or approveAll: true')
    }
  })
  const ctx = context(req)
  const { repos, db, config } = req.server
  const isAdministrator = req.principal!.profile >= ADMINISTRATOR
  const outcome = db.transaction(() => {
    const results: ConfigurationResult[] = []
    const failures: ItemFailure[] = []
    items.forEach((item, index) => {
      const match = matchAgent(req, item)
      if ('code' in match) return failures.push({ index, ...match })
      const agent = match.agent
      const mode = requestedMode(item.agentConfigViewResource.isSystemArmed)
      const approveAll = item.agentConfigViewResource.approveAll === true
      const commandIds: number[] = []
      const cancelled: number[] = []
      const approved: { vid: string; pid: string }[] = []
      if (approveAll) {
        const models = repos.peripherals.presentModels(agent.id)
        const tools = models.filter((m) => repos.peripherals.attackToolName(m.vid, m.pid))
        if (tools.length && !isAdministrator) {
          const list = tools.map((m) => `${m.vid}:${m.pid}`).join(', ')
          return failures.push({
            index,
            code: 'not-allowed',
            reason: `Approving all on ${agent.host_identifier} would approve the known attack tool(s) ${list}, which needs the Administrator profile.`,
          })
        }
        for (const m of models) if (repos.peripherals.setApproval(agent.id, m.vid, m.pid, 'Approved', ctx.now, ctx.by)) approved.push(m)
        // The policy goes first: an agent being armed then blocks nothing just approved.
        if (approved.length) {
          const pushed = pushWhitelist(ctx, agent)
          commandIds.push(pushed.id)
          cancelled.push(...pushed.cancelled)
        }
      }
      if (mode) {
        const set = setMode(ctx, agent, mode)
        commandIds.push(...set.ids)
        cancelled.push(...set.cancelled)
      }
      repos.agentState.refreshAgent(agent.id)
      const shown = mode ?? agent.operational_status
      results.push({
        uuid: agent.uuid,
        hostIdentifier: agent.host_identifier,
        ipAddress: agent.local_ip_address,
        agentConfigViewResource: { isSystemArmed: shown === 'Armed' ? 'ARM' : 'free', isSystemLocked: agent.is_system_locked === 1, centralizedConsoleIP: config.agents.publicAddress, approveAll },
        commandIds,
      })
      const did = [mode ? `mode ${mode}` : null, approveAll ? `approve all (${approved.length} model(s) newly approved)` : null].filter(Boolean).join(' and ')
      audit(req, {
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
    })
    auditFailures(req, 'Agent configuration', failures, results.length)
    return { results, failures }
  })()
  // Thrown after the commit, so that the failures' audit record is kept.
  if (!outcome.results.length) throw noItemApplied(outcome.failures, String)
  itemHeaders(reply, outcome.results.length, outcome.failures)
  return outcome.results
}

/** peripherals/command: approve or disapprove models (VID/PID) on agents; answers the uuids of the agents affected. */
export function commandPeripherals(req: FastifyRequest, reply: FastifyReply, body: PeripheralCommand) {
  const status = /^approve$/i.test(body.opCode) ? 'Approved' : 'Disapproved'
  const ctx = context(req)
  const { repos, db } = req.server
  const isAdministrator = req.principal!.profile >= ADMINISTRATOR
  const outcome = db.transaction(() => {
    const failures: ItemFailure[] = []
    const affected = new Map<number, { agent: AgentRow; models: string[]; changed: string[]; indexes: number[] }>()
    body.peripheralsIds.forEach((item, index) => {
      const match = matchAgent(req, item)
      if ('code' in match) return failures.push({ index, ...match })
      const { agent } = match
      const vid = item.vid.toUpperCase()
      const pid = item.pid.toUpperCase()
      if (!repos.peripherals.hasModel(agent.id, vid, pid)) {
        return failures.push({ index, code: 'not-found', reason: `Agent ${agent.host_identifier} has no peripheral ${vid}:${pid}.` })
      }
      const tool = status === 'Approved' ? repos.peripherals.attackToolName(vid, pid) : undefined
      if (tool && !isAdministrator) {
        return failures.push({ index, code: 'not-allowed', reason: `${vid}:${pid} is a known attack tool (${tool}); approving it needs the Administrator profile.` })
      }
      const entry = affected.get(agent.id) ?? { agent, models: [], changed: [], indexes: [] }
      affected.set(agent.id, entry)
      entry.indexes.push(index)
      entry.models.push(`${vid}:${pid}`)
      if (repos.peripherals.setApproval(agent.id, vid, pid, status, ctx.now, ctx.by)) entry.changed.push(`${vid}:${pid}`)
    })
    for (const { agent, models, changed, indexes } of affected.values()) {
      const pushed = changed.length ? pushWhitelist(ctx, agent) : undefined
      repos.agentState.refreshAgent(agent.id)
      audit(req, {
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
    auditFailures(req, `Peripheral ${status === 'Approved' ? 'approval' : 'disapproval'}`, failures, applied)
    return { uuids: [...affected.values()].map((a) => a.agent.uuid), applied, failures }
  })()
  if (!outcome.applied) throw noItemApplied(outcome.failures, (i) => `peripheralsIds/${i}`)
  itemHeaders(reply, outcome.applied, outcome.failures)
  return outcome.uuids
}

/** Runs `act` on each agent named by uuid in one transaction; unknown uuids fail per item. */
function perAgent<R extends ItemResult>(req: FastifyRequest, uuids: string[] | null, act: (ctx: Ctx, agent: AgentRow, id: string) => R, notFound: (id: string) => R) {
  if (!Array.isArray(uuids) || uuids.length === 0) throw invalidField('body', '(root)', 'must be a non-empty array of agent uuids')
  const ctx = context(req)
  return req.server.db.transaction(() => {
    const results = uuids.map((id) => {
      const agent = req.server.repos.agents.byUuid(id)
      return agent ? act(ctx, agent, id) : notFound(id)
    })
    const failed = results.filter((r) => r.status === 'failed').length
    auditFailures(
      req,
      req.routeOptions.config.op?.operationId ?? 'Agents',
      results.flatMap((r, index) => (r.status === 'failed' ? [{ index, code: r.code as FailureCode, reason: r.reason ?? '' }] : [])),
      results.length - failed,
    )
    return { succeeded: results.length - failed, failed, results }
  })()
}

const unknownAgent = (id: string) => ({ id, status: 'failed' as const, reason: 'No agent with this uuid.', code: 'not-found' as const })

/** deleteAgents: the agent, its peripherals, approvals and commands go; its events and audit records stay. */
export function deleteAgents(req: FastifyRequest, uuids: string[] | null) {
  return perAgent<ItemResult>(
    req,
    uuids,
    (ctx, agent, id) => {
      ctx.req.server.repos.agents.remove(agent.id)
      audit(req, {
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
}

/** deleteAgentsCommands: every Pending command of each agent becomes Cancelled. */
export function cancelAgentsCommands(req: FastifyRequest, uuids: string[] | null) {
  return perAgent<CommandItemResult>(
    req,
    uuids,
    (ctx, agent, id) => {
      const { commands, agentState } = ctx.req.server.repos
      const cancelled = commands.cancelPending(agent.id, ctx.now, `Cancelled by ${ctx.by}.`)
      if (cancelled.length) {
        agentState.refreshAgent(agent.id)
        audit(req, {
          description: `Cancelled ${cancelled.length} pending command(s) of agent ${agent.host_identifier}`,
          details: { uuid: agent.uuid, commandIds: cancelled },
          asset: agentAsset(agent),
        })
      }
      return { id, status: 'done', reason: null, code: null, commandIds: cancelled }
    },
    (id) => ({ ...unknownAgent(id), commandIds: [] }),
  )
}

/**
 * updateAgents / fetchAgentsDebugLogs: one command of the type per agent, one still
 * Pending reused (a Delivered one is in the agent's hands: a new request gets a new one).
 */
export function queueForAgents(req: FastifyRequest, uuids: string[] | null, type: Extract<CommandType, 'UpdateAgent' | 'FetchDebugLogs'>) {
  return perAgent<CommandItemResult>(
    req,
    uuids,
    (ctx, agent, id) => {
      const { commands, agentState } = ctx.req.server.repos
      const pending = commands.open(agent.id, type).find((c) => c.status === 'Pending')
      const commandId = pending?.id ?? commands.queue(agent.id, type, {}, ctx.now, ctx.by)
      if (!pending) agentState.refreshStatus(agent.id)
      audit(req, {
        description: pending ? `${type} already pending for agent ${agent.host_identifier} (command ${commandId})` : `Queued ${type} for agent ${agent.host_identifier}`,
        details: { uuid: agent.uuid, type, commandId, reused: Boolean(pending) },
        asset: agentAsset(agent),
      })
      return { id, status: 'done', reason: null, code: null, commandIds: [commandId] }
    },
    (id) => ({ ...unknownAgent(id), commandIds: [] }),
  )
}
