// npm run pg-load -- --from <data dir | .sqlite file> --to postgres://…/<database> [--replace] [--sample 50]
//
// Copies a seeded SQLite data dir (npm run seed, npm run seed-events) into a fresh migrated
// PostgreSQL database, so that both backends answer over the same data (the benchmarks'
// `--backend postgres`). Every table both schemas have is copied, the columns both have:
// agents, peripherals, their texts and approvals, events, the audit trail, notifications,
// the catalogue… (SQLite's own structures, its full-text and index tables, have no
// counterpart and are left out). Rows go in as multi-row INSERTs of one array per column
// (unnest), a batch in flight while the next is read. For speed the tables' secondary
// indexes are dropped first and built again at the end, and their user triggers are off
// meanwhile; what those triggers keep (record_counts, table_rows, license_seats) is
// recounted. Then the sequences are moved past the ids copied, every day's partition exists,
// and ANALYZE runs.
//
// It ends with a check: the row count of every table copied is the same on both sides, and
// `--sample` rows per table, picked at random, are equal column by column.
import path from 'node:path'
import { parseArgs } from 'node:util'
import { pathToFileURL } from 'node:url'
import fs from 'node:fs'
import Database from 'better-sqlite3'
import pg from 'pg'
import crypto from 'node:crypto'
import { connectPostgres, migratePostgres, pgMigrationFiles } from '../db/postgres/index.js'
import { pgEventTextDays } from '../db/postgres/events-text-days.js'

export interface LoadOptions {
  /** Drop the database first when it exists (otherwise an existing one is an error). */
  replace?: boolean
  /** Rows compared per table at the end (0: counts only). */
  sample?: number
  /** Progress lines (default: stderr). */
  log?: (line: string) => void
}

export interface LoadReport {
  tables: { name: string; rows: number; ms: number }[]
  indexesMs: number
  totalMs: number
  /** Differences found by the check (none when equal). */
  mismatches: string[]
}

/** The database of a URL replaced by `name` (the server's maintenance database, to create and drop). */
export const withDatabase = (url: string, name: string) => {
  const u = new URL(url)
  u.pathname = `/${name}`
  return u.toString()
}

const ident = (s: string) => `"${s.replace(/"/g, '""')}"`
/** Rows per INSERT: big enough that a statement's overhead does not count, small enough to stay well inside memory. */
const BATCH_ROWS = 5000

/** Whether a database of that name exists on the server of `url`. */
async function databaseExists(admin: pg.Client, name: string) {
  return ((await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name])).rowCount ?? 0) > 0
}

/**
 * A migrated database to copy new ones from, one per set of migrations (named by their
 * hash): migrating takes longer than copying. Made under a working name and renamed once
 * migrated, so that a half-made one is never used.
 */
async function migratedTemplate(admin: pg.Client, url: string): Promise<string> {
  const h = crypto.createHash('sha256')
  for (const f of pgMigrationFiles()) h.update(path.basename(f.file)).update(fs.readFileSync(f.file))
  const name = `prime_load_template_${h.digest('hex').slice(0, 12)}`
  if (await databaseExists(admin, name)) return name
  const building = `${name}_building_${process.pid}`
  await admin.query(`CREATE DATABASE ${ident(building)}`)
  const c = new pg.Client({ connectionString: withDatabase(url, building) })
  await c.connect()
  try {
    await migratePostgres(c)
  } finally {
    await c.end()
  }
  await admin.query(`ALTER DATABASE ${ident(building)} RENAME TO ${ident(name)}`)
  return name
}

/** A data dir's SQLite file, or the file itself. */
export const sqliteFileOf = (from: string) => (fs.statSync(from).isDirectory() ? path.join(from, 'prime.sqlite') : from)

interface Column {
  name: string
  type: string
}
interface Table {
  name: string
  columns: Column[]
  /** Its primary key's columns (for the sample check). */
  key: string[]
  rows: number
}

/** Tables in an order where each comes after those its foreign keys reference. */
function byReferences(names: string[], refs: { from: string; to: string }[]): string[] {
  const out: string[] = []
  const seen = new Set<string>()
  const visit = (n: string, path: Set<string>) => {
    if (seen.has(n) || path.has(n)) return
    path.add(n)
    for (const r of refs) if (r.from === n && r.to !== n && names.includes(r.to)) visit(r.to, path)
    seen.add(n)
    out.push(n)
  }
  for (const n of names) visit(n, new Set())
  return out
}

/** A value of SQLite as PostgreSQL's column takes it. */
function pgValue(v: unknown, type: string): unknown {
  if (v === null || v === undefined) return null
  if (type === 'boolean') return v === 1 || v === true || v === '1' || v === 'true'
  if (typeof v === 'bigint') return v.toString()
  return v
}

/** A value as both sides compare it: numbers and strings by their text, booleans as 0/1. */
function comparable(v: unknown): string | null {
  if (v === null || v === undefined) return null
  if (typeof v === 'boolean') return v ? '1' : '0'
  if (Buffer.isBuffer(v)) return v.toString('hex')
  if (typeof v === 'object') return JSON.stringify(v)
  return String(v)
}

export async function loadIntoPostgres(from: string, url: string, opts: LoadOptions = {}): Promise<LoadReport> {
  const log = opts.log ?? ((l: string) => console.error(l))
  const t0 = performance.now()
  const name = decodeURIComponent(new URL(url).pathname.slice(1))
  if (!/^[A-Za-z_][\w]*$/.test(name)) throw new Error(`--to must name a database (letters, digits, _), got "${name}"`)
  const file = sqliteFileOf(from)
  const lite = new Database(file, { readonly: true, fileMustExist: true })

  // A fresh database, migrated.
  const admin = new pg.Client({ connectionString: withDatabase(url, 'postgres') })
  await admin.connect()
  try {
    if (await databaseExists(admin, name)) {
      if (!opts.replace) throw new Error(`database ${name} exists: pass --replace to drop it first`)
      await admin.query(`DROP DATABASE ${ident(name)} WITH (FORCE)`)
    }
    await admin.query(`CREATE DATABASE ${ident(name)} TEMPLATE ${ident(await migratedTemplate(admin, url))}`)
  } finally {
    await admin.end()
  }
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const report: LoadReport = { tables: [], indexesMs: 0, totalMs: 0, mismatches: [] }
  try {
    // A no-op when the template is current (it is made from these migrations).
    await migratePostgres(client)
    log(`database ${name} made and migrated in ${((performance.now() - t0) / 1000).toFixed(1)} s`)
    // The copy is redone from the file if it is lost: no commit needs to wait for the disk.
    await client.query(`SET synchronous_commit = off; SET maintenance_work_mem = '512MB'`)

    // The tables both sides have (the partitioned parents, not their partitions).
    const pgTables = (
      await client.query<{ name: string }>(
        `SELECT c.relname AS name FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND NOT c.relispartition AND c.relname <> 'schema_migrations'`,
      )
    ).rows.map((r) => r.name)
    const liteTables = new Set(lite.prepare(`SELECT name FROM sqlite_master WHERE type = 'table'`).pluck().all() as string[])
    const tables: Table[] = []
    for (const t of pgTables.filter((t) => liteTables.has(t))) {
      const liteColumns = new Set((lite.prepare(`PRAGMA table_info(${ident(t)})`).all() as { name: string }[]).map((c) => c.name))
      const columns = (
        await client.query<Column>(
          `SELECT a.attname AS name, format_type(a.atttypid, NULL) AS type FROM pg_attribute a
           WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = '' ORDER BY a.attnum`,
          [t],
        )
      ).rows.filter((c) => liteColumns.has(c.name))
      const key = (
        await client.query<{ name: string }>(
          `SELECT a.attname AS name FROM pg_constraint k CROSS JOIN unnest(k.conkey) WITH ORDINALITY AS u(attnum, i)
           JOIN pg_attribute a ON a.attrelid = k.conrelid AND a.attnum = u.attnum
           WHERE k.conrelid = $1::regclass AND k.contype = 'p' ORDER BY u.i`,
          [t],
        )
      ).rows.map((r) => r.name)
      const rows = lite
        .prepare(`SELECT count(*) FROM ${ident(t)}`)
        .pluck()
        .get() as number
      if (rows > 0 && columns.length) tables.push({ name: t, columns, key, rows })
    }
    const refs = (
      await client.query<{ from: string; to: string }>(
        `SELECT conrelid::regclass::text AS "from", confrelid::regclass::text AS "to" FROM pg_constraint WHERE contype = 'f' AND connamespace = 'public'::regnamespace`,
      )
    ).rows
    const order = byReferences(
      tables.map((t) => t.name),
      refs,
    ).map((n) => tables.find((t) => t.name === n)!)

    // Secondary indexes (not a constraint's, not unique) are built once at the end: faster than row by row.
    // A partitioned table's index reads back as `ON ONLY` (the parent's alone, left invalid and
    // built on no partition): made again without it, it is built on every partition.
    const indexes = (
      await client.query<{ name: string; def: string }>(
        `SELECT c.relname AS name, pg_get_indexdef(i.indexrelid) AS def FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_class t ON t.oid = i.indrelid
         WHERE t.relname = ANY($1) AND NOT t.relispartition AND NOT i.indisunique
           AND NOT EXISTS (SELECT 1 FROM pg_constraint k WHERE k.conindid = i.indexrelid)`,
        [order.map((t) => t.name)],
      )
    ).rows.map((ix) => ({ ...ix, def: ix.def.replace(/ ON ONLY /, ' ON ') }))
    for (const ix of indexes) await client.query(`DROP INDEX ${ident(ix.name)}`)
    for (const t of order) await client.query(`ALTER TABLE ${ident(t.name)} DISABLE TRIGGER USER`)

    // Every day the records span has its partition before they come.
    for (const t of ['events', 'audit_trail']) {
      if (!order.some((x) => x.name === t)) continue
      const span = lite.prepare(`SELECT min(created_ms) AS lo, max(created_ms) AS hi FROM ${t}`).get() as { lo: number; hi: number }
      await client.query('SELECT ensure_partitions($1, $2, $3)', [t, span.lo, span.hi])
    }

    for (const t of order) {
      const t1 = performance.now()
      // What the migrations put there (built-in catalogue entries, counters) is replaced by the file's.
      await client.query(`DELETE FROM ${ident(t.name)}`)
      const cols = t.columns.map((c) => ident(c.name)).join(', ')
      const sql = `INSERT INTO ${ident(t.name)} (${cols}) OVERRIDING SYSTEM VALUE SELECT * FROM unnest(${t.columns.map((c, i) => `$${i + 1}::${c.type}[]`).join(', ')})`
      const read = lite.prepare(`SELECT ${cols} FROM ${ident(t.name)}`).raw()
      let batch: unknown[][] = t.columns.map(() => [])
      let n = 0
      let inFlight: Promise<unknown> | null = null
      let done = 0
      let lastLog = performance.now()
      const send = async () => {
        const values = batch
        const size = values[0].length
        batch = t.columns.map(() => [])
        n = 0
        // One batch on the wire while the next is read from the file.
        if (inFlight) await inFlight
        inFlight = client.query(sql, values)
        done += size
        if (performance.now() - lastLog > 10_000) {
          lastLog = performance.now()
          log(`  ${t.name}: ${done} of ${t.rows}`)
        }
      }
      for (const row of read.iterate() as IterableIterator<unknown[]>) {
        for (let i = 0; i < row.length; i++) batch[i].push(pgValue(row[i], t.columns[i].type))
        if (++n >= BATCH_ROWS) await send()
      }
      if (n > 0) await send()
      if (inFlight) await inFlight
      const ms = performance.now() - t1
      report.tables.push({ name: t.name, rows: t.rows, ms })
      log(`${t.name}: ${t.rows} rows in ${(ms / 1000).toFixed(1)} s`)
    }

    for (const t of order) await client.query(`ALTER TABLE ${ident(t.name)} ENABLE TRIGGER USER`)
    // The counts, newest ids and day spans those triggers keep (migrations 004, 012, 016 and 018), counted.
    await client.query(`SELECT record_days_recount('events'), record_days_recount('audit_trail')`)
    await client.query(
      `UPDATE record_counts r SET prunes = 0,
         n = CASE r.name WHEN 'events' THEN (SELECT count(*) FROM events) ELSE (SELECT count(*) FROM audit_trail) END,
         top = CASE r.name WHEN 'events' THEN (SELECT coalesce(max(id), 0) FROM events) ELSE (SELECT coalesce(max(id), 0) FROM audit_trail) END`,
    )
    // The copied risk notifications are those of every copied event (raised by SQLite as they were written): the risk feed starts after them (migration 021).
    await client.query(`UPDATE risk_raised SET up_to = (SELECT top FROM record_counts WHERE name = 'events') WHERE id = 1`)
    await client.query(`UPDATE table_rows SET n = CASE name
         WHEN 'agents' THEN (SELECT count(*) FROM agents) WHEN 'peripherals' THEN (SELECT count(*) FROM peripherals)
         WHEN 'agents.has_unapproved' THEN (SELECT count(*) FROM agents WHERE has_unapproved = 1)
         WHEN 'agents.has_vulnerable' THEN (SELECT count(*) FROM agents WHERE has_vulnerable = 1)
         WHEN 'agents.has_attack_tool' THEN (SELECT count(*) FROM agents WHERE has_attack_tool = 1)
         WHEN 'agents.vulnerable_or_wlv' THEN (SELECT count(*) FROM agents WHERE vulnerable_or_wlv = 1) END`)
    await client.query(`UPDATE license_seats SET activated = (SELECT count(*) FROM agents WHERE license_status = 'Activated')`)
    // The agents' check-in times that their triggers copy (migration 011).
    await client.query(`INSERT INTO agent_checkins (agent_id, last_updated_ms, connected) SELECT id, last_updated_ms, connection_status = 'Connected' FROM agents
      ON CONFLICT (agent_id) DO UPDATE SET last_updated_ms = excluded.last_updated_ms, connected = excluded.connected`)

    // The indexes, two at a time (the machine's two cores).
    const t2 = performance.now()
    const second = new pg.Client({ connectionString: url })
    await second.connect()
    try {
      await second.query(`SET maintenance_work_mem = '512MB'`)
      const queue = [...indexes]
      await Promise.all(
        [client, second].map(async (c) => {
          for (let ix = queue.shift(); ix; ix = queue.shift()) await c.query(ix.def)
        }),
      )
    } finally {
      await second.end()
    }
    // Each ended day's text index of events (migration 020), as the server's loop would build them after it starts.
    const textPg = connectPostgres(url, { max: 2 })
    try {
      const textDays = pgEventTextDays(textPg)
      const days = await textDays.unindexed(Date.now())
      const queue = [...days]
      await Promise.all(
        [0, 1].map(async () => {
          for (let d = queue.shift(); d; d = queue.shift()) await textDays.build(d)
        }),
      )
      log(`${days.length} days' text indexes of events built`)
    } finally {
      await textPg.close()
    }
    report.indexesMs = performance.now() - t2
    log(`${indexes.length} indexes built in ${(report.indexesMs / 1000).toFixed(1)} s`)

    // Sequences past the ids copied: identity columns and columns that take nextval() by default.
    const sequenced = (
      await client.query<{ table: string; column: string; seq: string | null; def: string | null }>(
        `SELECT table_name AS table, column_name AS column, pg_get_serial_sequence(quote_ident(table_name), column_name) AS seq, column_default AS def
         FROM information_schema.columns WHERE table_schema = 'public' AND (is_identity = 'YES' OR column_default LIKE 'nextval(%')`,
      )
    ).rows
    for (const s of sequenced) {
      if (!order.some((t) => t.name === s.table)) continue
      const seq = s.seq ?? /nextval\('([^']+)'/.exec(s.def ?? '')?.[1]
      if (!seq) continue
      await client.query(`SELECT setval($1::regclass, m) FROM (SELECT max(${ident(s.column)}) AS m FROM ${ident(s.table)}) x WHERE m IS NOT NULL`, [seq])
    }
    // The notifications' change numbers come from a sequence of their own, the last one taken kept in notification_counter.
    await client.query(`SELECT setval('notification_seq', seq) FROM notification_counter WHERE seq > 0`)
    // Today's partitions and the next two, as a fresh migration makes them.
    await client.query(
      `SELECT ensure_partitions(t, (extract(epoch FROM now()) * 1000)::bigint, (extract(epoch FROM now()) * 1000)::bigint + 2 * 86400000) FROM unnest(ARRAY['events', 'audit_trail']) t`,
    )
    const t3 = performance.now()
    await client.query('ANALYZE')
    log(`ANALYZE in ${((performance.now() - t3) / 1000).toFixed(1)} s`)

    // The check: counts, then a sample of rows column by column.
    for (const t of order) {
      const n = Number((await client.query(`SELECT count(*) AS n FROM ${ident(t.name)}`)).rows[0].n)
      if (n !== t.rows) report.mismatches.push(`${t.name}: ${t.rows} rows in SQLite, ${n} in PostgreSQL`)
    }
    const sample = opts.sample ?? 50
    for (const t of order) {
      if (!sample || !t.key.length || !t.key.every((k) => t.columns.some((c) => c.name === k))) continue
      const cols = t.columns.map((c) => ident(c.name)).join(', ')
      let picked: Record<string, unknown>[]
      try {
        const { lo, hi } = lite.prepare(`SELECT min(rowid) AS lo, max(rowid) AS hi FROM ${ident(t.name)}`).get() as { lo: number; hi: number }
        const at = lite.prepare(`SELECT ${cols} FROM ${ident(t.name)} WHERE rowid >= ? ORDER BY rowid LIMIT 1`)
        picked = Array.from({ length: Math.min(sample, t.rows) }, () => at.get(lo + Math.floor(Math.random() * (hi - lo + 1))) as Record<string, unknown>)
      } catch {
        picked = lite.prepare(`SELECT ${cols} FROM ${ident(t.name)} LIMIT ?`).all(sample) as Record<string, unknown>[]
      }
      const where = t.key.map((k, i) => `${ident(k)} = $${i + 1}`).join(' AND ')
      for (const row of picked) {
        const { rows } = await client.query(
          `SELECT ${cols} FROM ${ident(t.name)} WHERE ${where}`,
          t.key.map((k) => row[k]),
        )
        const keyText = t.key.map((k) => `${k}=${row[k]}`).join(', ')
        if (rows.length !== 1) {
          report.mismatches.push(`${t.name} (${keyText}): ${rows.length} rows in PostgreSQL`)
          continue
        }
        for (const c of t.columns) {
          const a = comparable(pgValue(row[c.name], c.type))
          const b = comparable(rows[0][c.name])
          // jsonb answers a parsed value, the file holds its text.
          const same = a === b || (c.type === 'jsonb' && a !== null && b !== null && JSON.stringify(JSON.parse(a)) === b)
          if (!same) report.mismatches.push(`${t.name} (${keyText}).${c.name}: ${a} in SQLite, ${b} in PostgreSQL`)
        }
      }
    }
  } finally {
    await client.end()
    lite.close()
  }
  report.totalMs = performance.now() - t0
  return report
}

if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) {
  const { values } = parseArgs({
    options: { from: { type: 'string' }, to: { type: 'string' }, replace: { type: 'boolean', default: false }, sample: { type: 'string', default: '50' } },
  })
  if (!values.from || !values.to) {
    console.error('usage: npm run pg-load -- --from <data dir | .sqlite file> --to postgres://user@host:5432/<database> [--replace] [--sample 50]')
    process.exit(2)
  }
  const r = await loadIntoPostgres(values.from, values.to, { replace: values.replace, sample: Number(values.sample) })
  const rows = r.tables.reduce((n, t) => n + t.rows, 0)
  console.log(`${rows} rows of ${r.tables.length} tables in ${(r.totalMs / 1000).toFixed(1)} s (indexes ${(r.indexesMs / 1000).toFixed(1)} s)`)
  if (r.mismatches.length) {
    console.log(`check: ${r.mismatches.length} differences`)
    for (const m of r.mismatches.slice(0, 20)) console.log(`- ${m}`)
    process.exit(1)
  }
  console.log('check: row counts and the sampled rows are equal')
}
