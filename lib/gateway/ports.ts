// The storage the gateway needs; db/gateway.ts, db/events.ts and db/agent-state.ts implement
// it on SQLite. Each check-in is a few calls (its peripherals are written in one).
import type { EventBatch, EventInput } from '../../db/events.js'
import type { GatewayRepo, PeripheralsWritten } from '../../db/gateway.js'
import type { Async } from '../../db/unit-of-work.js'

export type {
  AgentRow,
  AgentState,
  CommandRow,
  GatewayAgent,
  HeldReEnrollment,
  KnownPeripheral,
  OverdueCommand,
  PeripheralChanges,
  PeripheralsWritten,
  PresentPeripheral,
  ReportedPeripheral,
  StoredPeripheral,
  SweptAgent,
} from '../../db/gateway.js'
export type { EventBatch, EventInput } from '../../db/events.js'

/** Agents, their peripherals, commands, errors, held re-enrollments and license seats. */
export type GatewayStore = Async<Omit<GatewayRepo, 'byCredential'>>

/** Where the gateway records the events it raises (with their outbox, counters and notifications). */
export interface EventRecorder {
  record(createdMs: number, events: EventInput[], agentId?: number): Promise<unknown>
  /** Several callers' events in one go (one statement per 64 rows, one text update, one risk pass). */
  recordMany(items: EventBatch[]): Promise<unknown>
}

/** The derived per-agent state the lists read (status, counts, latest event). */
export interface AgentStatus {
  refreshAgent(agentId: number): Promise<void>
  /** refreshAgent for several agents at once. */
  refreshAgents(agentIds: number[]): Promise<void>
  /** refreshAgents after check-ins, over what they changed (the peripherals' writes, the agents whose mode changed). */
  refreshCheckIns(agentIds: number[], touched: PeripheralsWritten, modeChanged: number[]): Promise<void>
  refreshStatus(agentId: number): Promise<void>
}
