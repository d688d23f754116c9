// Agentless connections, worker pollers, check runs and the asset feed's last published
// locations on PostgreSQL (db/agentless.ts is SQLite's).
//
// Names compare as SQLite's NOCASE does (ASCII letters folded: lower() under the "C"
// collation), the index of each name's uniqueness (migration 008) written the same way.
import type {
  AgentAssetRow,
  AgentlessFilter,
  AgentlessStore,
  AssetType,
  ConnectionAssetRow,
  ConnectionRow,
  ConnectionValues,
  PeripheralAssetRow,
  PollerRow,
  PollerWithCounts,
  PollingDefaults,
  PreviousError,
  RunRow,
} from '../../lib/agentless/ports.js'
import { MAX_PREVIOUS_ERRORS, type RunWrite } from '../agentless.js'
import { contains } from '../sql.js'
import type { Sort } from '../../lib/ports.js'
import type { Postgres, Row } from './connection.js'
import { refusedAsDuplicate } from './duplicates.js'
import { holdLimit } from './limits.js'

// Runs kept per connection beyond the previous errors: enough to answer a retried report.
const KEPT_OTHER_RUNS = 10
// Rows read per statement by connectionsInPages (as db/exports.ts's pages).
const PAGE_ROWS = 1000

/** Connection names are unique whatever their ASCII case (migration 008): one taken meanwhile by another unit of work. */
const NAME_TAKEN = 'agentless_connections_name'
const FROM = 'agentless_connections c LEFT JOIN worker_pollers p ON p.id = c.poller_id'
const COLUMNS = 'c.*, p.name AS poller_name'
/** SQLite's NOCASE: ASCII letters folded, code point order. */
const nocase = (e: string) => `lower((${e}) COLLATE "C")`
const lowerAscii = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase())

/** Sort columns of the status list; the polling options sort by the value in use. */
function sortColumns(d: PollingDefaults): Record<string, string> {
  return {
    id: 'c.id',
    computerName: nocase('c.name'),
    address: nocase('c.address'),
    protocol: 'c.protocol COLLATE "C"',
    port: 'c.port',
    userName: nocase('c.user_name'),
    isOverrideDefaults: 'c.is_override_defaults',
    pollingIntervalSeconds: `coalesce(c.polling_interval_s, ${Math.trunc(d.intervalSeconds)})`,
    timeoutSeconds: `coalesce(c.timeout_s, ${Math.trunc(d.timeoutSeconds)})`,
    pollerName: nocase('p.name'),
    statusString: 'c.status COLLATE "C"',
    statusDescription: nocase('c.status_description'),
    statusErrorDescription: nocase('c.status_error'),
    startTime: 'c.start_ms',
    endTime: 'c.end_ms',
    durationMs: '(c.end_ms - c.start_ms)',
    lastReachableTime: 'c.last_reachable_ms',
    createdTime: 'c.created_ms',
    updatedTime: 'c.updated_ms',
  }
}

/** ORDER BY for a sort, then the id: nulls last both ways, as SQLite's orderBy puts them. */
function orderBy(s: Sort, d: PollingDefaults): string {
  const column = sortColumns(d)[s.field]
  if (!column) throw new Error(`no column for sort field ${s.field}`)
  const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
  return column === 'c.id' ? `c.id ${dir}` : `${column} ${dir} NULLS LAST, c.id ${dir}`
}

/**
 * The filter as SQL on `c` (connections) and `p` (pollers), its values from $`first` on.
 * An ASCII term matches as SQLite's LIKE (ASCII letters folded); any other folds both sides
 * with lower(), as SQLite's repository folds them with JavaScript's toLowerCase (the two
 * differ only where a letter's lower case depends on its context, as a final sigma).
 */
function where(f: AgentlessFilter, first = 1): { sql: string; params: unknown[] } {
  const parts: string[] = []
  const params: unknown[] = []
  const param = (v: unknown) => {
    params.push(v)
    return `$${first + params.length - 1}`
  }
  const match = (column: string, term: string): string =>
    /^[\x00-\x7f]*$/.test(term) ? `${nocase(column)} LIKE ${param(lowerAscii(contains(term)))}` : `strpos(lower(${column}), ${param(term.toLowerCase())}) > 0`
  const prevHas = (term: string) => `(c.prev_errors <> '[]' AND EXISTS (SELECT 1 FROM jsonb_array_elements(c.prev_errors::jsonb) e WHERE ${match("e ->> 'errorDescription'", term)}))`
  if (f.computerName !== undefined) parts.push(match('c.name', f.computerName))
  if (f.statusString !== undefined) parts.push(match('c.status', f.statusString))
  if (f.statusDescription !== undefined) parts.push(match('c.status_description', f.statusDescription))
  if (f.statusErrorDescription !== undefined) parts.push(match('c.status_error', f.statusErrorDescription))
  if (f.prevRunningErrors !== undefined) parts.push(prevHas(f.prevRunningErrors))
  if (f.globalSearch !== undefined) {
    const columns = ['c.name', 'c.address', 'c.protocol', 'c.user_name', 'p.name', 'c.status', 'c.status_description', 'c.status_error']
    parts.push(`(${[...columns.map((c) => match(c, f.globalSearch!)), prevHas(f.globalSearch)].join(' OR ')})`)
  }
  const range = (column: string, from: number | undefined, to: number | undefined, toExclusive = false) => {
    if (from !== undefined) parts.push(`${column} >= ${param(from)}::bigint`)
    if (to !== undefined) parts.push(`${column} ${toExclusive ? '<' : '<='} ${param(to)}::bigint`)
  }
  if (f.startDay) range('c.start_ms', f.startDay[0], f.startDay[1], true)
  if (f.endDay) range('c.end_ms', f.endDay[0], f.endDay[1], true)
  range('c.start_ms', f.fromStart, f.toStart)
  range('c.end_ms', f.fromEnd, f.toEnd)
  if (f.isOverrideDefaults !== undefined) parts.push(`c.is_override_defaults = ${param(f.isOverrideDefaults ? 1 : 0)}::int`)
  return { sql: parts.length ? parts.join(' AND ') : 'true', params }
}

const POLLER_COUNTS = `SELECT p.*, count(c.id) AS assigned,
    count(*) FILTER (WHERE c.status = 'Reachable') AS reachable,
    count(*) FILTER (WHERE c.status IN ('Unreachable', 'Failed')) AS failing,
    count(*) FILTER (WHERE c.status = 'Pending') AS pending
  FROM worker_pollers p LEFT JOIN agentless_connections c ON c.poller_id = p.id`

function bind(v: ConnectionValues): unknown[] {
  return [v.name, v.address, v.protocol, v.port, v.useTls ? 1 : 0, v.userName, v.isOverrideDefaults ? 1 : 0, v.pollingIntervalSeconds, v.timeoutSeconds]
}

type RunLatest = { connectionId: number; runId: string; status: string; startMs: number; endMs: number | null; description: string | null; error: string | null }

export interface PgAgentlessRepo extends AgentlessStore {
  pollerByCredential(hash: string): Promise<PollerRow | undefined>
  countAll(): Promise<number>
}

export function pgAgentlessRepo(db: Postgres): PgAgentlessRepo {
  const connectionsByIds = (ids: readonly number[]) => db.query<ConnectionRow & Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.id = ANY($1::bigint[]) ORDER BY c.id`, [ids])

  /**
   * Makes the run the connection's latest, with the failed runs before it, and drops history
   * no longer shown. The previous errors are made here, as SQLite's repository makes them,
   * so that their JSON text is the same.
   */
  async function setLatest(r: RunLatest): Promise<void> {
    await db.uow.run(async () => {
      const failed = await db.query<RunRow & Row>(
        `SELECT * FROM agentless_runs WHERE connection_id = $1 AND run_id <> $2 AND status IN ('Unreachable', 'Failed')
           AND end_ms IS NOT NULL AND start_ms <= $3 ORDER BY start_ms DESC, recorded_ms DESC LIMIT $4`,
        [r.connectionId, r.runId, r.startMs, MAX_PREVIOUS_ERRORS],
      )
      const prev: PreviousError[] = failed.map((f) => ({
        startTime: new Date(f.start_ms).toISOString(),
        endTime: new Date(f.end_ms!).toISOString(),
        statusString: f.status as PreviousError['statusString'],
        errorDescription: (f.error ?? '').slice(0, 2000),
      }))
      // SQLite's scalar max() is null when an argument is: a Reachable run without an end leaves none.
      await db.run(
        `WITH latest AS (
           UPDATE agentless_connections SET status = $2, status_description = $3, status_error = $4, run_id = $5, start_ms = $6, end_ms = $7,
             last_reachable_ms = CASE WHEN $2 = 'Reachable' THEN CASE WHEN $7::bigint IS NULL THEN NULL ELSE greatest(coalesce(last_reachable_ms, 0), $7) END
               ELSE last_reachable_ms END,
             last_result = CASE WHEN $2 = 'Running' THEN last_result ELSE $2 END,
             prev_errors = $8
           WHERE id = $1
         )
         DELETE FROM agentless_runs WHERE connection_id = $1 AND start_ms < $6 AND run_id IN (
           SELECT run_id FROM (
             SELECT run_id, status IN ('Unreachable', 'Failed') AS failed,
               row_number() OVER (PARTITION BY status IN ('Unreachable', 'Failed') ORDER BY start_ms DESC, recorded_ms DESC) AS n
             FROM agentless_runs WHERE connection_id = $1) k
           WHERE (failed AND n > $9) OR (NOT failed AND n > $10))`,
        [r.connectionId, r.status, r.description, r.error, r.runId, r.startMs, r.endMs, JSON.stringify(prev), MAX_PREVIOUS_ERRORS + 1, KEPT_OTHER_RUNS],
      )
    })
  }

  /** Writes a run's end; `whileRunning`: only if it is still Running. Answers whether a run was written. */
  const finishRun = async (r: { runId: string; status: string; startMs: number; endMs: number | null; description: string | null; error: string | null; now: number }, whileRunning = false) =>
    (await db.run(
      `UPDATE agentless_runs SET status = $2, start_ms = $3, end_ms = $4, description = $5, error = $6, recorded_ms = $7 WHERE run_id = $1${whileRunning ? " AND status = 'Running'" : ''}`,
      [r.runId, r.status, r.startMs, r.endMs, r.description, r.error, r.now],
    )) > 0

  const countAll = async () => (await db.value<number>('SELECT count(*) FROM agentless_connections'))!
  const filteredCount = async (w: { sql: string; params: unknown[] }, total: number) => (w.sql === 'true' ? total : (await db.value<number>(`SELECT count(*) FROM ${FROM} WHERE ${w.sql}`, w.params))!)

  return {
    pollerByCredential: (hash) => db.one<PollerRow & Row>('SELECT * FROM worker_pollers WHERE credential_hash = $1', [hash]),
    // Held as the foreign key of a connection holds it: its deletion waits, its heartbeats do not.
    poller: (id, hold) => db.one<PollerRow & Row>(`SELECT * FROM worker_pollers WHERE id = $1${hold ? ' FOR KEY SHARE' : ''}`, [id.toLowerCase()]),
    pollerByName: (name) => db.one<PollerRow & Row>(`SELECT * FROM worker_pollers WHERE ${nocase('name')} = ${nocase('$1::text')}`, [name]),
    pollers: () => db.query<PollerWithCounts & Row>(`${POLLER_COUNTS} GROUP BY p.id ORDER BY ${nocase('p.name')}, p.id`),
    pollerWithCounts: (id) => db.one<PollerWithCounts & Row>(`${POLLER_COUNTS} WHERE p.id = $1 GROUP BY p.id`, [id.toLowerCase()]),
    async insertPoller(p) {
      // A name taken meanwhile by another unit of work: refused by the unique index (migration 008).
      await refusedAsDuplicate('worker_pollers_name', () =>
        db.run(`INSERT INTO worker_pollers (id, name, credential_hash, host_name, ip_address, version, created_ms) VALUES ($1, $2, $3, $4, $5, $6, $7)`, [
          p.id,
          p.name,
          p.hash,
          p.hostName,
          p.ip,
          p.version,
          p.now,
        ]),
      )
    },
    setActivated: (id, on, now, by) =>
      db.run(
        `UPDATE worker_pollers SET is_activated = $1, activation_changed_ms = $2, activation_changed_by = $3,
           assignments_revision = assignments_revision + 1 WHERE id = $4`,
        [on ? 1 : 0, now, by, id],
      ),
    async heartbeat(p) {
      await db.run(
        `UPDATE worker_pollers SET last_heartbeat_ms = $2, version = $3, host_name = coalesce($4, host_name), ip_address = $5, started_ms = $6,
           active_checks = $7, offline_since_ms = NULL WHERE id = $1`,
        [p.id, p.now, p.version, p.hostName, p.ip, p.startedMs, p.activeChecks],
      )
    },
    touch: (id, ip) => db.run('UPDATE worker_pollers SET ip_address = $1 WHERE id = $2', [ip, id]),
    async deletePoller(id, now) {
      // The poller locked first, in a statement of its own: a unit setting a connection to it
      // holds it (poller(id, hold)) to its commit, and the statement below must see that
      // connection (its snapshot is taken when it starts, before any wait for the row).
      await db.query('SELECT 1 FROM worker_pollers WHERE id = $1 FOR UPDATE', [id])
      // One statement: the poller deleted and its connections unregistered (counted); the
      // foreign key's SET NULL, run after it, then finds none left.
      return db.run(
        `WITH gone AS (DELETE FROM worker_pollers WHERE id = $1)
         UPDATE agentless_connections SET poller_id = NULL, updated_ms = $2 WHERE poller_id = $1`,
        [id, now],
      )
    },
    async bumpRevision(pollerId, by = 1) {
      if (pollerId) await db.run('UPDATE worker_pollers SET assignments_revision = assignments_revision + $1 WHERE id = $2', [by, pollerId])
    },
    async pollerLoad(pollerId, hold) {
      if (hold) await holdLimit(db, `poller load ${pollerId}`)
      return (await db.value<number>('SELECT count(*) FROM agentless_connections WHERE poller_id = $1', [pollerId]))!
    },
    goneQuiet: (before) => db.query<PollerRow & Row>('SELECT * FROM worker_pollers WHERE offline_since_ms IS NULL AND coalesce(last_heartbeat_ms, created_ms) < $1', [before]),
    setOffline: (id, since) => db.run('UPDATE worker_pollers SET offline_since_ms = $1 WHERE id = $2 AND offline_since_ms IS NULL', [since, id]),

    connection: (id, hold) => db.one<ConnectionRow & Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.id = $1${hold ? ' FOR UPDATE OF c' : ''}`, [id]),
    connectionByName: (name) => db.one<ConnectionRow & Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${nocase('c.name')} = ${nocase('$1::text')}`, [name]),
    connectionsByNames: (names) => db.query<ConnectionRow & Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${nocase('c.name')} = ANY($1::text[])`, [names.map(lowerAscii)]),
    connectionsByIds,
    /** The connections of `ids`, in that order, a statement per page of ids. */
    async *connectionsInPages(ids) {
      for (let i = 0; i < ids.length; i += PAGE_ROWS) {
        const page = ids.slice(i, i + PAGE_ROWS)
        const byId = new Map((await connectionsByIds(page)).map((r) => [r.id, r]))
        for (const id of page) {
          const row = byId.get(id)
          if (row) yield row
        }
      }
    },
    async insertConnection(v, credentialType, pollerId, now) {
      return (await refusedAsDuplicate(NAME_TAKEN, () =>
        db.value<number>(
          `INSERT INTO agentless_connections (name, address, protocol, port, use_tls, user_name, is_override_defaults, polling_interval_s, timeout_s,
           credential_type, credentials, credentials_updated_ms, poller_id, created_ms, updated_ms)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, ''::bytea, $11, $12, $11, $11) RETURNING id`,
          [...bind(v), credentialType, now, pollerId],
        ),
      ))!
    },
    async updateConnection(id, v, pollerId, now) {
      await refusedAsDuplicate(NAME_TAKEN, () =>
        db.run(
          `UPDATE agentless_connections SET name = $1, address = $2, protocol = $3, port = $4, use_tls = $5, user_name = $6, is_override_defaults = $7,
           polling_interval_s = $8, timeout_s = $9, poller_id = $10, updated_ms = $11 WHERE id = $12`,
          [...bind(v), pollerId, now, id],
        ),
      )
    },
    setCredentials: (id, type, sealed, now) => db.run('UPDATE agentless_connections SET credential_type = $1, credentials = $2, credentials_updated_ms = $3 WHERE id = $4', [type, sealed, now, id]),
    setPoller: (id, pollerId, now) => db.run('UPDATE agentless_connections SET poller_id = $1, updated_ms = $2 WHERE id = $3', [pollerId, now, id]),
    deleteConnection: (id) => db.run('DELETE FROM agentless_connections WHERE id = $1', [id]),
    assigned: (pollerId) => db.query<ConnectionRow & Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.poller_id = $1 ORDER BY c.id`, [pollerId]),
    countAll,

    async list(f, sort, defaults, limit, offset) {
      const w = where(f, 3)
      const total = await countAll()
      const filtered = await filteredCount(where(f), total)
      const rows = await db.query<ConnectionRow & Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${w.sql} ORDER BY ${orderBy(sort, defaults)} LIMIT $1 OFFSET $2`, [limit, offset, ...w.params])
      return { total, filtered, rows }
    },
    async ids(f, sort, defaults, limit = -1, offset = 0) {
      const w = where(f, 3)
      const rows = await db.query<{ id: number }>(`SELECT c.id FROM ${FROM} WHERE ${w.sql} ORDER BY ${orderBy(sort, defaults)} LIMIT $1 OFFSET $2`, [limit < 0 ? null : limit, offset, ...w.params])
      return rows.map((r) => r.id)
    },
    async counts(f) {
      const total = await countAll()
      return { total, filtered: await filteredCount(where(f), total) }
    },

    runsByIds: (runIds) => db.query<RunRow & Row>('SELECT * FROM agentless_runs WHERE run_id = ANY($1::text[])', [runIds]),
    abandonRun: (r) => finishRun(r, true),
    setLatest,
    async storeRun(r: RunWrite, isNew: boolean, latest: boolean) {
      await db.uow.run(async () => {
        if (isNew)
          await db.run(
            `INSERT INTO agentless_runs (run_id, connection_id, poller_id, status, start_ms, end_ms, description, error, recorded_ms)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
            [r.runId, r.connectionId, r.pollerId, r.status, r.startMs, r.endMs, r.description, r.error, r.now],
          )
        else await finishRun(r)
        if (latest) await setLatest(r)
      })
    },
    staleRuns: (before) => db.query<ConnectionRow & Row>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.status = 'Running' AND c.start_ms < $1`, [before]),

    agentsAfter: (afterId, limit) =>
      db.query<AgentAssetRow & Row>(
        `SELECT id, uuid, host_identifier, local_ip_address, switch_ip, switch_name, port_id, port_name, operational_status, connection_status
         FROM agents WHERE id > $1 ORDER BY id LIMIT $2`,
        [afterId, limit],
      ),
    peripheralsOf: (agentIds) =>
      db.query<PeripheralAssetRow & Row>(
        `SELECT agent_id, agent_uuid, device_id, vid, pid, serial_number, gui_vid, gui_pid, caption, dev_icon, approved, present, is_attack_tool, is_vulnerable
         FROM peripherals WHERE agent_id = ANY($1::bigint[]) ORDER BY agent_id, id`,
        [agentIds],
      ),
    connectionsAfter: (afterId, limit) => db.query<ConnectionAssetRow & Row>('SELECT id, name, address, status FROM agentless_connections WHERE id > $1 ORDER BY id LIMIT $2', [afterId, limit]),
    async locations(type: AssetType, keys) {
      const rows = await db.query<{ asset_key: string; location: string }>('SELECT asset_key, location FROM asset_locations WHERE asset_type = $1 AND asset_key = ANY($2::text[])', [type, keys])
      return new Map(rows.map((r) => [r.asset_key, r.location]))
    },
    putLocation: (type, key, location, now) =>
      db.run(
        `INSERT INTO asset_locations (asset_type, asset_key, location, published_ms) VALUES ($1, $2, $3, $4)
         ON CONFLICT (asset_type, asset_key) DO UPDATE SET location = excluded.location, published_ms = excluded.published_ms`,
        [type, key, location, now],
      ),
  }
}
