// The ports every feature's services share. Each feature declares its own storage port
// beside its service (lib/<feature>/ports.ts); the SQLite implementations are in db/.
import type { GatewayAgent } from '../gateway/ports.js'
import type { PollerRow } from '../agentless/ports.js'
import type { IntegrationPrincipalRow } from '../integration-tokens/ports.js'
import type { Context } from './context.js'
import type { Maybe } from './maybe.js'
import type { AuditTrailRow } from '../events/ports.js'

export interface SessionPrincipal {
  session_id: string
  revoked_ms: number | null
  user_id: number
  user_name: string
  profile: number
  is_active: number
  tokens_valid_after_ms: number
}

export interface RefreshRow {
  token_hash: string
  session_id: string
  expires_ms: number
  used_ms: number | null
  revoked_ms: number | null
  user_id: number
  is_active: number
}

export interface AuditRecord {
  createdMs: number
  severity: number
  category: string
  user: string | null
  sourceIp: string | null
  description: string
  details: string
  operationId: string | null
  outcome: 'Succeeded' | 'Failed' | 'Refused'
  asset?: AuditAsset
  /** The request that wrote it (null: the service itself). */
  requestId?: string | null
  /** A refusal's kind (actor, operation, outcome, status, reason): its repeats are counted, not written. */
  refusalKey?: string | null
}

export interface AuditAsset {
  key?: string | null
  name?: string | null
  parentId?: string | null
  ipAddress?: string | null
  type?: string
  subType?: string
  detail?: string
  icon?: number
}

/** A stored audit record with every column: the trail's row plus the refusal kind it counts. */
export interface AuditRow extends AuditTrailRow {
  refusal_key: string | null
}

/** The repeats of a refusal within its window, not yet written as their summary record. */
export interface RefusalCount {
  refusal_key: string
  first_id: number
  window_end_ms: number
  repeats: number
  last_ms: number
  source_ips: string
}

/** What a change or refusal leaves in the audit trail (lib/audit.ts writes it). */
export interface AuditEntry {
  description: string
  /** What changed; secrets are masked before it is stored. */
  details?: unknown
  asset?: AuditAsset
  severity?: number
  outcome?: 'Succeeded' | 'Failed' | 'Refused'
  /** The actor, when the request has no principal (a login). */
  user?: string | null
  /**
   * A refusal (outcome Failed or Refused) and why: repeats of the same refusal (actor,
   * operation, outcome, status, reason) within the window are counted, not written.
   */
  refusal?: { status: number; reason: string }
}

/** One transaction: committed when `work` resolves, rolled back when it throws. */
export interface UnitOfWork {
  run<T>(work: () => Promise<T>): Promise<T>
}

/** The audit trail: a record per change or refusal, written in the change's unit of work. */
export interface AuditTrail {
  record(ctx: Context, entry: AuditEntry): Promise<void>
}

/** Where services say what an operator should see in the server log (never in an answer). */
export interface Log {
  warn(details: object, message: string): void
  error(details: object, message: string): void
}

/**
 * What authentication looks up per request, by a credential's SHA-256 (lib/auth.ts). The
 * lookups answer at once where the storage can (SQLite), through a Promise where it cannot.
 */
export interface CredentialStore {
  agentByCredential(hash: string): Maybe<GatewayAgent | undefined>
  /** Whether the credential is one held for an Administrator's approval of a re-enrollment. */
  heldAgentCredential(hash: string): Maybe<boolean>
  pollerByCredential(hash: string): Maybe<PollerRow | undefined>
  integrationToken(hash: string): Maybe<IntegrationPrincipalRow | undefined>
  touchIntegrationToken(id: string, now: number): Maybe<unknown>
  sessionPrincipal(sessionId: string): Maybe<SessionPrincipal | undefined>
  createSession(sessionId: string, userId: number, now: number): Maybe<unknown>
  addRefreshToken(hash: string, sessionId: string, now: number, expiresMs: number): Maybe<unknown>
  refreshToken(hash: string): Maybe<RefreshRow | undefined>
  /** Marks the refresh token used; false when it was used already (a replay). */
  useRefreshToken(hash: string, now: number): Maybe<boolean>
  revokeSession(sessionId: string, reason: string, now: number): Maybe<unknown>
}

/** The audit trail's storage: its records and the counters of repeated refusals (lib/audit.ts). */
export interface AuditStore {
  /** Writes a record in the caller's unit of work (a destination's outbox entries with it); answers its id. */
  insert(r: AuditRecord): Promise<number>
  byId(id: number): Promise<AuditRow | undefined>
  /** The record of the latest first refusal of this kind written after `sinceMs`. */
  firstRefusal(key: string, sinceMs: number): Promise<AuditRow | undefined>
  refusalCount(key: string): Promise<RefusalCount | undefined>
  /** How many reasons of a refusal group (the part of keys before `:`) opened a window after `sinceMs`. */
  refusalReasons(group: string, sinceMs: number): Promise<number>
  /** Counts one repeat of a refusal whose first record is `firstId` (its window ends at `windowEndMs`). */
  countRepeat(key: string, firstId: number, windowEndMs: number, now: number, sourceIps: string): Promise<unknown>
  /** Counters whose window has closed, oldest first. */
  dueRefusals(now: number, limit: number): Promise<RefusalCount[]>
  dropRefusalCount(key: string): Promise<unknown>
  /** False for a record whose transaction rolled back. */
  exists(id: number, createdMs: number, description: string): Promise<boolean>
}
