import type { DB } from './index.js'

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

export interface AuditRow {
  id: number
  created_ms: number
  severity: number
  category: string
  user_name: string | null
  source_ip: string | null
  description: string
  details: string
  operation_id: string | null
  outcome: string
  asset_key: string | null
  asset_name: string | null
  asset_parent_id: string | null
  asset_ip: string | null
  asset_type: string
  asset_sub_type: string
  asset_detail: string
  asset_icon: number
  request_id: string | null
}

export function auditRepo(db: DB) {
  const insert = db.prepare(
    `INSERT INTO audit_trail (created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome,
       asset_key, asset_name, asset_parent_id, asset_ip, asset_type, asset_sub_type, asset_detail, asset_icon, request_id)
     VALUES (@createdMs, @severity, @category, @user, @sourceIp, @description, @details, @operationId, @outcome,
       @key, @name, @parentId, @ipAddress, @type, @subType, @detail, @icon, @requestId)`,
  )
  const latest = db.prepare<[number], AuditRow>('SELECT * FROM audit_trail ORDER BY id DESC LIMIT ?')
  const exists = db.prepare<[number, number, string], number>('SELECT 1 FROM audit_trail WHERE id = ? AND created_ms = ? AND description = ?').pluck()
  return {
    insert(r: AuditRecord): number {
      const a = r.asset ?? {}
      return Number(
        insert.run({
          ...r,
          key: a.key ?? null,
          name: a.name ?? null,
          parentId: a.parentId ?? null,
          ipAddress: a.ipAddress ?? null,
          type: a.type ?? 'Unknown',
          subType: a.subType ?? 'None',
          detail: a.detail ?? 'Unknown',
          icon: a.icon ?? -1,
          requestId: r.requestId ?? null,
          asset: undefined,
        }).lastInsertRowid,
      )
    },
    latest: (n: number) => latest.all(n),
    /** False for a record whose transaction rolled back. */
    exists: (id: number, createdMs: number, description: string) => exists.get(id, createdMs, description) !== undefined,
  }
}
export type AuditRepo = ReturnType<typeof auditRepo>
