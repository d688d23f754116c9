// Events and audit records: the lists with every filter and sort, the integration feeds
// and the streamed exports, at millions of rows.
//
// How a question is answered (the index is db/event-engine/event-index.ts, maintained off the write path):
// - Filters on the low-cardinality fields (severity, category, icon, description; for
//   audit records also outcome, operation and asset type) select kinds; time and id
//   ranges select blocks of ids. Counts add up whole blocks and read rows only at the
//   ends of a range; a page skips the blocks without matches.
// - "Contains" filters and GlobalSearch on events look through the distinct sources and
//   documents (trigram indexes) and add up their counts; a page is read through the
//   events' asset index when the matches are few, or by walking the newest rows when
//   they are many (whichever reads fewer rows, from the exact count).
// - Records above the index's high-water mark are read directly, so every answer is exact.
//
// The parts: what they share (db/event-engine/event-query-state.ts), counting (db/event-engine/event-counts.ts), the
// pages (db/event-engine/event-pages.ts) and the streamed reads and exports (db/event-engine/event-stream.ts); plans
// (db/event-engine/event-plans.ts), rows (db/event-rows.ts) and the index's catch-up (db/event-engine/event-catch-up.ts).
import { setImmediate as pause } from 'node:timers/promises'
import type { DB } from '../index.js'
import { statementCache } from '../sql.js'
import type { Sort } from '../../lib/ports.js'
import { indexCatchUp } from './event-catch-up.js'
import { recordIndexer, type IndexerOptions } from './event-index.js'
import type { AuditFilter, AuditTrailRow, EventFilter, EventRow, ListAnswer, RecordTable } from '../../lib/events/ports.js'
import { auditPlan, eventPlan, type Plan } from './event-plans.js'
import { recordTables, type QueryState } from './event-query-state.js'
import { eventCounts } from './event-counts.js'
import { eventPages, type Raw } from './event-pages.js'
import { eventStream, type StreamOffload } from './event-stream.js'
import { registerEventContains } from '../match.js'
import { termThread } from './term-thread.js'
import { GLOBAL_SOURCE_COLUMNS, type SourceColumn } from './source-names.js'

export { textMatch } from './event-plans.js'

/**
 * A text term's first search over at least this many documents runs its index query (the
 * phrase, or the AND of its rarest trigrams) in a thread (db/event-engine/term-thread.ts);
 * fewer are read on the request's own turn (a few ms at most).
 */
const PHRASE_THREAD_DOCS = 65_536

export interface EventQueriesOptions extends IndexerOptions {
  /** Phrase queries over more documents than this run in a thread (default PHRASE_THREAD_DOCS; none for a database in memory). */
  phraseThreadDocs?: number
  /** The listed documents of the text counts kept (default KEPT_DOCS_MAX, db/event-engine/event-counts.ts). */
  keptDocsMax?: number
}

export function eventQueriesRepo(db: DB, opts: EventQueriesOptions = {}) {
  const indexer = recordIndexer(db, opts)
  const cached = statementCache(db, 256)
  registerEventContains(db)

  const tables = recordTables()
  const maxId = { events: db.prepare('SELECT max(id) FROM events').pluck(), audit_trail: db.prepare('SELECT max(id) FROM audit_trail').pluck() }
  const topId = (table: RecordTable) => (maxId[table].get() as number | null) ?? 0
  // What a list answer of the table is read from. Records are added (the newest id moves)
  // and pruned (the table's prune count moves); a record changed or deleted any other way
  // marks the index stale, and the indexer then starts over (its restarts move). Another
  // process's commit moves the connection's data_version.
  const versionOf = (table: RecordTable) =>
    db.prepare(`SELECT coalesce((SELECT max(id) FROM ${table}), 0) || ':' || coalesce((SELECT max(prunes) || ':' || max(stale) FROM record_index_state WHERE name = '${table}'), '')`).pluck()
  const versions = { events: versionOf('events'), audit_trail: versionOf('audit_trail') }
  const dataVersion = db.prepare('PRAGMA data_version').pluck()
  const version = (table: RecordTable) => `${versions[table].get() ?? ''}:${indexer.restarts()}:${dataVersion.get()}`
  const hasIndex = (name: string) => !!db.prepare(`SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?`).get(name)
  // The time indexes (migrations 001 and 003): a time order walks them.
  // plan: query-plans "events list" (tests/query-plans.test.ts)
  const byTime = {
    events: hasIndex('events_created') ? 'INDEXED BY events_created' : '',
    audit_trail: hasIndex('audit_trail_created') ? 'INDEXED BY audit_trail_created' : '',
  }

  // ---- background indexing (db/event-engine/event-catch-up.ts) ----
  const catchUp = indexCatchUp(db, indexer)
  const { startIndexing, textsReady } = catchUp

  const state: QueryState = { db, indexer, cached, tables, topId, byTime, startIndexing }
  const counts = eventCounts(state, { keptDocsMax: opts.keptDocsMax, caches: opts.caches })
  const { count } = counts
  const pages = eventPages(state, counts)
  const { list, feed } = pages
  /** A page with its rows as objects (tests, scripts); the API answers from the arrays. */
  const objects = <R>(a: ListAnswer<Raw>, row: (r: Raw) => Record<string, unknown>): ListAnswer<R> => ({ ...a, rows: a.rows.map(row) as R[] })
  // Where the ordered ids of an export or a large page in a computed order are read: a
  // reader thread once the app has given one (readIdsWith), else here.
  const offload: StreamOffload = { ids: null }
  const { chunks, pageChunks, iterate } = eventStream(state, counts, pages, offload)
  /** A page of the feed in id order as the ids alone (the rows are read by whoever lacks them). */
  const feedIds = (p: Plan, s: Sort, limit: number, offset: number): ListAnswer<number> => {
    if (p.times === null && !p.kindOk && !p.kindSql && !p.textSql && !p.text && !p.empty) {
      // Ids are integers, each used once: an id range holding as many records as it is wide
      // holds every id in it (a feed from an id, nothing deleted since), so its page is
      // known without reading it. The newest id is read after the count: a record added
      // meanwhile makes the range wider than the count, and the page is read.
      const counted = feed({ ...p, columns: 'e.id' }, s, 0, 0)
      const lo = Math.max(p.ids.lo, 1)
      const hi = Math.min(p.ids.hi, topId(p.table))
      if (hi >= lo && counted.filtered === hi - lo + 1) {
        const first = lo + offset
        const n = Math.max(0, Math.min(limit, hi - first + 1))
        const rows: number[] = new Array(n)
        if (s.direction === 'asc') for (let i = 0; i < n; i++) rows[i] = first + i
        else for (let i = 0; i < n; i++) rows[i] = first + n - 1 - i
        return { ...counted, rows }
      }
    }
    const a = feed({ ...p, columns: 'e.id' }, s, limit, offset)
    return { ...a, rows: a.rows.map((r) => r[0] as number) }
  }
  // The peripheral ids' device parts that term searches use (db/event-engine/term-search.ts): read a
  // slice at a time after the first text filter, between other requests; searches read the
  // texts of the documents not covered yet meanwhile.
  // Again after each text filter: the documents indexed since are read the same way.
  let readingParts: Promise<void> | null = null
  const readParts = (): Promise<void> =>
    (readingParts ??= (async () => {
      do await pause()
      while (db.open && counts.termDocs.prepare())
    })()
      .catch(() => {})
      .finally(() => {
        readingParts = null
      }))
  // The sources' names the plan's source terms search (db/event-engine/source-names.ts), read a slice at
  // a time before the first such search (then a search reads only the few names added since):
  // reading 100,000 sources' names takes a few hundred ms.
  let readingNames: Promise<void> | null = null
  const namesReady = (columns: SourceColumn[]): Promise<void> | undefined => {
    if (!counts.names.lagging(columns)) return undefined
    readingNames ??= (async () => {
      do await pause()
      while (db.open && counts.names.prepare(columns))
    })().finally(() => {
      readingNames = null
    })
    // Another question's columns may be read meanwhile: this one's are read after.
    return readingNames.then(() => namesReady(columns))
  }
  // Phrase queries of terms' first searches, on a connection of their own: awaited by
  // `ready`, so that no other request waits for them.
  const thread = db.memory || !db.name ? null : termThread(db.name)
  const phraseThreadDocs = opts.phraseThreadDocs ?? PHRASE_THREAD_DOCS
  // The questions in the thread by term: requests for the same new term (a console's tiles,
  // several users) wait for one answer rather than each asking again.
  const asking = new Map<string, Promise<void>>()
  const phrasesReady = (p: Plan): Promise<void> | undefined => {
    const asked = thread ? counts.phraseTerms(p, phraseThreadDocs) : []
    if (!asked.length) return undefined
    return Promise.all(
      asked.map(({ key, query, after, upTo, decide }) => {
        let answer = asking.get(key)
        if (!answer) {
          answer = thread!
            .phrase(query, after, upTo)
            .then(
              (ids) => counts.rememberPhrase(key, after, upTo, () => decide(ids)),
              // The thread could not answer: the search runs the query itself.
              () => {},
            )
            .finally(() => asking.delete(key))
          asking.set(key, answer)
        }
        return answer
      }),
    ).then(() => {})
  }
  const byIds = {
    events: db.prepare(`SELECT ${tables.events.columns} FROM events e WHERE e.id IN (SELECT value FROM json_each(?))`).raw(true),
    audit_trail: db.prepare(`SELECT ${tables.audit_trail.columns} FROM audit_trail e WHERE e.id IN (SELECT value FROM json_each(?))`).raw(true),
  }

  return {
    indexer,
    /** The text counts kept now, and the documents and sources they list (tests, benchmarks). */
    keptTexts: () => counts.keptTexts(),
    /** The phrase queries a text filter's search would ask of the thread now (tests). */
    phrasesToAsk: (f: EventFilter, minDocs = 0) => counts.phraseTerms(eventPlan(f), minDocs),
    /**
     * Reads the ordered ids of an export or a large page in a computed order (a text field's
     * sort: SQLite sorts every match before its first row) with `read`: a reader thread.
     */
    readIdsWith(read: StreamOffload['ids']): void {
      offload.ids = read
    },
    /** Stops the phrase queries' thread (before the database closes). */
    close: async () => {
      await thread?.stop()
    },
    /** Wants indexing in the background (the first list does it too). */
    startIndexing,
    indexSlice: catchUp.indexSlice,
    warm: catchUp.warm,
    /** `fn` is called when indexing becomes wanted (the loop that runs the slices). */
    onIndexWanted: catchUp.onIndexWanted,
    /** Stops (true) or allows (false) indexing in the background: tests drive it with `catchUp` and `indexer.step`. */
    holdIndexing: catchUp.holdIndexing,
    /** Indexes everything written so far, now (tests, scripts); answers how many records. */
    catchUp(): number {
      return indexer.catchUp('events') + indexer.catchUp('audit_trail')
    },
    events: {
      /**
       * Awaited before a query with a text filter, so that reading the index's texts (the
       * first such query after a start) holds up no other request; undefined when nothing
       * is to be awaited.
       */
      ready: (f: EventFilter): Promise<void> | undefined => {
        const plan = eventPlan(f)
        const text = plan.text
        if (text === null) return undefined
        void readParts()
        const columns = [...new Set([...text.source.flatMap((s) => s.columns), ...(text.global ? GLOBAL_SOURCE_COLUMNS : [])])]
        const waits = [textsReady(), columns.length ? namesReady(columns) : undefined, phrasesReady(plan)].filter((w) => w !== undefined)
        // A new term's text count (tens of ms at millions of events) in a turn of its own, once
        // the rest is ready, and the question itself in the turn after it.
        const counted = () =>
          new Promise<void>((resolve) =>
            setImmediate(() => {
              if (db.open && counts.prepareText(plan)) setImmediate(resolve)
              else resolve()
            }),
          )
        if (waits.length) return Promise.all(waits).then(counted)
        return counts.textPending(plan) ? counted() : undefined
      },
      /** Reads the peripheral ids' device parts that are not read yet, as after a text filter (scripts: a benchmark's floors). */
      partsRead: (): Promise<void> => readParts(),
      list: (f: EventFilter, s: Sort, limit: number, offset: number) => objects<EventRow>(list(eventPlan(f), s, limit, offset), tables.events.row),
      feed: (f: EventFilter, s: Sort, limit: number, offset: number) => objects<EventRow>(feed(eventPlan(f), s, limit, offset), tables.events.row),
      /** A page of the list (or of the feed), rows as arrays of EVENT_FIELDS; a list sorted by a free text reads no row above `sortMax` matches. */
      pageRows: (f: EventFilter, s: Sort, limit: number, offset: number, isFeed = false, sortMax?: number) =>
        isFeed ? feed(eventPlan(f), s, limit, offset) : list(eventPlan(f), s, limit, offset, sortMax),
      /** A large page of the list (or of the feed) as chunks of rows as arrays of EVENT_FIELDS, with the counts. */
      pageChunks: (f: EventFilter, s: Sort, limit: number, offset: number, isFeed = false) => pageChunks(eventPlan(f), s, limit, offset, isFeed),
      count: (f: EventFilter) => {
        startIndexing()
        return count(eventPlan(f)).filtered
      },
      iterate: (f: EventFilter, s: Sort, cap: number) => iterate<EventRow>(eventPlan(f), s, cap),
      /** The same rows as arrays of EVENT_FIELDS, in chunks (the CSV export). */
      rawChunks: (f: EventFilter, s: Sort, cap: number) => chunks(eventPlan(f), s, cap, true),
      lastId: () => topId('events'),
      version: () => version('events'),
      /** A page of the feed sorted by id, as the ids of its rows (the counts as for pageRows). */
      feedIds: (f: EventFilter, s: Sort, limit: number, offset: number) => feedIds(eventPlan(f), s, limit, offset),
      /** The rows of these ids that exist, as arrays of EVENT_FIELDS, in no particular order. */
      rowsByIds: (ids: number[]) => (ids.length ? (byIds.events.all(JSON.stringify(ids)) as unknown[][]) : []),
    },
    audit: {
      list: (f: AuditFilter, s: Sort, limit: number, offset: number) => objects<AuditTrailRow>(list(auditPlan(f), s, limit, offset), tables.audit_trail.row),
      feed: (f: AuditFilter, s: Sort, limit: number, offset: number) => objects<AuditTrailRow>(feed(auditPlan(f), s, limit, offset), tables.audit_trail.row),
      /** A page of the list (or of the feed), rows as arrays of AUDIT_FIELDS; a list sorted by a free text reads no row above `sortMax` matches. */
      pageRows: (f: AuditFilter, s: Sort, limit: number, offset: number, isFeed = false, sortMax?: number) =>
        isFeed ? feed(auditPlan(f), s, limit, offset) : list(auditPlan(f), s, limit, offset, sortMax),
      /** A large page of the list (or of the feed) as chunks of rows as arrays of AUDIT_FIELDS, with the counts. */
      pageChunks: (f: AuditFilter, s: Sort, limit: number, offset: number, isFeed = false) => pageChunks(auditPlan(f), s, limit, offset, isFeed),
      count: (f: AuditFilter) => {
        startIndexing()
        return count(auditPlan(f)).filtered
      },
      iterate: (f: AuditFilter, s: Sort, cap: number) => iterate<AuditTrailRow>(auditPlan(f), s, cap),
      /** The same rows as arrays of AUDIT_FIELDS, in chunks (the CSV export). */
      rawChunks: (f: AuditFilter, s: Sort, cap: number) => chunks(auditPlan(f), s, cap, true),
      lastId: () => topId('audit_trail'),
      version: () => version('audit_trail'),
      /** A page of the feed sorted by id, as the ids of its rows (the counts as for pageRows). */
      feedIds: (f: AuditFilter, s: Sort, limit: number, offset: number) => feedIds(auditPlan(f), s, limit, offset),
      /** The rows of these ids that exist, as arrays of AUDIT_FIELDS, in no particular order. */
      rowsByIds: (ids: number[]) => (ids.length ? (byIds.audit_trail.all(JSON.stringify(ids)) as unknown[][]) : []),
    },
  }
}
export type EventQueriesRepo = ReturnType<typeof eventQueriesRepo>
