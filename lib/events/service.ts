// Events and the audit trail: their lists, the integration feeds (and the SOAR incident
// fetch, which gets the feed's page) and their exports. Takes plain inputs (the caller's
// context, the parsed filters, sort and page), so it runs without Fastify.
import type { Readable } from 'node:stream'
import { cacheIn, type CacheRegistry } from '../platform/cache.js'
import { invalidField } from '../errors.js'
import { AnswerParts, listAnswerOfBytes, streamedPages, type Page, type Sort } from '../listing.js'
import { pdfStream, type PdfColumn } from '../pdf.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail } from '../platform/ports.js'
import { auditCells, auditPdfColumns, csvFile, eventCells, eventPdfColumns, exportFileName, exportLimits, exportType, type Cells, type ExportFormat } from './exports.js'
import type { AuditFilter, EventFilter } from './filter.js'
import { KeptRecords } from './kept-records.js'
import { auditAnswer, auditViewOf, eventViewOf, eventsAnswer } from './views.js'
import { EVENT_ROW_SORTS, type AuditRecordStore, type AuditTrailRow, type EventRow, type EventStore, type ListAnswer, type PageChunks, type RecordStore } from './ports.js'

export interface EventServiceDeps {
  events: EventStore
  auditRecords: AuditRecordStore
  audit: AuditTrail
  /** The CSV columns of each export, in the contract's order (PrimeEventView; AuditTrailView with assetReference flattened). */
  csvColumns: { events: string[]; audit: string[] }
  now?: () => number
  /** The events list sorted by a free-text field serves at most this many matches (SORT_ROWS_MAX; tests lower it). */
  sortRowsMax?: number
  /** List answers kept for repeated questions (default 64; 0 keeps none). */
  keptAnswers?: number
  /** The app's caches, where the kept answers are made (absent: caches of its own). */
  caches?: CacheRegistry
}

/**
 * The matching events up to which the events list is sorted by a free-text field
 * (EVENT_ROW_SORTS: no index holds their order, so every match is read and sorted, about
 * 2 ms per thousand). Above it the list answers 400 (the contract's EventsSortBy says so);
 * the feeds sort only their page, and the exports, which stream, sort any number.
 */
export const SORT_ROWS_MAX = 20_000

/**
 * A page of records, rows as arrays of the fields (EVENT_FIELDS, AUDIT_FIELDS): the whole
 * page, or (above streamedPages.above rows) chunks of them.
 */
export type RecordPage = ListAnswer<unknown[]> & { chunks?: PageChunks['chunks'] }

/** What an export asked for, parsed. */
export interface ExportInput<F> {
  filter: F
  order: Sort
  format: ExportFormat
  /** The filters given, as label and value (the audit record's details and the PDF's header). */
  filters: [string, string][]
  /** Who the PDF says exported it (the account or token name). */
  exportedBy: string
}

export interface ExportFile {
  fileName: string
  type: string
  /** The records that matched when the export started, and whether the file holds fewer (the format's limit). */
  matched: number
  truncated: boolean
  body: Readable
}

/** The newest first: the order of the feeds' pages. */
const NEWEST_EVENTS: Sort = { field: 'eventID', direction: 'desc' }
const NEWEST_AUDIT: Sort = { field: 'auditTrailID', direction: 'desc' }

interface ExportKind<F, R> {
  store: RecordStore<F, R>
  what: 'events' | 'audit records'
  prefix: string
  title: string
  cells: Cells
  columns: string[]
  pdfColumns: PdfColumn<R>[]
}

/** Records whose JSON text is kept for large feed pages (about 550 bytes each). */
export const KEEP_RECORD_TEXTS = 20_000
/** Feed pages of at least this many rows are written from the records' kept texts. */
const TEXT_PAGE_ROWS = 129

/** Answers of at most this many characters (bytes when in parts) are kept (a console's page, an integration's page of a few hundred). */
export const KEEP_ANSWER_CHARS = 256 * 1024

export function eventService(deps: EventServiceDeps) {
  const { events, auditRecords, audit } = deps
  const now = deps.now ?? Date.now
  const sortRowsMax = deps.sortRowsMax ?? SORT_ROWS_MAX
  // The text of recent list answers, each with the version of the records it was read from
  // (RecordStore.version): the same question asked again before anything is added or pruned
  // (consoles on their default page, integrations polling a quiet feed) is answered
  // without reading or writing a row.
  const keep = deps.keptAnswers ?? 64
  const kept = cacheIn<string, { version: string; text: string | AnswerParts }>(deps.caches, {
    name: 'event-list-answers',
    signal: "the records' version: a record added or pruned, the index starting over, another process's commit",
    max: keep,
    maxBytes: 32 * 1024 * 1024,
    sizeOf: (v, key) => 2 * key.length + 2 * v.version.length + (typeof v.text === 'string' ? 2 * v.text.length : v.text.bytes),
  })
  // An answer is kept the second time its question is asked: answers asked once (a feed
  // from a random id) would otherwise all live long enough to be copied into the old
  // generation, and every young collection then copies them (measured: 2 MB promoted per
  // collection instead of 45 kB, collections of 14 ms instead of 1.6 ms).
  const asked = cacheIn<string, true>(deps.caches, {
    name: 'event-list-asked',
    signal: 'none: a question asked once, remembered until pushed out',
    max: 4 * keep,
    maxBytes: 1024 * 1024,
    sizeOf: (_, key) => 2 * key.length,
  })

  async function answered<F, R>(store: RecordStore<F, R>, key: string, build: () => Promise<string | Readable>): Promise<string | Readable> {
    // Read before the rows: an answer is never older than the version it is kept under.
    const version = await store.version()
    // An answer kept at another version is a miss (and dropped), not a hit; its question was asked before.
    const askedBefore = kept.has(key)
    const hit = kept.getValid(key, (h) => h.version === version)
    if (hit) return typeof hit.text === 'string' ? hit.text : hit.text.again()
    const answer = await build()
    if (!askedBefore && !asked.get(key)) {
      asked.set(key, true)
      return answer
    }
    if (typeof answer === 'string') {
      if (answer.length <= KEEP_ANSWER_CHARS) kept.set(key, { version, text: answer })
    } else if (answer instanceof AnswerParts && answer.bytes <= KEEP_ANSWER_CHARS) kept.set(key, { version, text: answer })
    return answer
  }
  // Each record's JSON, kept by id for large feed pages (KeptRecords). Records never change
  // once written (a change outside a prune marks the index stale, which moves the version),
  // so a record's JSON stands while the version, the newest id aside, does.
  const textsOf = (view: (r: unknown[]) => unknown) => ({ view, kept: new KeptRecords(KEEP_RECORD_TEXTS, deps.caches?.on ?? true), valid: '' })
  const texts = { events: textsOf(eventViewOf), audit: textsOf(auditViewOf) }

  /**
   * A large feed page sorted by id, written from each record's kept JSON: its ids are read,
   * then the rows of the records not kept. Undefined when a record went meanwhile (a
   * prune): the caller then reads the page whole.
   */
  async function feedFromTexts<F, R>(store: RecordStore<F, R>, t: ReturnType<typeof textsOf>, version: string, filter: F, order: Sort, page: Page): Promise<string | Readable | undefined> {
    const standing = version.slice(version.indexOf(':') + 1)
    if (t.valid !== standing) {
      t.kept.clear()
      t.valid = standing
    }
    const a = await store.feedIds(filter, order, page.pageSize, page.offset)
    const out: Buffer[] = new Array(a.rows.length)
    const missing: number[] = []
    const at = new Map<number, number>()
    for (let i = 0; i < a.rows.length; i++) {
      const json = t.kept.get(a.rows[i])
      if (json === undefined) {
        missing.push(a.rows[i])
        at.set(a.rows[i], i)
      } else out[i] = json
    }
    if (missing.length) {
      const rows = await store.rowsByIds(missing)
      if (rows.length !== missing.length) return undefined
      for (const r of rows) {
        const id = r[0] as number
        const json = Buffer.from(`,${JSON.stringify(t.view(r))}`)
        out[at.get(id)!] = json
        t.kept.read(id, json)
      }
    }
    return listAnswerOfBytes(a.total, a.filtered, out, a.filteredExact !== false)
  }

  /** A feed's answer: a large page sorted by id from the records' kept texts, any other whole. */
  async function feedAnswer<F, R>(
    store: RecordStore<F, R>,
    t: ReturnType<typeof textsOf>,
    idField: string,
    filter: F,
    order: Sort,
    page: Page,
    whole: () => Promise<RecordPage>,
    text: (p: RecordPage) => string | Readable,
  ) {
    if (order.field === idField && page.pageSize >= TEXT_PAGE_ROWS && page.pageSize <= streamedPages.above) {
      const answer = await feedFromTexts(store, t, await store.version(), filter, order, page)
      if (answer !== undefined) return answer
    }
    return text(await whole())
  }

  const keyOf = (what: string, filter: unknown, order: Sort, page: Page) => `${what} ${order.field} ${order.direction} ${page.pageSize} ${page.offset} ${JSON.stringify(filter)}`

  async function pageOf<F, R>(store: RecordStore<F, R>, filter: F, order: Sort, { pageSize, offset }: Page, feed: boolean): Promise<RecordPage> {
    if (pageSize > streamedPages.above) return store.pageChunks(filter, order, pageSize, offset, feed)
    return store.pageRows(filter, order, pageSize, offset, feed)
  }

  /** The refusal of a list sorted by a free text of more than sortRowsMax matches. */
  const unsortable = (order: Sort, matched: number) =>
    invalidField(
      'query',
      'SortBy',
      `sorting by ${order.field} needs filters leaving at most ${sortRowsMax} events (these leave ${matched}): narrow with FromDate/ToDate, FromEventId/ToEventId or a text filter, or sort by eventID, date or a field such as severity`,
    )

  /** Streams the matching records as a CSV or PDF file, audited with what was asked. */
  async function exportOf<F extends { idTo: number; empty: boolean }, R>(ctx: Context, kind: ExportKind<F, R>, input: ExportInput<F>): Promise<ExportFile> {
    const { filter, order, format } = input
    // The records of the moment the export starts: the count in the headers is the file's
    // (and this export's own audit record, written next, is not in it).
    filter.idTo = Math.min(filter.idTo, await kind.store.lastId())
    filter.empty ||= filter.idTo < 1
    const cap = exportLimits[format]
    const ms = now()
    const matched = await kind.store.count(filter)
    const truncated = matched > cap
    const fileName = exportFileName(kind.prefix, ms, format)
    const sortBy = `${order.field}_${order.direction}`
    await audit.record(ctx, {
      description: `Exported ${Math.min(matched, cap)} ${kind.what} as ${format.toUpperCase()} (${fileName})${truncated ? `; ${matched} matched, cut to ${cap}` : ''}`,
      details: { format, fileName, records: Math.min(matched, cap), matched, truncated, filters: Object.fromEntries(input.filters), sortBy },
    })
    const body =
      format === 'csv'
        ? csvFile(kind.columns, kind.cells, await kind.store.rawChunks(filter, order, cap))
        : pdfStream({
            title: `${kind.title} - exported by ${input.exportedBy}`,
            filters: input.filters,
            sortedBy: sortBy,
            generatedMs: ms,
            total: matched,
            noun: kind.what,
            columns: kind.pdfColumns,
            rows: await kind.store.iterate(filter, order, cap),
            maxRows: cap,
          })
    return { fileName, type: exportType(format), matched, truncated, body }
  }

  const eventExport: ExportKind<EventFilter, EventRow> = {
    store: events,
    what: 'events',
    prefix: 'events',
    title: 'Events',
    cells: eventCells,
    columns: deps.csvColumns.events,
    pdfColumns: eventPdfColumns,
  }
  const auditExport: ExportKind<AuditFilter, AuditTrailRow> = {
    store: auditRecords,
    what: 'audit records',
    prefix: 'audit-trails',
    title: 'Audit trail',
    cells: auditCells,
    columns: deps.csvColumns.audit,
    pdfColumns: auditPdfColumns,
  }

  const service = {
    /** A page of the events list; the SOAR integration's incident fetch (see isIncidentFetch) gets the feed's page, newest first. */
    async events(filter: EventFilter, order: Sort, page: Page, incidentFetch = false): Promise<RecordPage> {
      await events.ready(filter)
      if (incidentFetch) return pageOf(events, filter, NEWEST_EVENTS, page, true)
      if (page.pageSize > streamedPages.above) {
        // A streamed page is counted before its chunks are read: refused on that count.
        if (EVENT_ROW_SORTS.includes(order.field)) {
          const matched = await events.count(filter)
          if (matched > sortRowsMax) throw unsortable(order, matched)
        }
        return events.pageChunks(filter, order, page.pageSize, page.offset, false)
      }
      // The matches are counted once: above the limit no row is read.
      const answer = await events.pageRows(filter, order, page.pageSize, page.offset, false, sortRowsMax)
      if (answer.tooManyToSort) throw unsortable(order, answer.filtered)
      return answer
    },

    /** A page of the integration feed of events (its sort orders the page's rows only: no limit). */
    async eventFeed(filter: EventFilter, order: Sort, page: Page): Promise<RecordPage> {
      await events.ready(filter)
      return pageOf(events, filter, order, page, true)
    },

    /** A page of the audit trail. */
    auditTrail(filter: AuditFilter, order: Sort, page: Page): Promise<RecordPage> {
      return pageOf(auditRecords, filter, order, page, false)
    },

    /** A page of the integration feed of audit records, newest first. */
    auditFeed(filter: AuditFilter, page: Page): Promise<RecordPage> {
      return pageOf(auditRecords, filter, NEWEST_AUDIT, page, true)
    },

    /** The events list's answer as JSON text (or its stream), kept for a repeated question. */
    eventsAnswer(filter: EventFilter, order: Sort, page: Page, incidentFetch = false): Promise<string | Readable> {
      const whole = () => service.events(filter, order, page, incidentFetch)
      if (incidentFetch) {
        return answered(events, keyOf('incident', filter, order, page), async () => {
          await events.ready(filter)
          return feedAnswer(events, texts.events, 'eventID', filter, NEWEST_EVENTS, page, whole, eventsAnswer)
        })
      }
      return answered(events, keyOf('events', filter, order, page), async () => eventsAnswer(await whole()))
    },

    /** The events feed's answer as JSON text (or its stream), kept for a repeated question. */
    eventFeedAnswer(filter: EventFilter, order: Sort, page: Page): Promise<string | Readable> {
      return answered(events, keyOf('event-feed', filter, order, page), async () => {
        await events.ready(filter)
        return feedAnswer(events, texts.events, 'eventID', filter, order, page, () => service.eventFeed(filter, order, page), eventsAnswer)
      })
    },

    /** The audit trail's answer as JSON text (or its stream), kept for a repeated question. */
    auditTrailAnswer(filter: AuditFilter, order: Sort, page: Page): Promise<string | Readable> {
      return answered(auditRecords, keyOf('audit', filter, order, page), async () => auditAnswer(await service.auditTrail(filter, order, page)))
    },

    /** The audit feed's answer as JSON text (or its stream), kept for a repeated question. */
    auditFeedAnswer(filter: AuditFilter, page: Page): Promise<string | Readable> {
      return answered(auditRecords, keyOf('audit-feed', filter, NEWEST_AUDIT, page), () =>
        feedAnswer(auditRecords, texts.audit, 'auditTrailID', filter, NEWEST_AUDIT, page, () => service.auditFeed(filter, page), auditAnswer),
      )
    },

    async exportEvents(ctx: Context, input: ExportInput<EventFilter>): Promise<ExportFile> {
      await events.ready(input.filter)
      return exportOf(ctx, eventExport, input)
    },

    exportAudit(ctx: Context, input: ExportInput<AuditFilter>): Promise<ExportFile> {
      return exportOf(ctx, auditExport, input)
    },
  }
  return service
}

export type EventService = ReturnType<typeof eventService>
