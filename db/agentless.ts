// Agentless connections, worker pollers, check runs and the asset feed's last published
// locations.
import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'
import { contains, orderBy } from './sql.js'
import type { Sort } from '../lib/ports.js'
import { inPages } from './exports.js'
import type {
  AgentAssetRow,
  AgentlessFilter,
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
} from '../lib/agentless/ports.js'

/** A reported run as written. */
export interface RunWrite {
  runId: string
  connectionId: number
  pollerId: string
  status: string
  startMs: number
  endMs: number | null
  description: string | null
  error: string | null
  now: number
}

export const MAX_PREVIOUS_ERRORS = 10
// Runs kept per connection beyond the previous errors: enough to answer a retried report.
const KEPT_OTHER_RUNS = 10

const FROM = 'agentless_connections c LEFT JOIN worker_pollers p ON p.id = c.poller_id'
const COLUMNS = 'c.*, p.name AS poller_name'
const FOLD = 'agentless_fold'

/** Sort columns of the status list; the polling options sort by the value in use. */
function sortColumns(d: PollingDefaults): Record<string, string> {
  return {
    id: 'c.id',
    computerName: 'c.name COLLATE NOCASE',
    address: 'c.address COLLATE NOCASE',
    protocol: 'c.protocol',
    port: 'c.port',
    userName: 'c.user_name COLLATE NOCASE',
    isOverrideDefaults: 'c.is_override_defaults',
    pollingIntervalSeconds: `coalesce(c.polling_interval_s, ${Math.trunc(d.intervalSeconds)})`,
    timeoutSeconds: `coalesce(c.timeout_s, ${Math.trunc(d.timeoutSeconds)})`,
    pollerName: 'p.name COLLATE NOCASE',
    statusString: 'c.status',
    statusDescription: 'c.status_description COLLATE NOCASE',
    statusErrorDescription: 'c.status_error COLLATE NOCASE',
    startTime: 'c.start_ms',
    endTime: 'c.end_ms',
    durationMs: '(c.end_ms - c.start_ms)',
    lastReachableTime: 'c.last_reachable_ms',
    createdTime: 'c.created_ms',
    updatedTime: 'c.updated_ms',
  }
}
const NULLABLE = ['pollerName', 'statusDescription', 'statusErrorDescription', 'startTime', 'endTime', 'durationMs', 'lastReachableTime'] as const

/** The filter as SQL on `c` (connections) and `p` (pollers). Terms are folded like the columns (all of Unicode). */
function where(f: AgentlessFilter): { sql: string; params: unknown[] } {
  const parts: string[] = []
  const params: unknown[] = []
  // An ASCII term is SQLite's own case-insensitive LIKE (fast); any other folds both sides.
  const match = (column: string, term: string): [string, unknown] =>
    /^[\x00-\x7f]*$/.test(term) ? [`${column} LIKE ? ESCAPE '\\'`, contains(term)] : [`instr(${FOLD}(${column}), ?) > 0`, term.toLowerCase()]
  const has = (column: string, term: string) => {
    const [sql, param] = match(column, term)
    parts.push(sql)
    params.push(param)
  }
  const prevHas = (term: string): [string, unknown] => {
    const [sql, param] = match(`(e.value ->> '$.errorDescription')`, term)
    return [`(c.prev_errors <> '[]' AND EXISTS (SELECT 1 FROM json_each(c.prev_errors) e WHERE ${sql}))`, param]
  }
  if (f.computerName !== undefined) has('c.name', f.computerName)
  if (f.statusString !== undefined) has('c.status', f.statusString)
  if (f.statusDescription !== undefined) has('c.status_description', f.statusDescription)
  if (f.statusErrorDescription !== undefined) has('c.status_error', f.statusErrorDescription)
  if (f.prevRunningErrors !== undefined) {
    const [sql, param] = prevHas(f.prevRunningErrors)
    parts.push(sql)
    params.push(param)
  }
  if (f.globalSearch !== undefined) {
    const columns = ['c.name', 'c.address', 'c.protocol', 'c.user_name', 'p.name', 'c.status', 'c.status_description', 'c.status_error']
    const each = [...columns.map((c) => match(c, f.globalSearch!)), prevHas(f.globalSearch)]
    parts.push(`(${each.map(([sql]) => sql).join(' OR ')})`)
    params.push(...each.map(([, param]) => param))
  }
  const range = (column: string, from: number | undefined, to: number | undefined, toExclusive = false) => {
    if (from !== undefined) {
      parts.push(`${column} >= ?`)
      params.push(from)
    }
    if (to !== undefined) {
      parts.push(`${column} ${toExclusive ? '<' : '<='} ?`)
      params.push(to)
    }
  }
  if (f.startDay) range('c.start_ms', f.startDay[0], f.startDay[1], true)
  if (f.endDay) range('c.end_ms', f.endDay[0], f.endDay[1], true)
  range('c.start_ms', f.fromStart, f.toStart)
  range('c.end_ms', f.fromEnd, f.toEnd)
  if (f.isOverrideDefaults !== undefined) {
    parts.push('c.is_override_defaults = ?')
    params.push(f.isOverrideDefaults ? 1 : 0)
  }
  return { sql: parts.length ? parts.join(' AND ') : '1', params }
}

export function agentlessRepo(db: DB) {
  // Case folding of all of Unicode for "contains" (SQLite's own covers ASCII only).
  db.function(FOLD, { deterministic: true }, (s: unknown) => (s === null || s === undefined ? null : String(s).toLowerCase()))

  const statements = new Map<string, Statement<unknown[]>>()
  const cached = (sql: string): Statement<unknown[]> => {
    let s = statements.get(sql)
    if (!s) {
      if (statements.size >= 64) statements.clear()
      s = db.prepare<unknown[]>(sql)
      statements.set(sql, s)
    }
    return s
  }

  const pollerCounts = `SELECT p.*, count(c.id) AS assigned,
      coalesce(sum(c.status = 'Reachable'), 0) AS reachable,
      coalesce(sum(c.status IN ('Unreachable', 'Failed')), 0) AS failing,
      coalesce(sum(c.status = 'Pending'), 0) AS pending
    FROM worker_pollers p LEFT JOIN agentless_connections c ON c.poller_id = p.id`

  const q = {
    pollerByHash: db.prepare<[string], PollerRow>('SELECT * FROM worker_pollers WHERE credential_hash = ?'),
    poller: db.prepare<[string], PollerRow>('SELECT * FROM worker_pollers WHERE id = ?'),
    pollerByName: db.prepare<[string], PollerRow>('SELECT * FROM worker_pollers WHERE name = ?'),
    pollers: db.prepare<[], PollerWithCounts>(`${pollerCounts} GROUP BY p.id ORDER BY p.name COLLATE NOCASE, p.id`),
    pollerWithCounts: db.prepare<[string], PollerWithCounts>(`${pollerCounts} WHERE p.id = ? GROUP BY p.id`),
    insertPoller: db.prepare(
      `INSERT INTO worker_pollers (id, name, credential_hash, host_name, ip_address, version, created_ms)
       VALUES (@id, @name, @hash, @hostName, @ip, @version, @now)`,
    ),
    setActivated: db.prepare<[number, number, string | null, string]>(
      `UPDATE worker_pollers SET is_activated = ?, activation_changed_ms = ?, activation_changed_by = ?,
         assignments_revision = assignments_revision + 1 WHERE id = ?`,
    ),
    heartbeat: db.prepare(
      `UPDATE worker_pollers SET last_heartbeat_ms = @now, version = @version, host_name = coalesce(@hostName, host_name),
         ip_address = @ip, started_ms = @startedMs, active_checks = @activeChecks, offline_since_ms = NULL WHERE id = @id`,
    ),
    touch: db.prepare<[string, string]>('UPDATE worker_pollers SET ip_address = ? WHERE id = ?'),
    deletePoller: db.prepare<[string]>('DELETE FROM worker_pollers WHERE id = ?'),
    unregisterAll: db.prepare<[number, string]>('UPDATE agentless_connections SET poller_id = NULL, updated_ms = ? WHERE poller_id = ?'),
    bump: db.prepare<[number, string]>('UPDATE worker_pollers SET assignments_revision = assignments_revision + ? WHERE id = ?'),
    load: db.prepare<[string], number>('SELECT count(*) FROM agentless_connections WHERE poller_id = ?'),
    goneQuiet: db.prepare<[number], PollerRow>('SELECT * FROM worker_pollers WHERE offline_since_ms IS NULL AND coalesce(last_heartbeat_ms, created_ms) < ?'),
    setOffline: db.prepare<[number, string]>('UPDATE worker_pollers SET offline_since_ms = ? WHERE id = ? AND offline_since_ms IS NULL'),

    connection: db.prepare<[number], ConnectionRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.id = ?`),
    connectionByName: db.prepare<[string], ConnectionRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.name = ?`),
    // The name column's NOCASE collation applies to IN as to =, and its unique index serves both.
    byNames: db.prepare<[string], ConnectionRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.name IN (SELECT value FROM json_each(?))`),
    insertConnection: db.prepare(
      `INSERT INTO agentless_connections (name, address, protocol, port, use_tls, user_name, credential_type, credentials,
         credentials_updated_ms, is_override_defaults, polling_interval_s, timeout_s, poller_id, created_ms, updated_ms)
       VALUES (@name, @address, @protocol, @port, @useTls, @userName, @credentialType, x'', @now, @override, @interval, @timeout,
         @pollerId, @now, @now)`,
    ),
    updateConnection: db.prepare(
      `UPDATE agentless_connections SET name = @name, address = @address, protocol = @protocol, port = @port, use_tls = @useTls,
         user_name = @userName, is_override_defaults = @override, polling_interval_s = @interval, timeout_s = @timeout,
         poller_id = @pollerId, updated_ms = @now WHERE id = @id`,
    ),
    setCredentials: db.prepare<[string, Buffer, number, number]>('UPDATE agentless_connections SET credential_type = ?, credentials = ?, credentials_updated_ms = ? WHERE id = ?'),
    setPoller: db.prepare<[string | null, number, number]>('UPDATE agentless_connections SET poller_id = ?, updated_ms = ? WHERE id = ?'),
    deleteConnection: db.prepare<[number]>('DELETE FROM agentless_connections WHERE id = ?'),
    assigned: db.prepare<[string], ConnectionRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.poller_id = ? ORDER BY c.id`),
    countAll: db.prepare<[], number>('SELECT count(*) FROM agentless_connections'),
    byIds: db.prepare<[string], ConnectionRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.id IN (SELECT value FROM json_each(?))`),

    runs: db.prepare<[string], RunRow>('SELECT * FROM agentless_runs WHERE run_id IN (SELECT value FROM json_each(?))'),
    insertRun: db.prepare(
      `INSERT INTO agentless_runs (run_id, connection_id, poller_id, status, start_ms, end_ms, description, error, recorded_ms)
       VALUES (@runId, @connectionId, @pollerId, @status, @startMs, @endMs, @description, @error, @now)`,
    ),
    finishRun: db.prepare(
      `UPDATE agentless_runs SET status = @status, start_ms = @startMs, end_ms = @endMs, description = @description, error = @error,
         recorded_ms = @now WHERE run_id = @runId`,
    ),
    abandonRun: db.prepare(
      `UPDATE agentless_runs SET status = @status, start_ms = @startMs, end_ms = @endMs, description = @description, error = @error,
         recorded_ms = @now WHERE run_id = @runId AND status = 'Running'`,
    ),
    setLatest: db.prepare(
      `UPDATE agentless_connections SET status = @status, status_description = @description, status_error = @error, run_id = @runId,
         start_ms = @startMs, end_ms = @endMs,
         last_reachable_ms = CASE WHEN @status = 'Reachable' THEN max(coalesce(last_reachable_ms, 0), @endMs) ELSE last_reachable_ms END,
         last_result = CASE WHEN @status = 'Running' THEN last_result ELSE @status END,
         prev_errors = @prevErrors
       WHERE id = @connectionId`,
    ),
    failedBefore: db.prepare<[number, string, number, number], RunRow>(
      `SELECT * FROM agentless_runs WHERE connection_id = ? AND run_id <> ? AND status IN ('Unreachable', 'Failed')
         AND end_ms IS NOT NULL AND start_ms <= ? ORDER BY start_ms DESC, recorded_ms DESC LIMIT ?`,
    ),
    pruneRuns: db.prepare(
      `DELETE FROM agentless_runs WHERE connection_id = @id AND start_ms < @before AND run_id IN (
         SELECT run_id FROM (
           SELECT run_id, status IN ('Unreachable', 'Failed') AS failed,
             row_number() OVER (PARTITION BY status IN ('Unreachable', 'Failed') ORDER BY start_ms DESC, recorded_ms DESC) AS n
           FROM agentless_runs WHERE connection_id = @id)
         WHERE (failed AND n > @failedKept) OR (NOT failed AND n > @otherKept))`,
    ),
    staleRuns: db.prepare<[number], ConnectionRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.status = 'Running' AND c.start_ms < ?`),

    agentsAfter: db.prepare<[number, number], AgentAssetRow>(
      `SELECT id, uuid, host_identifier, local_ip_address, switch_ip, switch_name, port_id, port_name, operational_status, connection_status
       FROM agents WHERE id > ? ORDER BY id LIMIT ?`,
    ),
    peripheralsOf: db.prepare<[string], PeripheralAssetRow>(
      `SELECT agent_id, agent_uuid, device_id, vid, pid, serial_number, gui_vid, gui_pid, caption, dev_icon, approved, present, is_attack_tool, is_vulnerable
       FROM peripherals WHERE agent_id IN (SELECT value FROM json_each(?)) ORDER BY agent_id, id`,
    ),
    connectionsAfter: db.prepare<[number, number], ConnectionAssetRow>('SELECT id, name, address, status FROM agentless_connections WHERE id > ? ORDER BY id LIMIT ?'),
    locations: db.prepare<[string, string], { asset_key: string; location: string }>(
      'SELECT asset_key, location FROM asset_locations WHERE asset_type = ? AND asset_key IN (SELECT value FROM json_each(?))',
    ),
    putLocation: db.prepare<[string, string, string, number]>(
      `INSERT INTO asset_locations (asset_type, asset_key, location, published_ms) VALUES (?, ?, ?, ?)
       ON CONFLICT (asset_type, asset_key) DO UPDATE SET location = excluded.location, published_ms = excluded.published_ms`,
    ),
  }

  /** Makes the run the connection's latest, with the failed runs before it, and drops history no longer shown. */
  function setLatest(r: { connectionId: number; runId: string; status: string; startMs: number; endMs: number | null; description: string | null; error: string | null }) {
    const prev = runHistory(r.connectionId, r.runId, r.startMs)
    q.setLatest.run({ ...r, prevErrors: JSON.stringify(prev) })
    q.pruneRuns.run({ id: r.connectionId, before: r.startMs, failedKept: MAX_PREVIOUS_ERRORS + 1, otherKept: KEPT_OTHER_RUNS })
  }

  function runHistory(connectionId: number, latestRunId: string, latestStartMs: number): PreviousError[] {
    return q.failedBefore.all(connectionId, latestRunId, latestStartMs, MAX_PREVIOUS_ERRORS).map((r) => ({
      startTime: new Date(r.start_ms).toISOString(),
      endTime: new Date(r.end_ms!).toISOString(),
      statusString: r.status as PreviousError['statusString'],
      errorDescription: (r.error ?? '').slice(0, 2000),
    }))
  }

  return {
    pollerByCredential: (hash: string) => q.pollerByHash.get(hash),
    poller: (id: string) => q.poller.get(id.toLowerCase()),
    pollerByName: (name: string) => q.pollerByName.get(name),
    pollers: () => q.pollers.all(),
    pollerWithCounts: (id: string) => q.pollerWithCounts.get(id.toLowerCase()),
    insertPoller(p: { id: string; name: string; hash: string; hostName: string | null; ip: string | null; version: string; now: number }) {
      q.insertPoller.run(p)
    },
    setActivated: (id: string, on: boolean, now: number, by: string | null) => q.setActivated.run(on ? 1 : 0, now, by, id).changes,
    heartbeat(p: { id: string; now: number; version: string; hostName: string | null; ip: string | null; startedMs: number | null; activeChecks: number | null }) {
      q.heartbeat.run(p)
    },
    /** The source address of the poller's latest call. */
    touch: (id: string, ip: string) => q.touch.run(ip, id),
    /** Deletes the poller; its connections stay, unregistered. Answers how many were registered to it. */
    deletePoller(id: string, now: number): number {
      const n = q.unregisterAll.run(now, id).changes
      q.deletePoller.run(id)
      return n
    },
    bumpRevision(pollerId: string | null, by = 1) {
      if (pollerId) q.bump.run(by, pollerId)
    },
    pollerLoad: (pollerId: string) => q.load.pluck().get(pollerId) as number,
    /** Pollers whose last sign of life is older than `before` and that are not marked offline yet. */
    goneQuiet: (before: number) => q.goneQuiet.all(before),
    setOffline: (id: string, since: number) => q.setOffline.run(since, id).changes,

    connection: (id: number) => q.connection.get(id),
    connectionByName: (name: string) => q.connectionByName.get(name),
    connectionsByNames: (names: readonly string[]) => q.byNames.all(JSON.stringify(names)),
    connectionsByIds: (ids: readonly number[]) => q.byIds.all(JSON.stringify(ids)),
    /** The connections of `ids`, in that order, read a page at a time with other work let in between (exports, very large pages). */
    connectionsInPages: (ids: readonly number[]) => inPages(ids, (page) => q.byIds.all(JSON.stringify(page))),
    /** Inserts a connection; its credentials are set next (they are sealed with its id). */
    insertConnection(v: ConnectionValues, credentialType: 'Password' | 'PrivateKey', pollerId: string | null, now: number): number {
      return Number(q.insertConnection.run({ ...bind(v), credentialType, pollerId, now }).lastInsertRowid)
    },
    updateConnection(id: number, v: ConnectionValues, pollerId: string | null, now: number) {
      q.updateConnection.run({ ...bind(v), pollerId, now, id })
    },
    setCredentials: (id: number, type: 'Password' | 'PrivateKey', sealed: Buffer, now: number) => q.setCredentials.run(type, sealed, now, id),
    setPoller: (id: number, pollerId: string | null, now: number) => q.setPoller.run(pollerId, now, id),
    deleteConnection: (id: number) => q.deleteConnection.run(id).changes,
    assigned: (pollerId: string) => q.assigned.all(pollerId),
    countAll: () => q.countAll.pluck().get() as number,

    /** A page of the status list, with the counts. */
    list(f: AgentlessFilter, sort: Sort, defaults: PollingDefaults, limit: number, offset: number) {
      const w = where(f)
      const total = q.countAll.pluck().get() as number
      const filtered =
        w.sql === '1'
          ? total
          : (cached(`SELECT count(*) FROM ${FROM} WHERE ${w.sql}`)
              .pluck()
              .get(...w.params) as number)
      const rows = cached(`SELECT ${COLUMNS} FROM ${FROM} WHERE ${w.sql} ORDER BY ${orderBy(sort, sortColumns(defaults), 'c.id', NULLABLE)} LIMIT ? OFFSET ?`).all(
        ...w.params,
        limit,
        offset,
      ) as ConnectionRow[]
      return { total, filtered, rows }
    },

    /** The ids of the matching connections, in order (exports and large pages read the rows a page at a time). */
    ids(f: AgentlessFilter, sort: Sort, defaults: PollingDefaults, limit = -1, offset = 0): number[] {
      const w = where(f)
      return cached(`SELECT c.id FROM ${FROM} WHERE ${w.sql} ORDER BY ${orderBy(sort, sortColumns(defaults), 'c.id', NULLABLE)} LIMIT ? OFFSET ?`)
        .pluck()
        .all(...w.params, limit, offset) as number[]
    },
    /** The counts of the status list. */
    counts(f: AgentlessFilter): { total: number; filtered: number } {
      const w = where(f)
      const total = q.countAll.pluck().get() as number
      return {
        total,
        filtered:
          w.sql === '1'
            ? total
            : (cached(`SELECT count(*) FROM ${FROM} WHERE ${w.sql}`)
                .pluck()
                .get(...w.params) as number),
      }
    },

    runsByIds: (runIds: readonly string[]) => q.runs.all(JSON.stringify(runIds)),
    abandonRun(r: { runId: string; status: string; startMs: number; endMs: number | null; description: string | null; error: string | null; now: number }): boolean {
      return q.abandonRun.run(r).changes > 0
    },
    setLatest,
    /** Writes a reported run, new or the end of one Running, and when `latest` makes it the connection's latest. */
    storeRun(r: RunWrite, isNew: boolean, latest: boolean) {
      if (isNew) q.insertRun.run(r)
      else q.finishRun.run(r)
      if (latest) setLatest(r)
    },
    /** Connections whose latest run has been Running since before `before`. */
    staleRuns: (before: number) => q.staleRuns.all(before),

    agentsAfter: (afterId: number, limit: number) => q.agentsAfter.all(afterId, limit),
    peripheralsOf: (agentIds: readonly number[]) => q.peripheralsOf.all(JSON.stringify(agentIds)),
    connectionsAfter: (afterId: number, limit: number) => q.connectionsAfter.all(afterId, limit),
    /** The locations last published, by asset key. */
    locations(type: AssetType, keys: readonly string[]): Map<string, string> {
      return new Map(q.locations.all(type, JSON.stringify(keys)).map((r) => [r.asset_key, r.location]))
    },
    putLocation: (type: AssetType, key: string, location: string, now: number) => q.putLocation.run(type, key, location, now),
  }
}
export type AgentlessRepo = ReturnType<typeof agentlessRepo>

function bind(v: ConnectionValues) {
  return {
    name: v.name,
    address: v.address,
    protocol: v.protocol,
    port: v.port,
    useTls: v.useTls ? 1 : 0,
    userName: v.userName,
    override: v.isOverrideDefaults ? 1 : 0,
    interval: v.pollingIntervalSeconds,
    timeout: v.timeoutSeconds,
  }
}
