// Reports on PostgreSQL: definitions, runs (the queue, their e-mail), the runs' files (in
// the database, so that any node serves them), and the reads a report makes: aggregates
// over agents and peripherals, the events and audit records of a period. The same answers
// as db/reports.ts; the aggregates are one statement each (PostgreSQL runs them on a
// connection of their own, so no request waits behind them), the long reads are pages.
// Several processes may run reports at once: a run is started by one (a conditional
// update), which holds a lease on it (table `leases`, name `report-run:<id>`) while it runs;
// a run whose lease lapsed is one whose process is gone, and any process fails it.
import crypto from 'node:crypto'
import type { ReportFileStore, ReportSources, ReportStore, RunLeases } from '../../lib/reports/ports.js'
import type { AgentRow } from '../agents.js'
import { VIEW_COLUMNS } from '../agents.js'
import type { EventRow } from '../event-rows.js'
import type { AgentFilter, PeripheralFilter } from '../filters.js'
import type { PeripheralListRow } from '../peripherals.js'
import type { AgentTotals, AuditDigestRow, AuditFilter, DigestTotals, EventFilter, PeripheralExtra, PeripheralTotals, ReportChanges, ReportInsert, ReportRow, RunRow } from '../reports.js'
import { nameKey } from '../reports.js'
import { contains, severityNames } from '../sql.js'
import type { Postgres } from './connection.js'

/** Rows per page of a streamed read. */
const PAGE_ROWS = 1000
/** Agents per page of a streamed agent or peripheral read. */
const AGENT_PAGE = 500
/** A stored file's parts are at most this long. */
export const FILE_PART_BYTES = 1024 * 1024
/** How long a process's lease on a run lasts unless renewed (the scheduler renews it every 10 seconds). */
export const RUN_LEASE_MS = 60_000
const RUN_LEASE = 'report-run:'

/** Binds values as `$1, $2…` while a statement is put together. */
export class Params {
  readonly values: unknown[] = []
  constructor(first: unknown[] = []) {
    this.values.push(...first)
  }
  add(value: unknown): string {
    this.values.push(value)
    return `$${this.values.length}`
  }
}

/**
 * The agent and peripheral filters as PostgreSQL conditions: over `agents a` and over
 * `peripherals p`. The agents' part may give its own (with its search indexes); these are
 * plain conditions, "contains" as ILIKE (served by pg_trgm indexes where they exist).
 */
export interface PgFilterSql {
  agents(f: AgentFilter, p: Params, alias?: string): string
  peripherals(f: PeripheralFilter, p: Params): string
}

/** "Contains" on any of the columns (NULL columns match nothing). */
const anyContains = (columns: string[], term: string, p: Params) => {
  const pattern = p.add(contains(term))
  return `(${columns.map((c) => `${c} ILIKE ${pattern}`).join(' OR ')})`
}

/** The fields GlobalSearch looks in over agents (db/filters.ts: the texts in memory and agents_fts). */
const AGENT_GLOBAL = ['host_identifier', 'os_version', 'pc_model', 'service_version', 'license_account_name', 'latest_event_text', 'hashtags', 'uuid', 'ip_addresses', 'nics_text']

export const plainFilterSql: PgFilterSql = {
  agents(f, p, a = 'a') {
    const parts: string[] = []
    const text = (columns: string[], term: string | undefined) => {
      if (term !== undefined) parts.push(anyContains(columns, term, p))
    }
    text([`${a}.uuid`], f.uuid)
    text([`${a}.host_identifier`], f.hostIdentifier)
    text([`${a}.local_ip_address`, `${a}.ip_addresses`], f.ipAddress)
    text([`${a}.service_version`], f.version)
    text([`${a}.os_version`], f.osVersion)
    text([`${a}.hashtags`], f.hashtags)
    text(
      AGENT_GLOBAL.map((c) => `${a}.${c}`),
      f.globalSearch,
    )
    const list = (column: string, values: readonly string[] | undefined) => {
      if (values) parts.push(`${a}.${column} = ANY(${p.add(values)}::text[])`)
    }
    list('connection_status', f.connectionStatus)
    list('operational_status', f.operationalStatus)
    list('display_status', f.displayStatus)
    list('license_status', f.licenseStatus)
    list('running_mode', f.runningMode)
    const flag = (column: string, value: boolean | undefined) => {
      if (value !== undefined) parts.push(`${a}.${column} = ${value ? 1 : 0}`)
    }
    flag('vulnerable_or_wlv', f.containsVulnerablePeripheralOrWLV)
    flag('has_unapproved', f.hasUnapprovedPeripherals)
    flag('has_vulnerable', f.hasVulnerablePeripherals)
    flag('has_attack_tool', f.hasKnownAttackTools)
    const range = (column: string, r: AgentFilter['lastUpdated']) => {
      if (!r) return
      parts.push(`${a}.${column} >= ${p.add(r.from)}`)
      if (r.to !== null) parts.push(`${a}.${column} < ${p.add(r.to)}`)
    }
    range('last_configured_ms', f.lastConfiguration)
    range('last_updated_ms', f.lastUpdated)
    range('expiration_ms', f.expirationDate)
    if (f.severity !== undefined) parts.push(`${a}.severity = ${p.add(f.severity)}`)
    return parts.length ? parts.join(' AND ') : 'true'
  },

  peripherals(f, p) {
    const parts: string[] = []
    const ofAgents: string[] = []
    if (f.hostIdentifier !== undefined) ofAgents.push(anyContains(['a2.host_identifier'], f.hostIdentifier, p))
    if (f.ipAddress !== undefined) ofAgents.push(anyContains(['a2.local_ip_address'], f.ipAddress, p))
    if (f.hostUuid !== undefined) ofAgents.push(anyContains(['a2.uuid'], f.hostUuid, p))
    if (ofAgents.length) parts.push(`p.agent_id IN (SELECT a2.id FROM agents a2 WHERE ${ofAgents.join(' AND ')})`)
    const texts = (column: string, kind: 'vendor' | 'product', term: string) =>
      `${column} IN (SELECT id FROM peripheral_texts WHERE kind = '${kind}' AND text ILIKE ${p.add(contains(term.toLowerCase()))})`
    if (f.vendor !== undefined) parts.push(texts('p.vendor_text_id', 'vendor', f.vendor))
    if (f.productInfo !== undefined) parts.push(texts('p.product_text_id', 'product', f.productInfo))
    if (f.serialNumber !== undefined) parts.push(anyContains(['p.serial_number'], f.serialNumber, p))
    if (f.vid !== undefined) parts.push(`p.vid = ${p.add(f.vid)}`)
    if (f.pid !== undefined) parts.push(`p.pid = ${p.add(f.pid)}`)
    for (const [column, value] of [
      ['p.is_unapproved', f.isUnapproved],
      ['p.is_vulnerable', f.isVulnerable],
      ['p.is_attack_tool', f.isAttackTool],
      ['p.present', f.present],
    ] as const) {
      if (value !== undefined) parts.push(`${column} = ${value ? 1 : 0}`)
    }
    if (f.globalSearch !== undefined) {
      // As db/peripherals.ts: the agent's host name, tags and address, the vendor and
      // product texts, the catalogue's text of the model, the deviceID, the risk tags.
      const term = f.globalSearch
      const like = p.add(contains(term))
      const tags = Object.entries({ is_attack_tool: '#attack-tool', is_vulnerable: '#vulnerable', is_unapproved: '#unapproved' })
        .filter(([, tag]) => tag.includes(term.toLowerCase()))
        .map(([column]) => `p.${column} = 1`)
      parts.push(`(p.agent_id IN (SELECT a2.id FROM agents a2 WHERE a2.host_identifier ILIKE ${like} OR a2.hashtags ILIKE ${like} OR a2.local_ip_address ILIKE ${like})
        OR p.vendor_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'vendor' AND text ILIKE ${like})
        OR p.product_text_id IN (SELECT id FROM peripheral_texts WHERE kind = 'product' AND text ILIKE ${like})
        OR EXISTS (SELECT 1 FROM catalogue c WHERE c.vid = p.vid AND c.pid = p.pid AND coalesce(c.vulnerability, c.name) ILIKE ${like})
        OR p.device_id ILIKE ${like}${tags.map((t) => ` OR ${t}`).join('')})`)
    }
    return parts.length ? parts.join(' AND ') : 'true'
  },
}

function eventWhere(f: EventFilter, p: Params): string {
  const parts = [`created_ms >= ${p.add(f.from)}`, `created_ms < ${p.add(f.to)}`]
  if (f.maxSeverity !== undefined) parts.push(`severity <= ${p.add(f.maxSeverity)}`)
  if (f.categories?.length) parts.push(`category = ANY(${p.add(f.categories)}::text[])`)
  if (f.source !== undefined) parts.push(`entity_id ILIKE ${p.add(contains(f.source))}`)
  if (f.globalSearch !== undefined) {
    const like = p.add(contains(f.globalSearch))
    const any = ['description', 'details', 'entity_id', 'event_code', 'category', 'hashtags', 'asset_name'].map((c) => `${c} ILIKE ${like}`)
    const bySeverity = severityNames.flatMap((n, i) => (n.toLowerCase().includes(f.globalSearch!.toLowerCase()) ? [i] : []))
    if (bySeverity.length) any.push(`severity IN (${bySeverity.join(', ')})`)
    parts.push(`(${any.join(' OR ')})`)
  }
  return parts.join(' AND ')
}

function auditWhere(f: AuditFilter, p: Params): string {
  const parts = [`created_ms >= ${p.add(f.from)}`, `created_ms < ${p.add(f.to)}`]
  if (f.maxSeverity !== undefined) parts.push(`severity <= ${p.add(f.maxSeverity)}`)
  if (f.categories?.length) parts.push(`category = ANY(${p.add(f.categories)}::text[])`)
  if (f.user !== undefined) parts.push(`user_name ILIKE ${p.add(contains(f.user))}`)
  if (f.outcomes?.length) parts.push(`outcome = ANY(${p.add(f.outcomes)}::text[])`)
  return parts.join(' AND ')
}

function peripheralWhere(filters: PgFilterSql, f: PeripheralFilter, extra: PeripheralExtra, p: Params): string {
  const parts = [filters.peripherals(f, p)]
  if (extra.approved !== undefined) parts.push(`p.approved = ${extra.approved ? 1 : 0}`)
  if (extra.icons?.length) parts.push(`p.dev_icon = ANY(${p.add(extra.icons.map((i) => Math.trunc(i)))}::bigint[])`)
  return parts.join(' AND ')
}

const bump = <K>(m: Map<K, number>, k: K, n: number) => m.set(k, (m.get(k) ?? 0) + n)

/** The columns `update` may change (the names of a change are put into the statement). */
const CHANGEABLE = new Set<string>([
  'name',
  'description',
  'type',
  'format',
  'filters',
  'schedule',
  'recipients',
  'sender',
  'is_active',
  'updated_ms',
  'next_run_ms',
  'retention_files',
  'retention_bytes',
])

const RUN_COLUMNS = 'id, report_id, trigger, requested_by, due_ms, queued_ms, definition, format'

/** A run's stored file: its media type, size and how many parts hold it. */
export interface StoredFileHead {
  media_type: string
  size_bytes: number
  parts: number
}

type RunInsert = Pick<RunRow, 'id' | 'report_id' | 'trigger' | 'requested_by' | 'due_ms' | 'queued_ms' | 'definition' | 'format'>
type RunSuccess = Pick<RunRow, 'id' | 'finished_ms' | 'file_name' | 'file_path' | 'size_bytes' | 'row_count' | 'truncated' | 'email_status' | 'email_next_ms' | 'email_detail'>
type RunMail = Pick<RunRow, 'id' | 'email_status' | 'email_detail' | 'email_attempts' | 'email_next_ms'>
type Health = { reports: number; active: number; runs_failed: number; mail_failed: number; mail_partial: number; mail_retrying: number; overdue_before: number | null }
type Failure = { name: string; reason: string | null; email_detail: string | null; email_status: string; status: string }

/** Cuts a stream of chunks into parts of exactly `size` bytes (the last one shorter). */
async function* partsOf(content: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, size: number): AsyncGenerator<Buffer> {
  let held: Buffer[] = []
  let length = 0
  for await (const chunk of content) {
    let buf = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    while (length + buf.length >= size) {
      const take = size - length
      held.push(buf.subarray(0, take))
      yield Buffer.concat(held)
      buf = buf.subarray(take)
      held = []
      length = 0
    }
    if (buf.length) {
      // Copied: the caller may reuse its chunk's memory once it has been handed over.
      held.push(Buffer.from(buf))
      length += buf.length
    }
  }
  if (length) yield Buffer.concat(held)
}

/**
 * `filters`: the agent and peripheral filters as SQL (the agents' part may give its own);
 * `holder`: who holds this process's leases on runs (a fresh id by default).
 */
export function pgReportsRepo(db: Postgres, filters: PgFilterSql = plainFilterSql, holder: string = crypto.randomUUID()) {
  // Rows typed as the SQLite repository's (the same columns).
  const all = <T>(sql: string, params?: unknown[]) => db.query(sql, params) as Promise<unknown> as Promise<T[]>
  const get = <T>(sql: string, params?: unknown[]) => db.one(sql, params) as Promise<unknown> as Promise<T | undefined>
  const repo = {
    // ---- definitions ----
    async insert(r: ReportInsert) {
      const changes = await db.run(
        `INSERT INTO reports (id, name, name_key, description, type, format, filters, schedule, recipients, sender, is_active, owner,
           created_ms, updated_ms, next_run_ms, retention_files, retention_bytes)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)`,
        [
          r.id,
          r.name,
          nameKey(r.name),
          r.description,
          r.type,
          r.format,
          r.filters,
          r.schedule,
          r.recipients,
          r.sender,
          r.is_active,
          r.owner,
          r.created_ms,
          r.updated_ms,
          r.next_run_ms,
          r.retention_files,
          r.retention_bytes,
        ],
      )
      return { changes }
    },
    byId: (id: string) => get<ReportRow>('SELECT * FROM reports WHERE id = $1', [id]),
    byName: (name: string) => get<ReportRow>('SELECT * FROM reports WHERE name_key = $1', [nameKey(name)]),
    all: () => all<ReportRow>('SELECT * FROM reports ORDER BY name_key COLLATE "C", id COLLATE "C"'),
    count: async () => (await db.value<number>('SELECT count(*) FROM reports')) ?? 0,
    /** Changes the given columns (a name keeps its key in step). */
    async update(id: string, changes: ReportChanges): Promise<void> {
      const set = { ...changes } as Record<string, unknown>
      const p = new Params([id])
      const assignments = Object.entries(set)
        .filter(([, v]) => v !== undefined)
        .map(([column, value]) => {
          if (!CHANGEABLE.has(column)) throw new Error(`reports has no changeable column ${column}`)
          return `${column} = ${p.add(value)}`
        })
      if (changes.name !== undefined) assignments.push(`name_key = ${p.add(nameKey(changes.name))}`)
      if (!assignments.length) return
      await db.run(`UPDATE reports SET ${assignments.join(', ')} WHERE id = $1`, p.values)
    },
    /** Deletes the definition; its runs and their files go with it (foreign keys). */
    remove: async (id: string) => (await db.run('DELETE FROM reports WHERE id = $1', [id])) > 0,

    // ---- scheduling ----
    /** Active reports whose next due time has come. */
    due: (now: number) => all<ReportRow>('SELECT * FROM reports WHERE next_run_ms <= $1 AND is_active = 1 ORDER BY next_run_ms, id COLLATE "C"', [now]),
    /**
     * Moves the next due time on, if it is still the one read (answers whether it did).
     * With several nodes this is the claim of a due time: the UPDATE of a second node waits
     * for the first one's transaction, then finds the value moved and changes nothing.
     */
    advance: async (id: string, from: number, to: number | null) => (await db.run('UPDATE reports SET next_run_ms = $1 WHERE id = $2 AND next_run_ms = $3', [to, id, from])) === 1,
    earliestDue: async () => (await db.value<number | null>('SELECT min(next_run_ms) FROM reports WHERE is_active = 1')) ?? null,

    // ---- runs ----
    async insertRun(r: RunInsert) {
      const changes = await db.run(`INSERT INTO report_runs (${RUN_COLUMNS}, status) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'queued')`, [
        r.id,
        r.report_id,
        r.trigger,
        r.requested_by,
        r.due_ms,
        r.queued_ms,
        r.definition,
        r.format,
      ])
      return { changes }
    },
    runById: (id: string) => get<RunRow>('SELECT * FROM report_runs WHERE id = $1', [id]),
    runsOf: (reportId: string, limit: number) => all<RunRow>('SELECT * FROM report_runs WHERE report_id = $1 ORDER BY seq DESC LIMIT $2', [reportId, limit]),
    async lastRuns(): Promise<Map<string, RunRow>> {
      const rows = await all<RunRow>('SELECT * FROM (SELECT DISTINCT ON (report_id) * FROM report_runs ORDER BY report_id, seq DESC) last ORDER BY seq')
      return new Map(rows.map((r) => [r.report_id, r]))
    },
    lastRunOf: (reportId: string) => get<RunRow>('SELECT * FROM report_runs WHERE report_id = $1 ORDER BY seq DESC LIMIT 1', [reportId]),
    openRunOf: (reportId: string) => get<RunRow>("SELECT * FROM report_runs WHERE report_id = $1 AND status IN ('queued', 'running') ORDER BY seq LIMIT 1", [reportId]),
    queued: (limit: number) => all<RunRow>("SELECT * FROM report_runs WHERE status = 'queued' ORDER BY seq LIMIT $1", [limit]),
    /** Marks a queued run running: of several nodes starting it, one wins, and holds a lease on it (in the same statement). */
    start: async (id: string, now: number) =>
      (await db.value<number>(
        `WITH s AS (UPDATE report_runs SET status = 'running', started_ms = $1 WHERE id = $2 AND status = 'queued' RETURNING id),
              l AS (INSERT INTO leases (name, holder, fence, expires_at) SELECT $4 || id, $3, 1, now() + $5 * interval '1 millisecond' FROM s
                    ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, fence = leases.fence + 1, expires_at = EXCLUDED.expires_at)
         SELECT count(*) FROM s`,
        [now, id, holder, RUN_LEASE, RUN_LEASE_MS],
      )) === 1,
    requeue: async (id: string) => (await db.run("UPDATE report_runs SET status = 'queued', started_ms = NULL WHERE id = $1 AND status = 'running'", [id])) === 1,
    /** Runs left `running` by a server that stopped without finishing them (every node's: see the report). */
    failInterrupted: (now: number, reason: string) => db.run("UPDATE report_runs SET status = 'failed', finished_ms = $1, reason = $2 WHERE status = 'running'", [now, reason]),
    /** Renews this process's leases on its running runs. */
    async hold(runIds: string[]): Promise<void> {
      await db.run(`UPDATE leases SET expires_at = now() + $3 * interval '1 millisecond' WHERE name = ANY($1::text[]) AND holder = $2`, [runIds.map((id) => RUN_LEASE + id), holder, RUN_LEASE_MS])
    },
    /**
     * Fails the running runs no live lease holds (their process stopped), and lets go of
     * the leases of runs that no longer run (finished, queued again, deleted) or lapsed.
     */
    failOrphaned: (now: number, reason: string) =>
      db.value<number>(
        `WITH f AS (UPDATE report_runs r SET status = 'failed', finished_ms = $1, reason = $2
                    WHERE status = 'running' AND NOT EXISTS (SELECT 1 FROM leases l WHERE l.name = $3 || r.id AND l.expires_at > now()) RETURNING id),
              d AS (DELETE FROM leases l WHERE l.name LIKE $3 || '%'
                    AND (l.expires_at <= now() OR NOT EXISTS (SELECT 1 FROM report_runs r WHERE $3 || r.id = l.name AND r.status = 'running')))
         SELECT count(*) FROM f`,
        [now, reason, RUN_LEASE],
      ) as Promise<number>,
    /** Takes a due e-mail until `untilMs`, if its next attempt is still the one read. */
    claimMail: async (runId: string, nextMs: number, untilMs: number) =>
      (await db.run("UPDATE report_runs SET email_next_ms = $3 WHERE id = $1 AND email_status = 'pending' AND email_next_ms = $2", [runId, nextMs, untilMs])) === 1,
    fail: async (id: string, now: number, reason: string) =>
      (await db.run("UPDATE report_runs SET status = 'failed', finished_ms = $1, reason = $2 WHERE id = $3 AND status = 'running'", [now, reason.slice(0, 1000), id])) === 1,
    succeed: async (r: RunSuccess) =>
      (await db.run(
        `UPDATE report_runs SET status = 'succeeded', finished_ms = $2, file_name = $3, file_path = $4, size_bytes = $5, row_count = $6, truncated = $7,
           email_status = $8, email_next_ms = $9, email_detail = $10
         WHERE id = $1 AND status = 'running'`,
        [r.id, r.finished_ms, r.file_name, r.file_path, r.size_bytes, r.row_count, r.truncated, r.email_status, r.email_next_ms, r.email_detail],
      )) === 1,
    storedFiles: (reportId: string) => all<RunRow>('SELECT * FROM report_runs WHERE report_id = $1 AND file_path IS NOT NULL AND file_deleted_ms IS NULL ORDER BY seq DESC', [reportId]),
    /** Records the file removed, and removes its content, in one statement. */
    async fileDeleted(id: string, now: number): Promise<boolean> {
      const n = await db.value<number>(
        `WITH gone AS (UPDATE report_runs SET file_deleted_ms = $1 WHERE id = $2 AND file_deleted_ms IS NULL RETURNING id),
              parts AS (DELETE FROM report_file_parts WHERE run_id IN (SELECT id FROM gone)),
              head AS (DELETE FROM report_files WHERE run_id IN (SELECT id FROM gone))
         SELECT count(*) FROM gone`,
        [now, id],
      )
      return n === 1
    },
    newestFile: (reportId: string) =>
      get<RunRow>("SELECT * FROM report_runs WHERE report_id = $1 AND status = 'succeeded' AND file_path IS NOT NULL AND file_deleted_ms IS NULL ORDER BY seq DESC LIMIT 1", [reportId]),
    /** Older records go, except those that still hold a file (it stays downloadable by its id). */
    pruneRuns: (reportId: string, keep: number) =>
      db.run(
        `DELETE FROM report_runs WHERE report_id = $1 AND status IN ('succeeded', 'failed') AND (file_path IS NULL OR file_deleted_ms IS NOT NULL)
           AND seq < (SELECT min(seq) FROM (SELECT seq FROM report_runs WHERE report_id = $1 ORDER BY seq DESC LIMIT $2) newest)`,
        [reportId, keep],
      ),
    pendingMail: (now: number, limit: number) => all<RunRow>("SELECT * FROM report_runs WHERE email_status = 'pending' AND email_next_ms <= $1 ORDER BY email_next_ms, seq LIMIT $2", [now, limit]),
    async setMail(r: RunMail) {
      const changes = await db.run('UPDATE report_runs SET email_status = $2, email_detail = $3, email_attempts = $4, email_next_ms = $5 WHERE id = $1', [
        r.id,
        r.email_status,
        r.email_detail,
        r.email_attempts,
        r.email_next_ms,
      ])
      return { changes }
    },
    health: async () =>
      (await get<Health>(
        `WITH last AS (SELECT DISTINCT ON (report_id) status FROM report_runs WHERE status IN ('succeeded', 'failed') ORDER BY report_id, seq DESC),
              mailed AS (SELECT DISTINCT ON (report_id) email_status FROM report_runs WHERE email_status IN ('sent', 'partial', 'failed') ORDER BY report_id, seq DESC)
         SELECT (SELECT count(*) FROM reports) AS reports,
                (SELECT count(*) FROM reports WHERE is_active = 1) AS active,
                (SELECT count(*) FROM last WHERE status = 'failed') AS runs_failed,
                (SELECT count(*) FROM mailed WHERE email_status = 'failed') AS mail_failed,
                (SELECT count(*) FROM mailed WHERE email_status = 'partial') AS mail_partial,
                (SELECT count(*) FROM report_runs WHERE email_status = 'pending' AND email_attempts > 0) AS mail_retrying,
                (SELECT min(next_run_ms) FROM reports WHERE is_active = 1) AS overdue_before`,
      ))!,
    failures: () =>
      all<Failure>(
        `SELECT r.name, x.reason, x.email_detail, x.email_status, x.status
         FROM (SELECT DISTINCT ON (report_id) * FROM report_runs WHERE status IN ('succeeded', 'failed') ORDER BY report_id, seq DESC) x
         JOIN reports r ON r.id = x.report_id
         WHERE x.status = 'failed' OR x.email_status IN ('failed', 'partial')
         ORDER BY x.seq DESC LIMIT 3`,
      ),

    // ---- files ----
    /**
     * Stores a run's file (its content as chunks of any size, e.g. a read stream of the
     * file the run wrote), in parts of FILE_PART_BYTES, in one unit of work (the caller's,
     * when it is in one): whole or not at all. Answers false, storing nothing, when the
     * run is gone (its report was deleted meanwhile); a file stored again replaces the last.
     */
    storeFile(runId: string, mediaType: string, content: AsyncIterable<Uint8Array> | Iterable<Uint8Array>, now = Date.now()): Promise<boolean> {
      return db.uow.run(async () => {
        // Holds the run (a delete of its report waits) while its parts are written.
        if ((await db.value('SELECT 1 FROM report_runs WHERE id = $1 FOR KEY SHARE', [runId])) === undefined) return false
        await db.run('DELETE FROM report_files WHERE run_id = $1', [runId])
        await db.run('DELETE FROM report_file_parts WHERE run_id = $1', [runId])
        let part = 0
        let size = 0
        for await (const buf of partsOf(content, FILE_PART_BYTES)) {
          await db.run('INSERT INTO report_file_parts (run_id, part, content) VALUES ($1, $2, $3)', [runId, part++, buf])
          size += buf.length
        }
        await db.run('INSERT INTO report_files (run_id, media_type, size_bytes, parts, stored_ms) VALUES ($1, $2, $3, $4, $5)', [runId, mediaType, size, part, now])
        return true
      })
    },
    /** A run's stored file: media type, size and parts; undefined when it has none (or it was removed). */
    fileOf: (runId: string) => get<StoredFileHead>('SELECT media_type, size_bytes, parts FROM report_files WHERE run_id = $1', [runId]),
    /**
     * A run's stored file, a part at a time (a query each: no connection is held between
     * parts, however slowly the caller reads). A file removed while it is read (the
     * retention rule, a deleted report) ends the read with an error, not a short file.
     */
    async *fileContent(runId: string, signal?: AbortSignal): AsyncGenerator<Buffer> {
      const head = await repo.fileOf(runId)
      if (!head) throw new Error(`run ${runId} has no stored file`)
      for (let part = 0; part < head.parts; part++) {
        signal?.throwIfAborted()
        const row = await db.one<{ content: Buffer }>('SELECT content FROM report_file_parts WHERE run_id = $1 AND part = $2', [runId, part])
        if (!row) throw new Error(`the file of run ${runId} was removed while it was read`)
        yield row.content
      }
    },
    /** The whole file in memory (a mail attachment: at most 10 MiB); undefined without one. */
    async fileBytes(runId: string): Promise<{ media_type: string; content: Buffer } | undefined> {
      const head = await repo.fileOf(runId)
      if (!head) return undefined
      const chunks: Buffer[] = []
      for await (const c of repo.fileContent(runId)) chunks.push(c)
      return { media_type: head.media_type, content: Buffer.concat(chunks) }
    },

    // ---- data ----
    /** The agents of `ids` in that order, with the columns the list's view reads, a page at a time (rows deleted meanwhile are left out). */
    async *agents(ids: readonly number[], signal?: AbortSignal): AsyncGenerator<AgentRow> {
      const columns = VIEW_COLUMNS.map((c) => `a.${c}`).join(', ')
      for (let i = 0; i < ids.length; i += AGENT_PAGE) {
        signal?.throwIfAborted()
        const page = ids.slice(i, i + AGENT_PAGE)
        yield* await all<AgentRow>(`SELECT ${columns} FROM unnest($1::bigint[]) WITH ORDINALITY u(id, n) JOIN agents a ON a.id = u.id ORDER BY u.n`, [page])
      }
    },

    /** Counters of the agents matching the filter. */
    async agentTotals(f: AgentFilter, signal?: AbortSignal): Promise<AgentTotals> {
      signal?.throwIfAborted()
      const p = new Params()
      const w = filters.agents(f, p)
      return (await get<AgentTotals>(
        `SELECT count(*) AS "agents", count(*) FILTER (WHERE connection_status = 'Connected') AS "connected",
           count(*) FILTER (WHERE operational_status = 'Armed') AS "armed",
           coalesce(sum(has_unapproved), 0) AS "withUnapproved", coalesce(sum(has_vulnerable), 0) AS "withVulnerable",
           coalesce(sum(has_attack_tool), 0) AS "withAttackTools", count(*) FILTER (WHERE license_status = 'Activated') AS "licenseActivated",
           coalesce(sum(not_approved), 0) AS "unapprovedPeripherals"
         FROM agents a WHERE ${w}`,
        p.values,
      ))!
    },

    /** Counters of the peripherals matching the filter. */
    async peripheralTotals(f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): Promise<PeripheralTotals> {
      signal?.throwIfAborted()
      const p = new Params()
      const w = peripheralWhere(filters, f, extra, p)
      return (await get<PeripheralTotals>(
        `SELECT count(*) AS "peripherals", count(DISTINCT p.agent_id) AS "hosts", coalesce(sum(p.present), 0) AS "present",
           coalesce(sum(p.approved), 0) AS "approved", coalesce(sum(p.is_unapproved), 0) AS "unapproved",
           coalesce(sum(p.is_vulnerable), 0) AS "vulnerable", coalesce(sum(p.is_attack_tool), 0) AS "attackTools"
         FROM peripherals p WHERE ${w}`,
        p.values,
      ))!
    },

    /**
     * The peripherals matching the filter, agent by agent in the order of `agentIds`
     * (each agent's by deviceID), read for a few hundred agents at a time.
     */
    async *peripherals(agentIds: readonly number[], f: PeripheralFilter, extra: PeripheralExtra, signal?: AbortSignal): AsyncGenerator<PeripheralListRow> {
      const p = new Params([null])
      const w = peripheralWhere(filters, f, extra, p)
      const sql = `SELECT p.*, a.host_identifier, a.local_ip_address AS host_ip, a.hashtags AS agent_hashtags
        FROM unnest($1::bigint[]) WITH ORDINALITY u(id, n) JOIN peripherals p ON p.agent_id = u.id JOIN agents a ON a.id = p.agent_id
        WHERE ${w} ORDER BY u.n, p.device_id COLLATE "C", p.id`
      for (let i = 0; i < agentIds.length; i += AGENT_PAGE) {
        signal?.throwIfAborted()
        p.values[0] = agentIds.slice(i, i + AGENT_PAGE)
        yield* await all<PeripheralListRow>(sql, p.values)
      }
    },

    /** Counts of the events of the filter: by severity, category and source. */
    async eventTotals(f: EventFilter, signal?: AbortSignal): Promise<DigestTotals> {
      signal?.throwIfAborted()
      const t: DigestTotals = { total: 0, bySeverity: new Map(), byCategory: new Map(), byOutcome: new Map(), byKey: new Map() }
      const p = new Params()
      const w = eventWhere(f, p)
      // A source is its asset where the event names one (an agent's events name it "HOST"
      // before its address is known, "HOST (ip)" after), shown as the name its latest event
      // gave; events without an asset count by their source text.
      const rows = await db.query<{ severity: number; category: string; label: string; n: number }>(
        `WITH g AS (
           SELECT severity, category, CASE WHEN asset_key IS NULL THEN 'text:' || entity_id ELSE 'asset:' || asset_key END AS key, id, entity_id
           FROM events WHERE ${w})
         SELECT g.severity, g.category, s.label, count(*) AS n
         FROM g JOIN (SELECT DISTINCT ON (key) key, entity_id AS label FROM g ORDER BY key, id DESC) s USING (key)
         GROUP BY 1, 2, 3`,
        p.values,
      )
      for (const r of rows) {
        t.total += r.n
        bump(t.bySeverity, r.severity, r.n)
        bump(t.byCategory, r.category, r.n)
        bump(t.byKey, r.label, r.n)
      }
      return t
    },

    /** The events of the filter, newest first, a page at a time. */
    async *events(f: EventFilter, signal?: AbortSignal): AsyncGenerator<EventRow> {
      yield* pages<EventRow>('SELECT * FROM events', (p) => eventWhere(f, p), signal)
    },

    /** Counts of the audit records of the filter: by severity, category, outcome and user. */
    async auditTotals(f: AuditFilter, signal?: AbortSignal): Promise<DigestTotals> {
      signal?.throwIfAborted()
      const t: DigestTotals = { total: 0, bySeverity: new Map(), byCategory: new Map(), byOutcome: new Map(), byKey: new Map() }
      const p = new Params()
      const rows = await db.query<{ severity: number; category: string; outcome: string; key: string; n: number }>(
        `SELECT severity, category, outcome, coalesce(user_name, '(unknown)') AS key, count(*) AS n FROM audit_trail WHERE ${auditWhere(f, p)} GROUP BY 1, 2, 3, 4`,
        p.values,
      )
      for (const r of rows) {
        t.total += r.n
        bump(t.bySeverity, r.severity, r.n)
        bump(t.byCategory, r.category, r.n)
        bump(t.byOutcome, r.outcome, r.n)
        bump(t.byKey, r.key, r.n)
      }
      return t
    },

    /** The audit records of the filter, newest first, a page at a time. */
    async *auditRecords(f: AuditFilter, signal?: AbortSignal): AsyncGenerator<AuditDigestRow> {
      const columns = 'id, created_ms, severity, category, user_name, source_ip, description, details, operation_id, outcome, asset_key, asset_name, asset_type'
      yield* pages<AuditDigestRow>(`SELECT ${columns} FROM audit_trail`, (p) => auditWhere(f, p), signal)
    },
  }

  /** Keyset pages of `select` under the conditions, newest first (created_ms, id). */
  async function* pages<T extends { created_ms: number; id: number }>(select: string, where: (p: Params) => string, signal?: AbortSignal): AsyncGenerator<T> {
    let last: T | undefined
    for (;;) {
      signal?.throwIfAborted()
      const p = new Params()
      const w = where(p)
      const after = last ? ` AND (created_ms, id) < (${p.add(last.created_ms)}, ${p.add(last.id)})` : ''
      const page = await all<T>(`${select} WHERE ${w}${after} ORDER BY created_ms DESC, id DESC LIMIT ${PAGE_ROWS}`, p.values)
      yield* page
      if (page.length < PAGE_ROWS) return
      last = page[page.length - 1]
    }
  }

  return repo satisfies ReportStore & ReportSources['reports'] & ReportFileStore & RunLeases
}
export type PgReportsRepo = ReturnType<typeof pgReportsRepo>
