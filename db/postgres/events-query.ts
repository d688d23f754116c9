// The event and audit-trail lists on PostgreSQL: every filter of lib/events/filter.ts as one
// WHERE clause, every sort as one ORDER BY (its indexes: migration 004), counts by count(*)
// over the same WHERE (a text condition's under a time budget, else the planner's estimate),
// streamed pages and exports through a cursor. Rows are arrays of
// EVENT_FIELDS / AUDIT_FIELDS (or objects of them), as SQLite's db/event-engine/event-queries.ts answers.
//
// SQLite's semantics kept: "contains" folds ASCII letters only (the columns are COLLATE "C",
// under which ILIKE folds as SQLite's LIKE does) except for terms of 3 characters or more
// with a letter beyond ASCII, which fold over all of Unicode (as the trigram indexes there
// do; here lower() under ICU's root collation); text sorts compare bytes (BINARY) or bytes
// with ASCII folded (NOCASE: lower() under "C"); nulls last in either direction; the id breaks
// ties in the sort's direction.
import pg from 'pg'
import Cursor from 'pg-cursor'
import {
  AUDIT_FIELDS,
  type AuditFilter,
  type AuditRecordStore,
  type AuditTrailRow,
  type Bounds,
  EVENT_FIELDS,
  eventCategories,
  type EventFilter,
  type EventRow,
  type EventStore,
  type ListAnswer,
  MAX_ID,
  type PageChunks,
} from '../../lib/events/ports.js'
import { auditSorts, eventSorts, sortsEveryMatch, type SortField } from '../event-engine/index.js'
import { contains } from '../sql.js'
import { severityNames, type Sort } from '../../lib/ports.js'
import type { Postgres, Row } from './connection.js'
import { cancelled, pageBounded, plannedRows, type Counts } from './counts.js'

export type RecordTable = 'events' | 'audit_trail'

/** Rows a streamed read fetches at a time (SQLite's exports read 1,000 a statement too). */
const CHUNK = 1000

const DAY_MS = 86_400_000
/** Day ranges one read names at most; past it, one range from the first day to the last. */
const MAX_RANGES = 32

/** The ids written into one UTC day of creation (migration 016's record_days). */
interface DaySpan {
  day: number
  low: number
  high: number
  /** Records the day holds. */
  n: number
}

/** The days whose ids meet an id range, by lowest id, and the newest id written when they were read. */
interface Days {
  top: number
  spans: DaySpan[]
}

/**
 * The conditions that bound a read to the days of `spans` (their partitions alone are planned
 * and probed) and to the ids up to `top`: a record written after the spans were read may lie
 * in a day outside them, and is left to the next read.
 */
function inDays(d: Days, spans: DaySpan[] = d.spans): (q: Params) => string[] {
  return (q) => {
    if (!spans.length) return ['false']
    const ranges: [number, number][] = []
    for (const day of spans.map((s) => s.day).sort((a, b) => a - b)) {
      const last = ranges.at(-1)
      if (last && last[1] === day) last[1] = day + DAY_MS
      else ranges.push([day, day + DAY_MS])
    }
    const named = ranges.length > MAX_RANGES ? [[ranges[0][0], ranges.at(-1)![1]]] : ranges
    const conds = named.map(([from, to]) => `(e.created_ms >= ${q.add(from)} AND e.created_ms < ${q.add(to)})`)
    return [`e.id <= ${q.add(d.top)}`, conds.length === 1 ? conds[0] : `(${conds.join(' OR ')})`]
  }
}

/** No more conditions. */
const unbounded = (_q: Params): string[] => []

/** int8 and numeric as numbers, as the pool answers them (a cursor takes its parsers itself). */
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 || oid === 1700) return (v: string) => (v === null ? null : Number(v))
    return pg.types.getTypeParser(oid, format as 'text')
  },
}

/** Parameters of one statement, numbered as they are added. */
class Params {
  readonly values: unknown[] = []
  /** Whether a "contains" condition was added (its count may be an estimate). */
  text = false
  add(v: unknown): string {
    this.values.push(v)
    return `$${this.values.length}`
  }
}

const asciiLower = (s: string) => s.replace(/[A-Z]+/g, (m) => m.toLowerCase())
const unicodeTerm = (term: string) => [...term].length >= 3 && /[^\u0000-\u007f]/.test(term)

/** A "contains" test of a text in JavaScript, folded as the SQL condition folds (fixed sets of values: categories, severity names). */
function containsTest(term: string): (value: string) => boolean {
  if (unicodeTerm(term)) {
    const t = term.toLowerCase()
    return (v) => v.toLowerCase().includes(t)
  }
  const t = asciiLower(term)
  return (v) => asciiLower(v).includes(t)
}

/** "Contains" on any of the columns. An ASCII term (or a short one) is an ILIKE, which the trigram index answers. */
function containsAny(q: Params, term: string, columns: string[], extra: string[] = []): string {
  q.text = true
  let conds: string[]
  if (unicodeTerm(term)) {
    const p = q.add(term.toLowerCase())
    conds = columns.map((c) => `strpos(lower(${c} COLLATE "und-x-icu"), ${p}) > 0`)
  } else {
    const p = q.add(contains(term))
    conds = columns.map((c) => `${c} ILIKE ${p}`)
  }
  conds.push(...extra)
  return conds.length === 1 ? conds[0] : `(${conds.join(' OR ')})`
}

function boundsWhere(b: Bounds, q: Params): string[] {
  if (b.empty) return ['false']
  const w: string[] = []
  if (b.idFrom > 1 || b.idTo < MAX_ID) w.push(`e.id BETWEEN ${q.add(b.idFrom)} AND ${q.add(b.idTo)}`)
  if (b.timeFrom !== null) w.push(`e.created_ms >= ${q.add(b.timeFrom)}`)
  if (b.timeTo !== null) w.push(`e.created_ms <= ${q.add(b.timeTo)}`)
  if (b.severity !== undefined) w.push(`e.severity = ${q.add(b.severity)}`)
  if (b.minSeverity !== undefined) w.push(`e.severity <= ${q.add(b.minSeverity)}`)
  return w
}

/** The severities whose name contains the term (GlobalSearch looks at the name). */
const severitiesNamed = (term: string) => {
  const test = containsTest(term)
  return severityNames.flatMap((n, i) => (test(n) ? [i] : []))
}

function eventWhere(f: EventFilter, q: Params): string[] {
  const w = boundsWhere(f, q)
  if (f.categories) w.push(`e.category = ANY(${q.add(f.categories)}::text[])`)
  if (f.icons) w.push(`e.peripheral_icon = ANY(${q.add(f.icons)}::int[])`)
  const term = (value: string | undefined, column: string) => {
    if (value !== undefined) w.push(containsAny(q, value, [column]))
  }
  term(f.description, 'e.description')
  term(f.source, 'e.entity_id')
  term(f.assetKey, 'e.asset_key')
  term(f.assetName, 'e.asset_name')
  term(f.details, 'e.details')
  term(f.peripheralAssetId, 'e.peripheral_asset_id')
  if (f.globalSearch !== undefined) {
    // The category and the severity's name hold a few known values (CHECK constraints):
    // those that match become an IN, which an index answers, instead of a test of each row.
    const test = containsTest(f.globalSearch)
    const categories = eventCategories.filter(test)
    const severities = severitiesNamed(f.globalSearch)
    const extra = [...(categories.length ? [`e.category = ANY(${q.add(categories)}::text[])`] : []), ...(severities.length ? [`e.severity = ANY(${q.add(severities)}::int[])`] : [])]
    w.push(containsAny(q, f.globalSearch, ['e.description', 'e.details', 'e.entity_id', 'e.event_code', 'e.hashtags', 'e.asset_name'], extra))
  }
  return w
}

function auditWhere(f: AuditFilter, q: Params): string[] {
  const w = boundsWhere(f, q)
  if (f.categories) w.push(`e.category = ANY(${q.add(f.categories)}::text[])`)
  const exact = (value: string | number | undefined, column: string) => {
    if (value !== undefined) w.push(`${column} = ${q.add(value)}`)
  }
  exact(f.assetType, 'e.asset_type')
  exact(f.assetSubType, 'e.asset_sub_type')
  exact(f.assetDetail, 'e.asset_detail')
  exact(f.assetIcon, 'e.asset_icon')
  const term = (value: string | undefined, columns: string[]) => {
    if (value !== undefined) w.push(containsAny(q, value, columns))
  }
  term(f.user, ['e.user_name'])
  term(f.description, ['e.description'])
  term(f.details, ['e.details'])
  term(f.asset, ['e.asset_key', 'e.asset_name', 'e.asset_ip'])
  term(f.assetKey, ['e.asset_key'])
  term(f.assetName, ['e.asset_name'])
  term(f.assetParentId, ['e.asset_parent_id'])
  term(f.assetIp, ['e.asset_ip'])
  term(f.globalSearch, ['e.description', 'e.details', 'e.user_name', 'e.source_ip', 'e.category', 'e.operation_id', 'e.asset_key', 'e.asset_name', 'e.asset_ip'])
  return w
}

/** A sort field as SQL: the value ordered by, and whether its nulls go last explicitly. */
interface Order {
  key: string
  nullable?: boolean
}

const SEVERITY_NAME = `(CASE e.severity ${severityNames.map((n, i) => `WHEN ${i} THEN '${n}'`).join(' ')} END) COLLATE "C"`
const timeOrder: Order = { key: 'e.created_ms' }

const eventOrders: Record<string, Order> = {
  eventID: { key: 'e.id' },
  date: timeOrder,
  creationTime: timeOrder,
  creationTimeEpoch: timeOrder,
  eventCode: { key: 'e.event_code' },
  severity: { key: 'e.severity' },
  severityString: { key: SEVERITY_NAME },
  category: { key: 'e.category' },
  eventEntityID: { key: 'lower(e.entity_id)' },
  description: { key: 'lower(e.description)' },
  details: { key: 'lower(e.details)' },
  hashtags: { key: 'lower(e.hashtags)', nullable: true },
  peripheralIcon: { key: 'e.peripheral_icon' },
  assetKey: { key: 'e.asset_key', nullable: true },
  assetName: { key: 'lower(e.asset_name)', nullable: true },
  peripheralAssetId: { key: 'lower(e.peripheral_asset_id)', nullable: true },
}

const auditOrders: Record<string, Order> = {
  auditTrailID: { key: 'e.id' },
  date: timeOrder,
  creationTime: timeOrder,
  creationTimeEpoch: timeOrder,
  severity: { key: 'e.severity' },
  severityString: { key: SEVERITY_NAME },
  category: { key: 'e.category' },
  user: { key: 'lower(e.user_name)', nullable: true },
  sourceIp: { key: 'e.source_ip', nullable: true },
  description: { key: 'lower(e.description)' },
  details: { key: 'lower(e.details)' },
  operationId: { key: 'e.operation_id', nullable: true },
  outcome: { key: 'e.outcome' },
  'assetReference.key': { key: 'e.asset_key', nullable: true },
  'assetReference.name': { key: 'lower(e.asset_name)', nullable: true },
  'assetReference.ipAddress': { key: 'e.asset_ip', nullable: true },
  'assetReference.type': { key: 'e.asset_type' },
}

interface TableSpec<F> {
  table: RecordTable
  fields: readonly string[]
  where: (f: F, q: Params) => string[]
  orders: Record<string, Order>
  /** SQLite's sort fields: which of them sort every match (a free text), for `sortMax`. */
  sorts: Record<string, SortField>
}

function orderBy(orders: Record<string, Order>, s: Sort): string {
  const o = orders[s.field]
  if (!o) throw new Error(`unknown sort field ${JSON.stringify(s.field)}`)
  const dir = s.direction === 'asc' ? 'ASC' : 'DESC'
  if (o.key === 'e.id') return `e.id ${dir}`
  return `${o.nullable ? `${o.key} IS NULL, ` : ''}${o.key} ${dir}, e.id ${dir}`
}

export interface RecordStoreOptions {
  /**
   * How long the exact count of a filter with a text condition may run, in ms
   * (PRIME_PG_COUNT_BUDGET_MS); past it the count is the planner's estimate. 0: always the
   * estimate. Filters without a text condition are always counted exactly.
   */
  countBudgetMs?: number
}

/** The lists of one table. */
function recordStore<F extends Bounds, R>(db: Postgres, spec: TableSpec<F>, { countBudgetMs = 50 }: RecordStoreOptions = {}) {
  const { table, fields } = spec
  const columns = fields.map((c) => `e.${c}`).join(', ')
  const asArray = (r: Row): unknown[] => fields.map((k) => r[k])

  /** The WHERE clause of a filter (and more conditions), with its parameters. */
  const filtered = (f: F, q: Params, more: string[] = []): string => {
    const w = [...spec.where(f, q), ...more]
    return w.length ? w.join(' AND ') : 'true'
  }

  /**
   * Every record of the table (kept in record_counts, migration 004), and the filter's
   * matches (up to the id `top` when given): count(*) over the same WHERE, or the kept count
   * when nothing is filtered. A filter with a text condition (a common term over millions of
   * records is read at every match) is counted within countBudgetMs, in a transaction of its
   * own whose SET LOCAL ends with it (the pooled connection keeps its own timeout); past it,
   * the count is the planner's estimate of the same WHERE (EXPLAIN, no row read: a sample
   * would read a share of the table again, for a budget already spent), at most the total.
   * `exact`: no budget (exports, whose count is the file's).
   */
  async function counts(f: F, more: (q: Params) => string[] = unbounded, exact = false): Promise<Counts> {
    const q = new Params()
    const total = `(SELECT n FROM record_counts WHERE name = '${table}')`
    const where = filtered(f, q, more(q))
    const matches = where === 'true' ? total : `(SELECT count(*) FROM ${table} e WHERE ${where})`
    const sql = `SELECT ${total} AS total, ${matches} AS filtered`
    // Inside a caller's unit of work a cancelled statement would abort its transaction: counted exactly there.
    if (exact || !q.text || db.uow.inUnit()) return (await db.one<Counts>(sql, q.values))!
    if (countBudgetMs > 0) {
      try {
        return await db.uow.run(async () => {
          await db.run(`SET LOCAL statement_timeout = ${Math.ceil(countBudgetMs)}`)
          return (await db.one<Counts>(sql, q.values))!
        })
      } catch (err) {
        if (!cancelled(err)) throw err
      }
    }
    const [n, planned] = await Promise.all([db.value<number>(`SELECT n FROM record_counts WHERE name = $1`, [table]), plannedRows(db, `${table} e WHERE ${where}`, q.values)])
    const t = n ?? 0
    return { total: t, filtered: Math.min(t, planned), filteredExact: false }
  }

  /** Whether a filter bounds nothing but ids (a feed page after an id, say). */
  const onlyIds = (f: F) => spec.where({ ...f, idFrom: 1, idTo: MAX_ID }, new Params()).length === 0

  /**
   * The counts of a filter of ids alone over its days `d`: the records of each day wholly
   * inside the range are the day's n, those of a day only partly in it (the first one's, a
   * day written into late) are counted; every other day was never read. Exact, as
   * count(*): the spans' counts follow every insert and delete (migration 016).
   */
  async function spanCounts(f: F, d: Days): Promise<Counts> {
    const to = Math.min(f.idTo, d.top)
    let whole = 0
    const partial: DaySpan[] = []
    for (const s of d.spans) {
      if (s.low >= f.idFrom && s.high <= to) whole += s.n
      else partial.push(s)
    }
    const q = new Params()
    const counted = partial.length ? `(SELECT count(*) FROM ${table} e WHERE ${filtered(f, q, inDays(d, partial)(q))})` : '0'
    const r = (await db.one<{ total: number; counted: number }>(`SELECT (SELECT n FROM record_counts WHERE name = '${table}') AS total, ${counted} AS counted`, q.values))!
    return { total: r.total, filtered: whole + r.counted }
  }

  /** The counts of a filter over its days (null: every day). */
  const countsIn = (f: F, d: Days | null, exact = false): Promise<Counts> => (d && onlyIds(f) ? spanCounts(f, d) : counts(f, d ? inDays(d) : unbounded, exact))

  /** Whether more than `max` records match, counted exactly up to max + 1 (an estimate cannot refuse a sort). */
  async function moreThan(f: F, max: number, more: (q: Params) => string[] = unbounded): Promise<number> {
    const q = new Params()
    const where = filtered(f, q, more(q))
    return (await db.value<number>(`SELECT count(*) FROM (SELECT 1 FROM ${table} e WHERE ${where} LIMIT ${q.add(max + 1)}) m`, q.values)) ?? 0
  }

  /**
   * A page's statement: the list's (the matches in the sort's order, after `offset`), or the
   * feed's (the oldest `limit` matches after `offset`, then in the sort's order).
   */
  function pageSql(f: F, s: Sort, limit: number, offset: number, feed: boolean, select = columns, more: (q: Params) => string[] = unbounded) {
    const q = new Params()
    const where = filtered(f, q, more(q))
    const order = orderBy(spec.orders, s)
    const sql = feed
      ? `SELECT * FROM (SELECT ${select} FROM ${table} e WHERE ${where} ORDER BY e.id ASC LIMIT ${q.add(limit)} OFFSET ${q.add(offset)}) e ORDER BY ${order}`
      : `SELECT ${select} FROM ${table} e WHERE ${where} ORDER BY ${order} LIMIT ${q.add(limit)} OFFSET ${q.add(offset)}`
    return { sql, params: q.values }
  }

  /** The rows of a statement read through a cursor on a client of its own, a chunk at a time (released when the reading ends or is given up). */
  async function* cursorChunks(sql: string, params: unknown[], raw: boolean): AsyncGenerator<unknown[]> {
    const client = await db.pool.connect()
    let broken: Error | undefined
    const cursor = client.query(new Cursor<unknown>(sql, params, { rowMode: raw ? 'array' : undefined, types }))
    try {
      for (;;) {
        const rows = await cursor.read(CHUNK)
        if (rows.length) yield rows
        if (rows.length < CHUNK) break
      }
    } catch (err) {
      broken = err as Error
      throw err
    } finally {
      try {
        await cursor.close()
      } catch (err) {
        broken ??= err as Error
      }
      client.release(broken)
    }
  }

  // The newest id written, kept beside the total (migration 012): max(id) visits every day's partition.
  const lastId = async (): Promise<number> => (await db.value<number>('SELECT top FROM record_counts WHERE name = $1', [table])) ?? 0

  /**
   * The days whose ids meet `from`..`to` (migration 016), read in one statement with the
   * newest id written: every record up to it lies in one of them.
   */
  async function daysMeeting(from: number, to: number): Promise<Days> {
    const r = await db.one<{ top: number | null; spans: [number, number, number, number][] }>(
      `SELECT (SELECT top FROM record_counts WHERE name = $1) AS top,
         (SELECT coalesce(json_agg(json_build_array(day_ms, low, high, n) ORDER BY low, day_ms), '[]') FROM record_days
           WHERE name = $1 AND high >= $2 AND low <= $3) AS spans`,
      [table, from, to],
    )
    return { top: r?.top ?? 0, spans: (r?.spans ?? []).map(([day, low, high, n]) => ({ day, low, high, n })) }
  }

  /** A filter's days, when it bounds the ids (a feed after an id, an export up to the newest): reading every day's partition costs more than asking which. */
  const daysOf = (f: F): Promise<Days> | null => (!f.empty && (f.idFrom > 1 || f.idTo < MAX_ID) ? daysMeeting(f.idFrom, f.idTo) : null)

  /**
   * A feed's rows (the oldest `offset + limit` matches from the filter's first id): read first
   * over the fewest days, by lowest id, whose records can fill it; kept when the page is full
   * and its highest id is below the lowest of the days left out (none of theirs comes before
   * it), else read again over every day.
   */
  async function feedOverDays<T>(d: Days | null, f: F, limit: number, offset: number, read: (more: (q: Params) => string[]) => Promise<T[]>, idOf: (row: T) => number): Promise<T[]> {
    if (d === null) return read(unbounded)
    let k = 0
    for (let have = 0; k < d.spans.length && have < offset + limit; k++) {
      const s = d.spans[k]
      if (s.low >= f.idFrom && s.high <= f.idTo) have += s.n
    }
    if (k >= d.spans.length) return read(inDays(d))
    const rows = await read(inDays(d, d.spans.slice(0, k)))
    let highest = 0
    for (const r of rows) highest = Math.max(highest, idOf(r))
    if (rows.length === limit && highest < d.spans[k].low) return rows
    return read(inDays(d))
  }

  return {
    async pageRows(f: F, s: Sort, limit: number, offset: number, feed = false, sortMax = Number.POSITIVE_INFINITY): Promise<ListAnswer<unknown[]>> {
      const d = await daysOf(f)
      const days = d ? inDays(d) : unbounded
      if (!feed && Number.isFinite(sortMax) && sortsEveryMatch(spec.sorts[s.field])) {
        // A free text sorts every match: counted first, and too many are not read. An
        // estimate decides nothing: the matches are counted exactly up to one past the limit.
        let c = await countsIn(f, d)
        if (c.filteredExact === false) {
          const upTo = await moreThan(f, sortMax, days)
          c = upTo > sortMax ? { ...c, filtered: Math.max(c.filtered, upTo) } : { total: Math.max(c.total, upTo), filtered: upTo }
        }
        if (c.filtered > sortMax) return { ...c, rows: [], tooManyToSort: true }
        const { sql, params } = pageSql(f, s, limit, offset, feed, columns, days)
        return { ...c, rows: (await db.query(sql, params)).map(asArray) }
      }
      const read = async (more: (q: Params) => string[]) => {
        const { sql, params } = pageSql(f, s, limit, offset, feed, columns, more)
        return (await db.query(sql, params)).map(asArray)
      }
      const [c, rows] = await Promise.all([countsIn(f, d), feed ? feedOverDays(d, f, limit, offset, read, (r) => r[0] as number) : read(days)])
      return { ...pageBounded(c, offset, limit, rows.length), rows }
    },

    /** The records of the moment it is asked: those written meanwhile are left out, of the counts as of the rows. */
    async pageChunks(f: F, s: Sort, limit: number, offset: number, feed = false): Promise<PageChunks> {
      const d = await daysOf(f)
      const top = d ? d.top : await lastId()
      const upTo = d ? inDays(d) : (q: Params) => [`e.id <= ${q.add(top)}`]
      const c = d ? await countsIn(f, d) : await counts(f, upTo)
      const { sql, params } = pageSql(f, s, limit, offset, feed, columns, upTo)
      return { ...c, rows: [], chunks: cursorChunks(sql, params, true) }
    },

    async count(f: F): Promise<number> {
      const d = await daysOf(f)
      return (await countsIn(f, d, true)).filtered
    },

    async iterate(f: F, s: Sort, cap: number): Promise<AsyncIterable<R>> {
      const d = await daysOf(f)
      const { sql, params } = pageSql(f, s, Math.max(0, cap), 0, false, columns, d ? inDays(d) : unbounded)
      return (async function* () {
        for await (const rows of cursorChunks(sql, params, false)) yield* rows as R[]
      })()
    },

    async rawChunks(f: F, s: Sort, cap: number): Promise<AsyncIterable<unknown[]>> {
      const d = await daysOf(f)
      const { sql, params } = pageSql(f, s, Math.max(0, cap), 0, false, columns, d ? inDays(d) : unbounded)
      return cursorChunks(sql, params, true)
    },

    lastId,

    /** The newest id and the prunes so far: ids become visible in id order (the feed lock), and nothing else changes a record. */
    version: async (): Promise<string> => (await db.value<string>(`SELECT top || ':' || prunes FROM record_counts WHERE name = $1`, [table])) ?? '',

    async feedIds(f: F, s: Sort, limit: number, offset: number): Promise<ListAnswer<number>> {
      const d = await daysOf(f)
      const read = async (more: (q: Params) => string[]) => {
        const { sql, params } = pageSql(f, { field: s.field, direction: 'asc' }, limit, offset, true, 'e.id', more)
        return (await db.query<{ id: number }>(sql, params)).map((r) => r.id)
      }
      const [c, ids] = await Promise.all([countsIn(f, d), feedOverDays(d, f, limit, offset, read, (id) => id)])
      if (s.direction === 'desc') ids.reverse()
      return { ...pageBounded(c, offset, limit, ids.length), rows: ids }
    },

    /** Records by id, from the days that hold those ids only. */
    async rowsByIds(ids: number[]): Promise<unknown[][]> {
      if (!ids.length) return []
      const q = new Params()
      const list = q.add(ids)
      const where = inDays(await daysMeeting(Math.min(...ids), Math.max(...ids)))(q)
      return (await db.query(`SELECT ${columns} FROM ${table} e WHERE e.id = ANY(${list}::bigint[]) AND ${where.join(' AND ')}`, q.values)).map(asArray)
    },
  }
}

export interface PgRecordStores {
  events: EventStore
  audit: AuditRecordStore
}

/** The event and audit-trail lists (lib/events/ports.ts) on PostgreSQL. */
export function pgRecordStores(db: Postgres, options: RecordStoreOptions = {}): PgRecordStores {
  const events = recordStore<EventFilter, EventRow>(db, { table: 'events', fields: EVENT_FIELDS, where: eventWhere, orders: eventOrders, sorts: eventSorts }, options)
  const audit = recordStore<AuditFilter, AuditTrailRow>(db, { table: 'audit_trail', fields: AUDIT_FIELDS, where: auditWhere, orders: auditOrders, sorts: auditSorts }, options)
  return {
    // Nothing is read into memory before a text filter: PostgreSQL's indexes answer it.
    events: { ...events, ready: async () => {} } satisfies EventStore,
    audit: audit satisfies AuditRecordStore,
  }
}
