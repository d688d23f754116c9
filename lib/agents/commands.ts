// The rules of the commands operators give agents: naming agents by their identifiers,
// answering per item, and what a new SetMode or UpdatePolicy supersedes. The operations
// themselves are in service.ts.
import { problem } from '../errors.js'
import type { AgentIdentifiers, AgentRow, AgentStore, CommandStore, PeripheralStore } from './ports.js'

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
export async function matchAgent(agents: Pick<AgentStore, 'matching'>, ids: AgentIdentifiers): Promise<{ agent: AgentRow } | { code: FailureCode; reason: string }> {
  if (ids.uuid == null && ids.hostIdentifier == null && ids.ipAddress == null) {
    return { code: 'invalid', reason: 'Names no agent: give uuid, hostIdentifier or ipAddress.' }
  }
  // Held: two requests changing one agent's approvals or mode at once run one after the
  // other, so that the later one's whitelist and pending commands see the earlier's.
  const found = await agents.matching(ids, true)
  if (found.length === 0) return { code: 'not-found', reason: `No agent matches ${describe(ids)}.` }
  if (found.length > 1) return { code: 'ambiguous', reason: `Several agents match ${describe(ids)}; add another identifier.` }
  return { agent: found[0] }
}

/** The per-item headers of agents/configuration and peripherals/command. */
export function itemHeaders(succeeded: number, failures: ItemFailure[]): Record<string, string> {
  const headers: Record<string, string> = { 'x-items-succeeded': String(succeeded), 'x-items-failed': String(failures.length) }
  if (!failures.length) return headers
  // Header values are ASCII: anything else travels as \uXXXX, and the list stays under the declared length.
  const ascii = (v: unknown) => JSON.stringify(v).replace(/[^\x20-\x7e]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'))
  const listed = failures.slice(0, MAX_LISTED_FAILURES).map((f) => ({ index: f.index, code: f.code, reason: f.reason.slice(0, 300) }))
  let text = ascii(listed)
  while (text.length > MAX_FAILURES_HEADER && listed.length > 1) {
    listed.pop()
    text = ascii(listed)
  }
  headers['x-item-failures'] = text
  return headers
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

/** Who acts and when, for what a command records (created_by, the reasons of cancellations). */
export interface Act {
  now: number
  by: string
}

export interface Stores {
  commands: CommandStore
  peripherals: Pick<PeripheralStore, 'whitelist'>
}

/**
 * Queues an UpdatePolicy carrying the agent's whole whitelist; it replaces any older one
 * still Pending (which would carry an outdated list).
 */
export async function pushWhitelist(s: Stores, act: Act, agent: AgentRow): Promise<{ id: number; cancelled: number[] }> {
  const cancelled = await s.commands.cancelPending(agent.id, act.now, `Superseded by a newer UpdatePolicy from ${act.by}.`, 'UpdatePolicy')
  const id = await s.commands.queue(agent.id, 'UpdatePolicy', { approvedPeripherals: await s.peripherals.whitelist(agent.id) }, act.now, act.by)
  return { id, cancelled }
}

/**
 * Asks the agent for a mode. A SetMode still Pending is superseded (cancelled), unless it
 * already asks for this mode; nothing is queued when the agent is, or is being put, in
 * that mode already.
 */
export async function setMode(s: Stores, act: Act, agent: AgentRow, mode: 'Armed' | 'Free'): Promise<{ ids: number[]; cancelled: number[] }> {
  const { commands } = s
  const open = await commands.open(agent.id, 'SetMode')
  const modeOf = (c: { parameters: string }) => (JSON.parse(c.parameters) as { mode?: string }).mode
  const latest = open[0]
  if (latest?.status === 'Pending' && modeOf(latest) === mode) return { ids: [latest.id], cancelled: [] }
  const cancelled = await commands.cancelPending(agent.id, act.now, `Superseded by a newer SetMode (${mode}) from ${act.by}.`, 'SetMode')
  const delivered = open.find((c) => c.status === 'Delivered')
  const heading = delivered ? modeOf(delivered) : agent.operational_status
  if (heading === mode) return { ids: [], cancelled }
  return { ids: [await commands.queue(agent.id, 'SetMode', { mode }, act.now, act.by)], cancelled }
}

export const requestedMode = (v: string | null | undefined): 'Armed' | 'Free' | undefined => (v == null ? undefined : /^arm/i.test(v) ? 'Armed' : 'Free')
