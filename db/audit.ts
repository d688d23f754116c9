import type { DB } from './index.js'
import { eventQueue } from './alarm-queue.js'
import type { AuditRecord, AuditRow, RefusalCount } from '../lib/platform/ports.js'

/**
 * A record's column values, in the order of both backends' INSERT (created_ms ... refusal_key),
 * with the defaults of an absent asset.
 */
export function auditColumns(r: AuditRecord): unknown[] {
  const a = r.asset ?? {}
  return [
    r.createdMs,
    r.severity,
    r.category,
    r.user ?? null,
    r.sourceIp ?? null,
    r.description,
    r.details,
    r.operationId ?? null,
    r.outcome,
    a.key ?? null,
    a.name ?? null,
    a.parentId ?? null,
    a.ipAddress ?? null,
    a.type ?? 'Unknown',
    a.subType ?? 'None',
    a.detail ?? 'Unknown',
    a.icon ?? -1,
    r.requestId ?? null,
    r.refusalKey ?? null,
  ]
}

export function auditRepo(db: DB) {
  // A destination taking events and audit records gets them in the order they were stored.
  const queue = eventQueue(db)
  // Positional parameters: binding nineteen by name cost a check-in's audit record about as
  // much again as the insert.
  const insert = db.prepare<unknown[]>(
    `INSERT INTO audit_trail (created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome,
       asset_key, asset_name, asset_parent_id, asset_ip, asset_type, asset_sub_type, asset_detail, asset_icon, request_id, refusal_key)
     VALUES (${Array(19).fill('?').join(', ')})`,
  )
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const firstRefusal = db.prepare<[string, number], AuditRow>('SELECT * FROM audit_trail INDEXED BY audit_trail_refusals WHERE refusal_key = ? AND created_ms > ? ORDER BY created_ms DESC LIMIT 1')
  const count = db.prepare<[string], RefusalCount>('SELECT * FROM audit_refusal_counts WHERE refusal_key = ?')
  const addCount = db.prepare<[string, number, number, number, string]>(
    'INSERT INTO audit_refusal_counts (refusal_key, first_id, window_end_ms, repeats, last_ms, source_ips) VALUES (?, ?, ?, 1, ?, ?)',
  )
  const repeat = db.prepare<[number, string, string]>('UPDATE audit_refusal_counts SET repeats = repeats + 1, last_ms = max(last_ms, ?), source_ips = ? WHERE refusal_key = ?')
  const due = db.prepare<[number, number], RefusalCount>('SELECT * FROM audit_refusal_counts WHERE window_end_ms <= ? ORDER BY window_end_ms LIMIT ?')
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const reasons = db
    .prepare<[string, string, number], number>('SELECT count(DISTINCT refusal_key) FROM audit_trail INDEXED BY audit_trail_refusals WHERE refusal_key > ? AND refusal_key < ? AND created_ms > ?')
    .pluck()
  const dropCount = db.prepare<[string]>('DELETE FROM audit_refusal_counts WHERE refusal_key = ?')
  const byId = db.prepare<[number], AuditRow>('SELECT * FROM audit_trail WHERE id = ?')
  const latest = db.prepare<[number], AuditRow>('SELECT * FROM audit_trail ORDER BY id DESC LIMIT ?')
  const exists = db.prepare<[number, number, string], number>('SELECT 1 FROM audit_trail WHERE id = ? AND created_ms = ? AND description = ?').pluck()
  return {
    insert(r: AuditRecord): number {
      queue.before('audit')
      return Number(insert.run(...auditColumns(r)).lastInsertRowid)
    },
    latest: (n: number) => latest.all(n),
    byId: (id: number) => byId.get(id),
    /** The record of the latest first refusal of this kind written after `sinceMs`. */
    firstRefusal: (key: string, sinceMs: number) => firstRefusal.get(key, sinceMs),
    refusalCount: (key: string) => count.get(key),
    /** How many reasons of a refusal group (the part of keys before `:`) opened a window after `sinceMs`. */
    refusalReasons: (group: string, sinceMs: number) => reasons.get(`${group}:`, `${group};`, sinceMs) ?? 0,
    /** Counts one repeat of a refusal whose first record is `firstId` (its window ends at `windowEndMs`). */
    countRepeat(key: string, firstId: number, windowEndMs: number, now: number, sourceIps: string) {
      if (repeat.run(now, sourceIps, key).changes === 0) addCount.run(key, firstId, windowEndMs, now, sourceIps)
    },
    /** Counters whose window has closed, oldest first. */
    dueRefusals: (now: number, limit: number) => due.all(now, limit),
    dropRefusalCount: (key: string) => dropCount.run(key),
    /** False for a record whose transaction rolled back. */
    exists: (id: number, createdMs: number, description: string) => exists.get(id, createdMs, description) !== undefined,
  }
}
export type AuditRepo = ReturnType<typeof auditRepo>
