// The agent gateway's state, made once with the gateway (lib/gateway/service.ts) and passed
// to its modules (enrollment, check-ins, their comparison, command results) explicitly: the
// settings and stores it was given, its limits, and what it holds in memory between calls.
import type { components } from '../../generated/openapi.js'
import type { Config } from '../config.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, Log, UnitOfWork } from '../platform/ports.js'
import { iso } from '../time.js'
import { gatewayLimits } from './limits.js'
import type { AgentStatus, EventRecorder, GatewayStore } from './ports.js'
import { gatewayCommandView } from './views.js'

export type Schemas = components['schemas']
export type CheckIn = Schemas['GatewayCheckInRequest']
export type Answer = Schemas['GatewayCheckInResponse']

export const MAX_COMMANDS = 50
export const MORE_COMMANDS_CHECK_IN_SECONDS = 5
export const MAX_PERIPHERALS_PER_AGENT = 2048
export const DEBUG_LOGS_KEPT = 5
export const HEARTBEAT_FLUSH_MS = 1000
export const NO_RESULT = 'No result reported'
export const MAX_LISTED_REFUSALS = 20
/** Reported errors stored per agent per UTC day; more are answered but not stored. */
export const MAX_ERRORS_PER_AGENT_PER_DAY = 1000

export interface GatewayDeps {
  store: GatewayStore
  events: EventRecorder
  agentState: AgentStatus
  uow: UnitOfWork
  /** The unit of work of check-ins and command results (a shared commit: PRIME_GROUP_COMMIT); `uow` without it. */
  checkIns?: UnitOfWork
  /**
   * Check-ins that arrive in the same turn of the event loop are compared and written together,
   * in one transaction of `uow` with a few statements for all of them (PRIME_GROUP_COMMIT).
   */
  batchCheckIns?: boolean
  /**
   * How long one batch may hold the event loop (ms), where the backend's statements run on it
   * (SQLite); undefined: batches of BATCH_CHECK_INS whatever they cost (a database server).
   */
  batchBudgetMs?: number
  audit: AuditTrail
  log: Log
  settings: Pick<Config, 'license' | 'rateLimitWindowMs'> & {
    agents: Pick<Config['agents'], 'enrollmentSecret' | 'checkInSeconds' | 'minCheckInSeconds' | 'enrollPerMinutePerAddress' | 'enrollPerMinute' | 'resultBytesPerDay'>
    /** Each agent's requests per rate-limit window. */
    agentRequests: number
  }
}

/** A check-in's answer, and whether it was routine (unchanged, nothing to hand over: logged in the summary only). */
export interface CheckInAnswer {
  answer: Schemas['GatewayCheckInResponse']
  routine: boolean
}

/** A check-in due for the full comparison. */
export interface Comparison {
  ctx: Context
  agentId: number
  body: CheckIn
  localIp: string
  digest: string
  now: number
  /** Its agent's check-in time held in memory, if any (not written yet). */
  heldCheckInMs: number | undefined
}

/** Its answer, or its own error; ALONE: it is compared again by itself. */
export type Outcome = { ok: true; answer: Answer } | { ok: false; err: unknown }
export const ALONE = Symbol('alone')

/** Check-ins compared and written together at most (batchCheckIns). */
export const BATCH_CHECK_INS = 64
/** The pace a first batch assumes (ms per check-in): an unchanged check-in's, about. */
const FIRST_MS_PER_CHECK_IN = 0.3

export interface GatewayState {
  store: GatewayStore
  events: EventRecorder
  agentState: AgentStatus
  uow: UnitOfWork
  /** The unit of work of check-ins and command results (a shared commit: PRIME_GROUP_COMMIT); `uow` without it. */
  checkIns: UnitOfWork
  /** Check-ins of the same turn compared and written together (GatewayDeps.batchCheckIns). */
  batchCheckIns: boolean
  batchBudgetMs: number | undefined
  /**
   * What a batched check-in took lately (ms, moving averages): comparing it, and its share of
   * the batch's COMMIT (SQLite writes the search indexes' pending terms then: 20-30 ms for a
   * batch of first check-ins at 100,000 agents). The next batch's size is the budget at both.
   */
  batchPace: { msPerCheckIn: number; commitMsPerCheckIn: number }
  audit: AuditTrail
  log: Log
  config: GatewayDeps['settings']['agents']
  license: GatewayDeps['settings']['license']
  limits: ReturnType<typeof gatewayLimits>
  /** Errors stored for each agent on the current UTC day. */
  errorsStored: Map<number, { day: number; count: number }>
  /** Unchanged check-ins' times, written once a second (a lost one on a crash is harmless). */
  heartbeats: Map<number, number>
  flushTimer: NodeJS.Timeout | undefined
  /** Settings that change what a check-in means are part of its digest. */
  digestSalt: string
  /** Check-ins waiting for the next batch (batchCheckIns), in arrival order. */
  waiting: { item: Comparison; resolve: (a: Answer) => void; reject: (err: unknown) => void }[]
  batchScheduled: boolean
  /** Agents with a check-in in a batch not yet answered: their next one waits, so check-ins of an agent commit in order. */
  inBatch: Set<number>
}

export function gatewayState(deps: GatewayDeps): GatewayState {
  const { store, events, agentState, uow, audit, log, settings } = deps
  const { agents: config, license } = settings
  const limits = gatewayLimits({
    enrollPerMinutePerAddress: config.enrollPerMinutePerAddress,
    enrollPerMinute: config.enrollPerMinute,
    agentRequests: settings.agentRequests,
    windowMs: settings.rateLimitWindowMs,
    resultBytesPerDay: config.resultBytesPerDay,
    minCheckInSeconds: config.minCheckInSeconds,
  })
  return {
    store,
    events,
    agentState,
    uow,
    checkIns: deps.checkIns ?? uow,
    batchCheckIns: deps.batchCheckIns ?? false,
    batchBudgetMs: deps.batchBudgetMs,
    batchPace: { msPerCheckIn: FIRST_MS_PER_CHECK_IN, commitMsPerCheckIn: 0 },
    audit,
    log,
    config,
    license,
    limits,
    errorsStored: new Map(),
    heartbeats: new Map(),
    flushTimer: undefined,
    digestSalt: JSON.stringify([license.accountId, config.checkInSeconds]),
    waiting: [],
    batchScheduled: false,
    inBatch: new Set(),
  }
}

export async function seatFree(s: GatewayState): Promise<boolean> {
  return (await s.store.activatedCount()) < s.license.seats
}

/** Hands the oldest pending commands over; call inside a unit of work. */
export async function deliver(s: GatewayState, agentId: number, now: number) {
  const { commands, more } = await s.store.deliverPending(agentId, MAX_COMMANDS, now)
  return { commands: commands.map(gatewayCommandView), more }
}

export function answer(s: GatewayState, uuid: string, now: number, d: Awaited<ReturnType<typeof deliver>>): Schemas['GatewayCheckInResponse'] {
  return {
    uuid,
    serverTime: iso(now),
    nextCheckInSeconds: d.more ? MORE_COMMANDS_CHECK_IN_SECONDS : s.config.checkInSeconds,
    moreCommands: d.more,
    commands: d.commands,
  }
}
