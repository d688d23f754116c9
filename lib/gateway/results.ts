// Command results reported by an agent: each taken only for a command given to it and
// still awaiting one, with the events and mode they bring.
import { unauthenticated } from '../auth.js'
import { problem, type FieldError } from '../errors.js'
import type { Context } from '../platform/context.js'
import { agentAsset } from '../agents/views.js'
import { type AgentRef, hostEvent, modeEvent, unapprovedEvent } from './events.js'
import type { EventInput } from './ports.js'
import { gatewayCommandView } from './views.js'
import { DEBUG_LOGS_KEPT, type GatewayState, MAX_LISTED_REFUSALS, NO_RESULT, type Schemas } from './state.js'

type ItemResult = Schemas['ItemResult']
/** `agentId`: the agent whose credential the call carries. */
export async function reportResults(s: GatewayState, ctx: Context, agentId: number, body: Schemas['GatewayCommandResultsRequest']): Promise<Schemas['ItemResults']> {
  const now = Date.now()
  return s.checkIns.run(async () => {
    const agent = await s.store.agent(agentId)
    if (!agent) throw unauthenticated('The agent no longer exists; enroll again.')
    const ref: AgentRef = agent
    const results: ItemResult[] = []
    const raised: EventInput[] = []
    const refused: FieldError[] = []
    let mode = agent.operational_status
    let changed = false
    let armed = false
    const fail = (i: number, id: string, code: 'not-found' | 'conflict', reason: string) => {
      results.push({ id, status: 'failed', code, reason })
      refused.push({ location: 'body', name: `results/${i}/commandId`, reason: `${code}: ${reason}` })
    }
    for (const [i, r] of body.results.entries()) {
      const id = String(r.commandId)
      const c = await s.store.command(r.commandId)
      // Results are taken only for commands given to this agent and still awaiting one.
      if (!c || c.agent_id !== agentId) {
        fail(i, id, 'not-found', `Command ${id} is unknown to this agent.`)
        continue
      }
      const timedOut = c.status === 'Failed' && c.result_message === NO_RESULT
      if (c.status !== 'Delivered' && !timedOut) {
        const why = c.status === 'Pending' ? 'was never delivered' : c.status === 'Cancelled' ? 'was cancelled' : `was already reported as ${c.status}`
        fail(i, id, 'conflict', `Command ${id} ${why}.`)
        continue
      }
      const output = c.type === 'FetchDebugLogs' && typeof r.output === 'string' ? r.output : null
      await s.store.completeCommand({ id: c.id, status: r.status, now, message: r.message ?? null, hasOutput: output !== null ? 1 : 0 })
      if (output !== null) await s.store.addDebugLog(agentId, c.id, now, output, DEBUG_LOGS_KEPT)
      if (r.status === 'Failed') {
        raised.push(hostEvent('commandFailed', ref, `${c.type} command ${c.id} failed on ${agent.host_identifier}: ${r.message || 'no message'}.`))
      } else if (c.type === 'SetMode') {
        const wanted = gatewayCommandView(c).parameters.mode
        if (wanted && wanted !== mode) {
          raised.push(modeEvent(ref, mode, wanted, c.created_by))
          armed ||= wanted === 'Armed'
          mode = wanted
        }
        await s.store.setMode(agentId, wanted ?? mode, now)
      } else if (c.type === 'UpdatePolicy') {
        await s.store.setConfigured(agentId, now)
      }
      changed = true
      results.push({ id, status: 'done', code: null, reason: null })
    }
    if (!changed) {
      // Nothing taken: a refusal (its repeats are counted, not written, in the audit trail).
      const unknown = refused.every((e) => e.reason.startsWith('not-found'))
      throw problem(unknown ? 'not-found' : 'conflict', unknown ? 'No result is for a command of this agent.' : 'No result is for a command of this agent awaiting its result.', {
        errors: refused.slice(0, MAX_LISTED_REFUSALS),
      })
    }
    await s.agentState.refreshAgent(agentId)
    if (armed && mode === 'Armed') {
      for (const p of await s.store.presentPeripherals(agentId)) if (!p.approved) raised.push(unapprovedEvent(ref, p))
    }
    await s.events.record(now, raised, agentId)
    const failed = results.filter((r) => r.status === 'failed').length
    await s.audit.record(ctx, {
      description: `Agent "${agent.host_identifier}" reported ${body.results.length} command result(s)${failed ? `, ${failed} refused` : ''}`,
      details: { results: body.results.map((r, i) => ({ commandId: r.commandId, status: r.status, message: r.message ?? null, answer: results[i].code ?? 'done' })) },
      user: `agent:${agent.uuid}`,
      asset: agentAsset(agent),
    })
    return { succeeded: results.length - failed, failed, results }
  })
}
