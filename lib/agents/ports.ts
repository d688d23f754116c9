// The storage the agent and peripheral services need; db/agents.ts, db/peripherals.ts,
// db/commands.ts, db/agent-state.ts, db/gateway.ts and db/exports.ts implement it on SQLite.
//
// Streamed reads (very large list pages, exports) answer an async iterable once: the rows
// are read synchronously inside db/, a chunk or page at a time with other requests served
// between them, so no Promise is made per row.
import type { AgentIdentifiers, AgentRef, AgentRow } from '../../db/agents.js'
import type { CommandParameters, CommandRow, CommandType } from '../../db/commands.js'
import type { PeripheralModelRow } from '../../db/exports.js'
import type { AgentFilter, PeripheralFilter } from '../../db/filters.js'
import type { HeldReEnrollment } from '../../db/gateway.js'
import type { PeripheralListRow } from '../../db/peripherals.js'
import type { Sort } from '../../db/sql.js'

export type { AgentIdentifiers, AgentListRow, AgentRef, AgentRow } from '../../db/agents.js'
export type { CommandRow, CommandType } from '../../db/commands.js'
export type { PeripheralModelRow } from '../../db/exports.js'
export type { HeldReEnrollment } from '../../db/gateway.js'
export type { PeripheralListRow } from '../../db/peripherals.js'
export type { Sort } from '../../db/sql.js'

/** A page's counts: every row, the matching ones. */
export interface Counts {
  total: number
  filtered: number
}

export interface AgentStore {
  byUuid(uuid: string): Promise<AgentRow | undefined>
  /** A page of the list as refs (id, rev, check-in time), kept while the data is unchanged. */
  list(f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { rows: AgentRef[] }>
  /** A page's agents as the JSON array the list answers (kept per row and rev in db/agents.ts). */
  views(refs: readonly AgentRef[]): Promise<string>
  /** A page of the list with its agents as that JSON array, in one call. */
  page(f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { json: string }>
  /** A large page as the ids of its agents in order. */
  pageIds(f: AgentFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { ids: number[] }>
  /** These agents as JSON objects joined by commas, in chunks (a streamed page: read synchronously in db/, a chunk at a time). */
  viewChunks(ids: readonly number[]): Promise<AsyncIterable<string>>
  /** At most two agents whose identifiers equal every one given (case-insensitively). */
  matching(ids: AgentIdentifiers): Promise<AgentRow[]>
  /** Deletes the agent with its peripherals, approvals and commands; answers whether it was there. */
  remove(id: number): Promise<boolean>
}

export interface PeripheralStore {
  list(f: PeripheralFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { rows: PeripheralListRow[] }>
  pageIds(f: PeripheralFilter, sort: Sort, limit: number, offset: number): Promise<Counts & { ids: number[] }>
  /** These peripherals as JSON objects of `view` joined by commas, in chunks (a streamed page, as AgentStore.viewChunks). */
  viewChunks(ids: readonly number[], view: (r: PeripheralListRow) => unknown): Promise<AsyncIterable<string>>
  ofAgent(agentId: number): Promise<PeripheralListRow[]>
  presentModels(agentId: number): Promise<{ vid: string; pid: string }[]>
  hasModel(agentId: number, vid: string, pid: string): Promise<boolean>
  attackToolName(vid: string, pid: string): Promise<string | undefined>
  /** Records a decision on a model for an agent; answers whether it changed anything. */
  setApproval(agentId: number, vid: string, pid: string, status: 'Approved' | 'Disapproved', now: number, by: string): Promise<boolean>
  whitelist(agentId: number): Promise<{ vid: string; pid: string }[]>
}

export interface CommandStore {
  queue(agentId: number, type: CommandType, parameters: CommandParameters, now: number, by: string): Promise<number>
  /** The agent's commands of a type still Pending or Delivered, newest first. */
  open(agentId: number, type: CommandType): Promise<CommandRow[]>
  /** Cancels the agent's Pending commands (of one type, or all); answers their ids. */
  cancelPending(agentId: number, now: number, reason: string, type?: CommandType): Promise<number[]>
  ofAgent(agentId: number): Promise<CommandRow[]>
  latestDebugLogs(agentId: number): Promise<{ created_ms: number; content: string } | undefined>
}

/** The agent's derived state (display status, counters) recomputed from its commands and peripherals. */
export interface AgentStateStore {
  refreshAgent(agentId: number): Promise<void>
  refreshStatus(agentId: number): Promise<void>
}

export interface ReEnrollmentStore {
  heldReEnrollment(agentId: number): Promise<HeldReEnrollment | undefined>
}

export interface ExportStore {
  /** The ids of the agents matching the filter, in the export's order. */
  agentIds(f: AgentFilter, sort: Sort): Promise<number[]>
  /** The agents of `ids` in order, read a page at a time (rows deleted meanwhile are left out). */
  agents(ids: readonly number[]): Promise<AsyncIterable<AgentRow>>
  /** The matching peripherals aggregated by model, most hosts first. */
  peripheralModels(f: PeripheralFilter): Promise<PeripheralModelRow[]>
}
