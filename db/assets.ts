// Assets as the NAC connector and the automation client discover them: every agent's host,
// every peripheral an agent reported, every agentless host. They are not a table of their
// own: each is read from its source table (three branches of one UNION ALL), with the
// asset's fields as SQL expressions over it, so that nothing has to be kept in step at
// check-in. A page is read in two steps: the keys of the page (computing only what the
// filters and the order need), then those rows in full.
// The fields' SQL is in assets-fields.ts, a query's conditions in assets-conditions.ts; the
// pages (with the paging state kept between them), counts and summaries are here.
import type { DB } from './index.js'
import { statementCache } from './sql.js'
import { CheckInTimeWrites } from './answer-cache.js'
import { FIELDS, FROM, from, NULLABLE_SORTS, ROWID, rowSql, SOURCES } from './assets-fields.js'
import { type AssetCounts, type AssetQuery, type AssetRow, type AssetSort, type DataAt, type Source, TEXT_FIELDS } from '../lib/assets/ports.js'
import { foldQuery, INDEXED_SORTS, named, orderedParts, type Rendered, renderWhere, type SourceQuery } from './assets-conditions.js'
import { type GramInfo, gramLookup, shortTerm } from './asset-grams.js'

export { SEVERITY_RISK, SOURCES } from './assets-fields.js'

/** Where a page ended: the sort value, source index and rowid of its last asset. */
interface Position {
  s: unknown
  src: number
  id: number
}
type Key = [s: unknown, src: number, id: number]
interface Paging {
  per: Record<Source, number>
  ends: Map<number, Position>
}
/** Queries whose paging is kept, and page ends kept per query. */
const MAX_PAGINGS = 32
const MAX_ENDS = 64

export function assetsRepo(db: DB, checkInTimes: CheckInTimeWrites = new CheckInTimeWrites()) {
  const cached = statementCache(db, 64)
  const rows = Object.fromEntries(SOURCES.map((s) => [s, db.prepare(rowSql(s))])) as Record<Source, ReturnType<DB['prepare']>>
  const totals = db
    .prepare<[], number>(`SELECT (SELECT n FROM row_counts WHERE name = 'agents') + (SELECT n FROM row_counts WHERE name = 'peripherals')
    + (SELECT count(*) FROM agentless_connections)`)
    .pluck()
  const summaries = Object.fromEntries(
    SOURCES.map((s) => [
      s,
      db.prepare(
        `SELECT ${FIELDS.type[s]} AS type, ${FIELDS.riskLevel[s]} AS risk_level, ${FIELDS.isOnline[s]} AS is_online,
       ${FIELDS.firstSeen[s]} >= @since AS is_new, count(*) AS n
     FROM ${FROM[s]} WHERE ${ROWID[s]} > @from AND ${ROWID[s]} <= @to GROUP BY 1, 2, 3, 4`,
      ),
    ]),
  ) as Record<Source, ReturnType<DB['prepare']>>
  const lastIds = Object.fromEntries(SOURCES.map((s) => [s, db.prepare<[], number | null>(`SELECT max(${ROWID[s]}) FROM ${FROM[s].split(' JOIN ')[0]}`).pluck()])) as unknown as Record<
    Source,
    { get(): number | null | undefined }
  >
  // Switches agents report being plugged into: a switch is new when every agent behind it enrolled since.
  // A range of agents' switches, as the key they are told apart by and the first enrollment
  // behind each: the ranges are merged in the caller (a switch's agents span several).
  const switchesIn = db
    .prepare<{ from: number; to: number }, [string, string, number]>(
      `SELECT lower(coalesce(switch_ip, '')), lower(coalesce(switch_name, '')), min(enrolled_ms) FROM agents
       WHERE id > @from AND id <= @to AND coalesce(switch_ip, switch_name) IS NOT NULL GROUP BY 1, 2`,
    )
    .raw()

  const gram = gramLookup(db)

  /**
   * A search of one or two characters without filters, over the agents and the peripherals:
   * each source's count of rows holding the gram, and whether its rows are listed.
   */
  function shortSearch(parts: Partial<Record<Source, SourceQuery>>): Partial<Record<Source, GramInfo>> {
    const term = shortTerm(parts.agent?.search ?? parts.peripheral?.search)
    const out: Partial<Record<Source, GramInfo>> = {}
    if (term === undefined) return out
    for (const src of ['agent', 'peripheral'] as const) {
      const q = parts[src]
      if (q && q.filters.length === 0 && q.system.length === 0) out[src] = gram(src, term)
    }
    return out
  }

  /** The matching count of each source (0 for a source the query rules out). */
  function counts(parts: Partial<Record<Source, AssetQuery>>, known: Partial<Record<Source, GramInfo>> = {}): Record<Source, number> {
    const out = { agent: 0, host: 0, peripheral: 0 } as Record<Source, number>
    for (const src of SOURCES) {
      const q = parts[src]
      if (!q) continue
      const k = known[src]
      if (k) {
        out[src] = k.n
        continue
      }
      const w = renderWhere(q, src)
      // Without a WHERE, SQLite counts a table from its b-tree's pages, not row by row.
      const sql = `SELECT count(*) FROM ${from(src, w.sql)}${w.sql === '1' ? '' : ` WHERE ${w.sql}`}`
      out[src] = cached(sql)
        .pluck()
        .get(...w.params, ...named(sql, q)) as number
    }
    return out
  }

  /**
   * The rows after `pos` in the order of `value` (then source, then id), for one source's
   * branch, as a condition its index can serve. Nulls come last in both directions.
   */
  function afterPos(src: Source, value: string, sort: AssetSort, pos: Position): Rendered {
    const i = SOURCES.indexOf(src)
    const asc = sort.direction === 'asc'
    const cmp = asc ? '>' : '<'
    const id = ROWID[src]
    if (pos.s === null) {
      if (i === pos.src) return { sql: `(${value}) IS NULL AND ${id} ${cmp} ?`, params: [pos.id] }
      return { sql: (asc ? i > pos.src : i < pos.src) ? `(${value}) IS NULL` : '0', params: [] }
    }
    const nulls = ` OR (${value}) IS NULL`
    if (i === pos.src) return { sql: `((${value}, ${id}) ${cmp} (?, ?)${nulls})`, params: [pos.s, pos.id] }
    const later = asc ? i > pos.src : i < pos.src
    return { sql: `((${value}) ${cmp}${later ? '=' : ''} ?${nulls})`, params: [pos.s] }
  }

  /** The keys of a page: (source, rowid) in order, with the sort value. */
  function pageKeys(parts: Partial<Record<Source, AssetQuery>>, q: AssetQuery, sort: AssetSort, limit: number, offset: number, pos?: Position): Key[] {
    const params: unknown[] = []
    const branches = SOURCES.filter((src) => parts[src]).map((src) => {
      const w = renderWhere(parts[src]!, src)
      params.push(...w.params)
      const e = FIELDS[sort.field][src]
      const value = TEXT_FIELDS.has(sort.field) ? `lower(${e})` : e
      let where = w.sql
      if (pos) {
        const a = afterPos(src, value, sort, pos)
        where += ` AND ${a.sql}`
        params.push(...a.params)
      }
      return `SELECT ${value} AS s, ${SOURCES.indexOf(src)} AS src, ${ROWID[src]} AS id FROM ${from(src, where + value)} WHERE ${where}`
    })
    const dir = sort.direction === 'asc' ? 'ASC' : 'DESC'
    const nullsLast = dir === 'ASC' && NULLABLE_SORTS.has(sort.field) ? 's IS NULL, ' : ''
    const sql = `SELECT s, src, id FROM (${branches.join(' UNION ALL ')}) ORDER BY ${nullsLast}s ${dir}, src ${dir}, id ${dir} LIMIT ? OFFSET ?`
    return cached(sql)
      .raw(true)
      .all(...params, limit, offset, ...named(sql, q)) as Key[]
  }

  /**
   * In order of first sight or of risk, each source's page is read from its own index
   * (migrations 026 and 037) up to the page's end, and the pages merged: a first page reads
   * a page of each source, and a page that follows one just read starts where that one
   * ended. A peripheral's risk is read in two parts: the peripherals of no rare model in
   * the order of their index, those of the rare models (a few hosts' each) found by model.
   */
  function indexedKeys(parts: Partial<Record<Source, AssetQuery>>, q: AssetQuery, sort: AssetSort, limit: number, offset: number, pos?: Position): Key[] {
    const params: unknown[] = []
    const dir = sort.direction === 'asc' ? 'ASC' : 'DESC'
    const branches: string[] = []
    for (const src of SOURCES.filter((s) => parts[s])) {
      const w = renderWhere(parts[src]!, src)
      for (const [value, only] of orderedParts(src, sort.field, q.rare.length > 0)) {
        params.push(...w.params)
        let where = only ? `${w.sql} AND ${only}` : w.sql
        if (pos) {
          const a = afterPos(src, value, sort, pos)
          where += ` AND ${a.sql}`
          params.push(...a.params)
        }
        branches.push(`SELECT * FROM (SELECT ${value} AS s, ${SOURCES.indexOf(src)} AS src, ${ROWID[src]} AS id FROM ${from(src, where)} WHERE ${where}
        ORDER BY s ${dir}, id ${dir} LIMIT @end)`)
      }
    }
    const sql = `SELECT s, src, id FROM (${branches.join(' UNION ALL ')}) ORDER BY s ${dir}, src ${dir}, id ${dir} LIMIT ? OFFSET ?`
    return cached(sql)
      .raw(true)
      .all(...params, limit, offset, ...named(sql, q, { end: offset + limit })) as Key[]
  }

  // Paging state of the queries asked lately, while the data is unchanged: the matching
  // counts, and where each page served ended, so that the next page (the connectors page
  // through to the end) starts from there through the indexes instead of counting and
  // sorting every row before it again. Check-in times alone do not count as a change,
  // except for queries that filter or sort by lastSeen, which they move.
  const changes = db.prepare('SELECT total_changes()').pluck()
  const version = db.prepare('PRAGMA data_version').pluck()
  const paging = new Map<string, Paging>()
  let generation = ''
  /** Where the data stands for the paging state: this connection's changes, those of check-in times, other processes' commits. */
  const dataAt = (): DataAt => {
    const writes = changes.get() as number
    return { writes, generation: `${writes - checkInTimes.rows}:${version.get()}` }
  }
  function pagingOf(key: string, readsCheckIns: boolean, compute: () => Record<Source, number>, at: DataAt): Paging {
    if (at.generation !== generation) {
      paging.clear()
      generation = at.generation
    }
    const k = readsCheckIns ? `${at.writes}:${key}` : key
    let entry = paging.get(k)
    if (entry) {
      paging.delete(k)
    } else {
      entry = { per: compute(), ends: new Map() }
      if (paging.size >= MAX_PAGINGS) paging.delete(paging.keys().next().value!)
    }
    paging.set(k, entry)
    return entry
  }

  /** How pages were read: from where the previous one ended, or by offset; and which sources were read. */
  const reads = { keyset: 0, offset: 0, sources: { agent: 0, host: 0, peripheral: 0 } as Record<Source, number> }

  return {
    reads,

    /** Every asset, matching or not. */
    total: () => totals.get() as number,

    /**
     * Where the data stands, as the server's connection sees it: a reader thread's
     * connection, whose own counters move with every check-in's commit, keeps its paging
     * state by the server's (`page`'s `at`).
     */
    dataAt,

    /** The matching count, and a page of the matching assets' rows in order; `at`: where the data stands (default: here). */
    page(q: AssetQuery, sort: AssetSort, limit: number, offset: number, at: DataAt = dataAt()): { filtered: number; rows: AssetRow[] } {
      const parts: Partial<Record<Source, SourceQuery>> = {}
      for (const src of SOURCES) {
        const folded = foldQuery(q, src)
        if (folded) parts[src] = folded
      }
      const short = shortSearch(parts)
      for (const src of SOURCES) if (short[src]?.posted) parts[src] = { ...parts[src]!, gramRows: true }
      const readsCheckIns = sort.field === 'lastSeen' || JSON.stringify([q.filters, q.system]).includes('"lastSeen"')
      const entry = pagingOf(JSON.stringify([q, sort]), readsCheckIns, () => counts(parts, short), at)
      const per = entry.per
      const filtered = per.agent + per.host + per.peripheral
      if (offset >= filtered) return { filtered, rows: [] }
      // A source nothing of which matches is not read: walking its index in order for rows
      // that are not there would read every one of them (a million peripherals).
      for (const src of SOURCES) if (per[src] === 0) delete parts[src]
      const pos = offset > 0 ? entry.ends.get(offset) : undefined
      const read = INDEXED_SORTS.has(sort.field) ? indexedKeys : pageKeys
      const keys = read(parts, q, sort, limit, pos ? 0 : offset, pos)
      if (pos) reads.keyset++
      else reads.offset++
      for (const src of SOURCES) if (parts[src]) reads.sources[src]++
      if (keys.length > 0) {
        const [s, src, id] = keys[keys.length - 1]
        if (entry.ends.size >= MAX_ENDS) entry.ends.delete(entry.ends.keys().next().value!)
        entry.ends.set(offset + keys.length, { s, src, id })
      }
      const bySource = new Map<Source, number[]>()
      for (const [, src, id] of keys) {
        const ids = bySource.get(SOURCES[src])
        if (ids) ids.push(id)
        else bySource.set(SOURCES[src], [id])
      }
      const found = new Map<string, AssetRow>()
      for (const [src, ids] of bySource) {
        const values = src === 'agent' ? { ids: JSON.stringify(ids) } : { ids: JSON.stringify(ids), rare: JSON.stringify(q.rare) }
        for (const r of rows[src].all(src === 'host' ? { ids: values.ids } : values) as AssetRow[]) found.set(`${src}:${r.rowid}`, r)
      }
      return { filtered, rows: keys.map(([, src, id]) => found.get(`${SOURCES[src]}:${id}`)).filter((r): r is AssetRow => r !== undefined) }
    },

    /**
     * Counts by type, risk level, online state and newness (first seen at or after `since`),
     * over every asset, read a range of rows at a time: yields between ranges (each sized to
     * take about `sliceMs`), so that a caller can let other work run in between.
     */
    *summary(rare: string[], since: number, sliceMs = 20, rows = RANGE_ROWS): Generator<void, AssetCounts[]> {
      const tally = new Map<string, AssetCounts>()
      for (const src of SOURCES) {
        yield* inRanges(lastIds[src].get() ?? null, sliceMs, rows, (from, to) => {
          const values = { rare: JSON.stringify(rare), since, from, to }
          for (const c of summaries[src].all(src === 'peripheral' ? values : { since, from, to }) as AssetCounts[]) {
            const k = `${c.type}:${c.risk_level}:${c.is_online}:${c.is_new}`
            const seen = tally.get(k)
            if (seen) seen.n += c.n
            else tally.set(k, { ...c })
          }
        })
      }
      return [...tally.values()]
    },

    /**
     * Switches the agents report, and those first reported since `since` (every agent behind
     * them enrolled since), read a range of agents at a time as `summary` is: in one
     * statement, grouping 100,000 agents held the event loop about 100 ms.
     */
    *switches(since: number, sliceMs = 20, rows = RANGE_ROWS): Generator<void, { n: number; fresh: number }> {
      // First enrollment by switch: name by IP address, both lower-cased as the grouping was.
      const first = new Map<string, Map<string, number>>()
      yield* inRanges(lastIds.agent.get() ?? null, sliceMs, rows, (from, to) => {
        for (const [ip, name, enrolled] of switchesIn.all({ from, to })) {
          let byName = first.get(ip)
          if (!byName) first.set(ip, (byName = new Map()))
          const seen = byName.get(name)
          if (seen === undefined || enrolled < seen) byName.set(name, enrolled)
        }
      })
      let n = 0
      let fresh = 0
      for (const byName of first.values()) {
        for (const enrolled of byName.values()) {
          n++
          if (enrolled >= since) fresh++
        }
      }
      return { n, fresh }
    },
  }
}
export type AssetsRepo = ReturnType<typeof assetsRepo>

/** Rows in the first range of a walk, and the bounds the later ones are sized within. */
const RANGE_ROWS = { first: 2000, min: 500, max: 100_000 }

/**
 * Reads ids up to `last` in ranges (`from` exclusive, `to` inclusive), yielding after each:
 * the next range is sized to take about `sliceMs` at this one's pace, within `rows`' bounds.
 */
function* inRanges(last: number | null, sliceMs: number, rows: typeof RANGE_ROWS, read: (from: number, to: number) => void): Generator<void, void> {
  let size = rows.first
  for (let from = 0; last !== null && from < last; ) {
    const t0 = performance.now()
    read(from, from + size)
    const took = performance.now() - t0
    from += size
    size = Math.min(rows.max, Math.max(rows.min, Math.round(took > 0 ? (size * sliceMs) / took : size * 2)))
    yield
  }
}
