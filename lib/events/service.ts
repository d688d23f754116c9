// Events and the audit trail: their lists, the integration feeds (and the SOAR incident
// fetch, which gets the feed's page) and their exports. Takes plain inputs (the caller's
// context, the parsed filters, sort and page), so it runs without Fastify.
import type { Readable } from 'node:stream'
import { Cache } from '../../db/cache.js'
import { EVENT_ROW_SORTS } from '../../db/event-queries.js'
import { invalidField } from '../errors.js'
import { AnswerParts, streamedPages, type Page, type Sort } from '../listing.js'
import { pdfStream, type PdfColumn } from '../pdf.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail } from '../platform/ports.js'
import { auditCells, auditPdfColumns, csvFile, eventCells, eventPdfColumns, exportFileName, exportLimits, exportType, type Cells, type ExportFormat } from './exports.js'
import type { AuditFilter, EventFilter } from './filter.js'
import { auditAnswer, eventsAnswer } from './views.js'
import type { AuditRecordStore, AuditTrailRow, EventRow, EventStore, ListAnswer, PageChunks, RecordStore } from './ports.js'

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
  const kept = new Cache<string, { version: string; text: string | AnswerParts }>({ max: keep })
  // An answer is kept the second time its question is asked: answers asked once (a feed
  // from a random id) would otherwise all live long enough to be copied into the old
  // generation, and every young collection then copies them (measured: 2 MB promoted per
  // collection instead of 45 kB, collections of 14 ms instead of 1.6 ms).
  const asked = new Cache<string, true>({ max: 4 * keep })

  async function answered<F, R>(store: RecordStore<F, R>, key: string, build: () => Promise<RecordPage>, text: (p: RecordPage) => string | Readable): Promise<string | Readable> {
    // Read before the rows: an answer is never older than the version it is kept under.
    const version = await store.version()
    const hit = kept.get(key)
    if (hit && hit.version === version) return typeof hit.text === 'string' ? hit.text : hit.text.again()
    const answer = text(await build())
    if (!hit && !asked.get(key)) {
      asked.set(key, true)
      return answer
    }
    if (typeof answer === 'string') {
      if (answer.length <= KEEP_ANSWER_CHARS) kept.set(key, { version, text: answer })
    } else if (answer instanceof AnswerParts && answer.bytes <= KEEP_ANSWER_CHARS) kept.set(key, { version, text: answer })
    return answer
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
      return answered(events, keyOf(incidentFetch ? 'incident' : 'events', filter, order, page), () => service.events(filter, order, page, incidentFetch), eventsAnswer)
    },

    /** The events feed's answer as JSON text (or its stream), kept for a repeated question. */
    eventFeedAnswer(filter: EventFilter, order: Sort, page: Page): Promise<string | Readable> {
      return answered(events, keyOf('event-feed', filter, order, page), () => service.eventFeed(filter, order, page), eventsAnswer)
    },

    /** The audit trail's answer as JSON text (or its stream), kept for a repeated question. */
    auditTrailAnswer(filter: AuditFilter, order: Sort, page: Page): Promise<string | Readable> {
      return answered(auditRecords, keyOf('audit', filter, order, page), () => service.auditTrail(filter, order, page), auditAnswer)
    },

    /** The audit feed's answer as JSON text (or its stream), kept for a repeated question. */
    auditFeedAnswer(filter: AuditFilter, page: Page): Promise<string | Readable> {
      return answered(auditRecords, keyOf('audit-feed', filter, NEWEST_AUDIT, page), () => service.auditFeed(filter, page), auditAnswer)
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
