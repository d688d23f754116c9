// The ports every feature's services share. Each feature declares its own storage port
// beside its service (lib/<feature>/ports.ts); the SQLite implementations are in db/.
import type { AuditEntry } from '../audit.js'
import type { Context } from './context.js'

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
