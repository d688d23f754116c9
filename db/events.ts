import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'
import type { EventBatch, EventCategory, EventInput } from '../lib/events/ports.js'

/** A risky event (migration 010's kinds) with what its notification is made of. */
interface RiskyEvent {
  id: number
  created_ms: number
  details: string
  asset_key: string
  kind: string
  severity: number
  title: string
  host: string
  ip: string | null
  vid: string | null
  pid: string | null
  serial: string | null
  device_id: string | null
  device_name: string | null
  vendor_name: string | null
  device_key: string
}

/**
 * Raises or repeats the risk notifications of the risky events of a batch: one
 * per kind, agent and device (VID:PID:serial) while it is not dismissed. The agent and the
 * peripheral are read as they are now (the gateway writes them before a check-in's
 * events). Events of one notification in the batch make one change of it, with their
 * count, first and last time and the latest one's details. Run in the transaction that
 * wrote the events.
 */
// plan: query-plans "prepared at start" (tests/query-plans.test.ts)
export function riskRaiser(db: DB) {
  const select = (where: string) =>
    db.prepare<unknown[], RiskyEvent>(
      `SELECT e.id, e.created_ms, substr(e.details, 1, 2000) AS details, e.asset_key, k.kind, k.severity, k.title,
       coalesce(a.host_identifier, e.asset_name, e.entity_id) AS host, a.local_ip_address AS ip,
       coalesce(p.vid, e.peripheral_vid) AS vid, coalesce(p.pid, e.peripheral_pid) AS pid, p.serial_number AS serial,
       coalesce(p.device_id, e.peripheral_asset_id) AS device_id, p.gui_pid AS device_name, p.gui_vid AS vendor_name,
       concat_ws(':', coalesce(p.vid, e.peripheral_vid, ''), coalesce(p.pid, e.peripheral_pid, ''),
         coalesce(p.serial_number, e.peripheral_asset_id, '')) AS device_key
     FROM events e NOT INDEXED
     JOIN risk_notification_kinds k ON k.event_code = e.event_code
     LEFT JOIN agents a ON a.uuid = e.asset_key
     -- By (agent_id, device_id): the table's own unique key, there even while a bulk load drops the other indexes.
     LEFT JOIN peripherals p ON p.agent_id = a.id AND p.device_id = e.peripheral_asset_id
     WHERE ${where} AND e.asset_key IS NOT NULL
     ORDER BY e.id`,
    )
  const inRange = select('e.id BETWEEN ? AND ?')
  const byIds = select('e.id IN (SELECT value FROM json_each(?))')
  const codes = db.prepare<[], string>('SELECT event_code FROM risk_notification_kinds').pluck()
  const takeSeqs = db.prepare<[number], number>('UPDATE notification_counter SET seq = seq + ? WHERE id = 1 RETURNING seq').pluck()
  const upsert = db
    .prepare<unknown[], number>(
      `INSERT INTO risk_notifications (kind, severity, agent_uuid, host_identifier, host_ip, vid, pid, serial_number, device_id,
       device_name, vendor_name, device_key, title, description, occurrences, first_ms, last_ms, occurred_seq, change_seq)
     VALUES (${Array(19).fill('?').join(', ')})
     ON CONFLICT (agent_uuid, device_key, kind) WHERE dismissed_ms IS NULL DO UPDATE SET
       occurrences = occurrences + excluded.occurrences,
       last_ms = max(last_ms, excluded.last_ms),
       host_identifier = excluded.host_identifier,
       host_ip = coalesce(excluded.host_ip, host_ip),
       device_name = coalesce(excluded.device_name, device_name),
       vendor_name = coalesce(excluded.vendor_name, vendor_name),
       title = excluded.title,
       description = excluded.description,
       occurred_seq = excluded.occurred_seq,
       change_seq = excluded.change_seq
     RETURNING id`,
    )
    .pluck()
  const link = db.prepare<[number, number]>('INSERT INTO risk_notification_events (notification_id, event_id) VALUES (?, ?)')

  /** Risky events in id order. */
  function raise(events: RiskyEvent[]): number {
    const groups = new Map<string, RiskyEvent[]>()
    for (const e of events) {
      const key = `${e.asset_key}\u0001${e.device_key}\u0001${e.kind}`
      const g = groups.get(key)
      if (g) g.push(e)
      else groups.set(key, [e])
    }
    if (!groups.size) return 0
    // In the order of each one's latest event, as they happened; each takes the next change number.
    const ordered = [...groups.values()].sort((a, b) => a[a.length - 1].id - b[b.length - 1].id)
    let seq = takeSeqs.get(ordered.length)! - ordered.length
    for (const g of ordered) {
      const e = g[g.length - 1]
      let first = e.created_ms
      let last = e.created_ms
      for (const x of g) {
        first = Math.min(first, x.created_ms)
        last = Math.max(last, x.created_ms)
      }
      seq++
      const id = upsert.get(
        e.kind,
        e.severity,
        e.asset_key,
        e.host,
        e.ip,
        e.vid,
        e.pid,
        e.serial,
        e.device_id,
        e.device_name,
        e.vendor_name,
        e.device_key,
        e.title + e.host,
        e.details,
        g.length,
        first,
        last,
        seq,
        seq,
      )!
      for (const x of g) link.run(id, x.id)
    }
    return ordered.length
  }

  return {
    /** The event codes that raise notifications (callers skip a batch without any). */
    codes: (): Set<string> => new Set(codes.all()),
    /** Raises the notifications of the events with ids in [from, to]; answers how many changed. */
    raiseRange: (from: number, to: number): number => raise(inRange.all(from, to)),
    /** Raises the notifications of these events (those of them that are risky); answers how many changed. */
    raiseIds: (ids: number[]): number => raise(byIds.all(JSON.stringify(ids))),
  }
}

const CATEGORIES: ReadonlySet<string> = new Set<EventCategory>(['USB', 'Network', 'System', 'Host', 'General'])

/** The events table's constraints (migration 003), checked before anything is written. */
function checkEvent(e: EventInput) {
  const bad = (what: string) => {
    throw new Error(`event ${JSON.stringify(e.code)}: ${what}`)
  }
  if (!Number.isInteger(e.severity) || e.severity < 0 || e.severity > 7) bad(`severity ${e.severity} is not 0-7`)
  if (!CATEGORIES.has(e.category)) bad(`category ${JSON.stringify(e.category)} is not one of ${[...CATEGORIES].join(', ')}`)
  for (const k of ['code', 'entityId', 'description', 'details'] as const) if (typeof e[k] !== 'string') bad(`${k} is not text`)
}

const COLUMNS = 15
/** Rows per INSERT statement (COLUMNS parameters each); a batch is written in runs of this many. */
const ROWS_PER_INSERT = 64
/** Agents' latest texts (5 parameters each) per UPDATE statement. */
const TEXTS_PER_UPDATE = 64

export function eventsRepo(db: DB) {
  // Positional parameters: binding fifteen by name costs about as much again as the insert.
  // OR FAIL: with the default (ABORT), the insert triggers make SQLite keep a statement
  // journal for every row, to undo a half-done statement; recordMany() runs in a
  // transaction (or savepoint) that is undone whole on any error instead.
  // Several rows per statement: one statement step per row costs about as much as the row.
  const inserts: Statement<unknown[]>[] = []
  const insertOf = (rows: number) =>
    (inserts[rows] ??= db.prepare<unknown[]>(
      `INSERT OR FAIL INTO events (created_ms, event_code, severity, category, entity_id, description, details, hashtags,
       peripheral_icon, asset_key, asset_name, peripheral_asset_id, peripheral_vid, peripheral_pid, alarm_destination_id)
     VALUES ${Array(rows)
       .fill(`(${Array(COLUMNS).fill('?').join(', ')})`)
       .join(', ')}`,
    ))
  // SET expressions read the row's old values: each text moves down one place.
  const shift1 = db.prepare<[string, number]>(
    `UPDATE agents SET latest_minus2_event_text = latest_minus1_event_text, latest_minus1_event_text = latest_event_text,
       latest_event_text = ? WHERE id = ?`,
  )
  const shift2 = db.prepare<[string, string, number]>(`UPDATE agents SET latest_minus2_event_text = latest_event_text, latest_minus1_event_text = ?, latest_event_text = ? WHERE id = ?`)
  const shift3 = db.prepare<[string, string, string, number]>('UPDATE agents SET latest_minus2_event_text = ?, latest_minus1_event_text = ?, latest_event_text = ? WHERE id = ?')
  // Several agents in one statement: (id, how many new texts (1-3), newest, second, third)
  // each, TEXTS_PER_UPDATE agents a statement. One new rev for all of them (migration 032),
  // instead of the trigger's bump and second write per row.
  // Bound VALUES rather than JSON taken apart in SQL, OR FAIL, and no RETURNING on the rev:
  // a statement of several rows that calls a function (or any RETURNING) makes SQLite keep
  // a statement journal and copy there every page the update rewrites first (without it, a
  // call of 32 check-ins x 3 events ran 4-12% faster); an error undoes the caller's whole
  // transaction instead.
  const bumpRev = db.prepare<[]>(`UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev'`)
  const rev = db.prepare<[], number>(`SELECT n FROM row_counts WHERE name = 'agents.rev'`).pluck()
  const shifts: Statement<unknown[]>[] = []
  const shiftOf = (rows: number) =>
    (shifts[rows] ??= db.prepare<unknown[]>(
      `UPDATE OR FAIL agents SET
       latest_minus2_event_text = CASE x.column2 WHEN 1 THEN latest_minus1_event_text WHEN 2 THEN latest_event_text ELSE x.column5 END,
       latest_minus1_event_text = CASE x.column2 WHEN 1 THEN latest_event_text ELSE x.column4 END,
       latest_event_text = x.column3, rev = ?
     FROM (VALUES ${Array(rows).fill('(?, ?, ?, ?, ?)').join(', ')}) AS x
     WHERE agents.id = x.column1`,
    ))
  const shiftMany = (texts: Map<number, string[]>) => {
    bumpRev.run()
    const r = rev.get()!
    const all = [...texts]
    for (let at = 0; at < all.length; at += TEXTS_PER_UPDATE) {
      const run = all.slice(at, at + TEXTS_PER_UPDATE)
      const args: unknown[] = [r]
      for (const [id, list] of run) {
        const [a, b = null, c = null] = [...list].reverse()
        args.push(id, list.length, a, b, c)
      }
      shiftOf(run.length).run(args)
    }
  }
  const risk = riskRaiser(db)
  // The kinds come from the migrations (010, 027); nothing writes them while the server runs.
  const riskCodes = risk.codes()

  const write = (items: EventBatch[]): number[][] => {
    const rows: { createdMs: number; e: EventInput }[] = []
    for (const it of items) for (const e of it.events) rows.push({ createdMs: it.createdMs, e })
    const ids: number[] = new Array(rows.length)
    const args: unknown[] = []
    for (let at = 0; at < rows.length; at += ROWS_PER_INSERT) {
      const run = rows.slice(at, at + ROWS_PER_INSERT)
      args.length = 0
      for (const { createdMs, e } of run)
        args.push(
          createdMs,
          e.code,
          e.severity,
          e.category,
          e.entityId,
          e.description,
          e.details,
          e.hashtags ?? null,
          e.peripheralIcon ?? -1,
          e.assetKey ?? null,
          e.assetName ?? null,
          e.peripheralAssetId ?? null,
          e.peripheralVid ?? null,
          e.peripheralPid ?? null,
          e.alarmDestinationId ?? null,
        )
      // One statement on the one connection: AUTOINCREMENT gives its rows consecutive ids, in order.
      const last = Number(insertOf(run.length).run(args).lastInsertRowid)
      for (let i = 0; i < run.length; i++) ids[at + i] = last - run.length + 1 + i
    }

    // Their deliveries to alarm destinations are queued behind, by the delivery worker
    // (db/alarm-queue.ts; migration 035).

    // Each agent's three latest texts: the last three of its events in the batch, in order.
    const texts = new Map<number, string[]>()
    for (const it of items) {
      if (it.agentId === undefined || it.events.length === 0) continue
      const list = texts.get(it.agentId) ?? []
      for (const e of it.events.slice(-3)) list.push(e.description)
      texts.set(it.agentId, list.slice(-3))
    }
    if (texts.size === 1) {
      const [[agentId, list]] = texts
      const [a, b, c] = list.reverse()
      if (c !== undefined) shift3.run(c, b, a, agentId)
      else if (b !== undefined) shift2.run(b, a, agentId)
      else shift1.run(a, agentId)
    } else if (texts.size > 1) {
      shiftMany(texts)
    }

    const risky: number[] = []
    for (let i = 0; i < rows.length; i++) if (rows[i].e.assetKey && riskCodes.has(rows[i].e.code)) risky.push(ids[i])
    if (risky.length) risk.raiseIds(risky)

    const out: number[][] = []
    let at = 0
    for (const it of items) {
      out.push(ids.slice(at, at + it.events.length))
      at += it.events.length
    }
    return out
  }
  const writeAlone = db.transaction(write)

  /**
   * Stores batches of events in order, all or none, and answers each batch's ids
   * (increasing, in the order given). With `agentId`, that agent's three latest event texts
   * follow its events (one update for the whole call, so that a first check-in with many
   * peripherals, or a sweep disconnecting thousands of agents, rewrites each agent's search
   * text once). Risky events raise their notifications (riskRaiser) once for the call, in
   * the same transaction.
   *
   * Inside the caller's transaction it adds no savepoint: with one open, SQLite copies
   * every page the inserts touch to a sub-journal, as much again as the writes. The
   * events are checked first, so that no constraint can stop the batch half-way; any
   * other error reaches the caller, whose transaction is then rolled back.
   */
  function recordMany(items: EventBatch[]): number[][] {
    for (const it of items) for (const e of it.events) checkEvent(e)
    if (!items.some((it) => it.events.length > 0)) return items.map(() => [])
    return db.inTransaction ? write(items) : writeAlone(items)
  }

  return {
    recordMany,
    /** One batch (recordMany). */
    record(createdMs: number, events: EventInput[], agentId?: number): number[] {
      return recordMany([{ createdMs, events, agentId }])[0]
    },
  }
}
export type EventsRepo = ReturnType<typeof eventsRepo>

/** Raises the risk notifications of the events with ids in [from, to] written in bulk (the seeds), a slice at a time. */
export function raiseRisks(db: DB, from: number, to: number, slice = 65_536): number {
  const risk = riskRaiser(db)
  let changes = 0
  for (let lo = from; lo <= to; lo += slice) changes += risk.raiseRange(lo, Math.min(to, lo + slice - 1))
  return changes
}
