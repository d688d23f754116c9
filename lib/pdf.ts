// PDF reports as streams, for every export and scheduled report: a title, the filters
// applied, when it was generated, how many records, then a landscape table with its
// header on every page and "Page n of m" on each.
//
// Every row is one line high (long cells end in "…"), so the page count follows from the
// record count known at the start: the pages are written as they are filled, never held
// in memory (pdfkit's bufferPages would keep every page until the end).
import { once } from 'node:events'
import { PassThrough, type Readable } from 'node:stream'
import { createRequire } from 'node:module'
import type PDFKit from 'pdfkit'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { FONT, BOLD, printable, pdfPen } from './pdf-text.js'

/** pdfkit, loaded on first use: it is the slowest module to load, and most starts never draw a PDF. */
export const loadPdfKit = (): typeof PDFKit => createRequire(import.meta.url)('pdfkit')

export const PDF_TYPE = 'application/pdf'
export const MAX_PDF_ROWS = 50_000

export interface PdfColumn<T> {
  header: string
  /** Relative width: the columns are scaled to the width of the page. */
  width: number
  align?: 'left' | 'right'
  value: (row: T) => string | number | boolean | null | undefined
}

export interface PdfReport<T> {
  title: string
  /** The filters applied, as label and value; none means every record. */
  filters: [string, string][]
  /** The order of the rows, when it is worth saying (`hostIdentifier_asc`). */
  sortedBy?: string
  generatedMs: number
  /** The records that match, counted when the export started. */
  total: number
  /** What the records are, plural ("agents"), for the count and the last line. */
  noun: string
  columns: PdfColumn<T>[]
  rows: AsyncIterable<T> | Iterable<T>
  /** Rows shown at most; beyond them the last line says how many were left out. */
  maxRows?: number
}

// A4 landscape, in points.
const PAGE = { width: 841.89, height: 595.28, margin: 36 }
const CONTENT_WIDTH = PAGE.width - 2 * PAGE.margin
const CELL_SIZE = 7.5
const ROW_HEIGHT = 12
const HEADER_HEIGHT = 16
const PADDING = 3
const TITLE_SIZE = 16
const INFO_SIZE = 9
const INFO_LINE = 13
const FOOTER_SIZE = 8
const TABLE_BOTTOM = PAGE.height - PAGE.margin - 8
const MAX_FILTER_LINES = 12

const cellText = (v: string | number | boolean | null | undefined) => (v === null || v === undefined ? '' : typeof v === 'boolean' ? (v ? 'Yes' : 'No') : printable(String(v)))

/** `2025-01-01 12:00:05 UTC` */
export const utcText = (ms: number) => new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC')

/** Page layout of a report: where the table starts and how many lines each page holds. */
function layout(filterLines: number) {
  const infoTop = PAGE.margin + TITLE_SIZE + 10
  const firstTableTop = infoTop + (3 + filterLines) * INFO_LINE + 8
  const rowsOn = (top: number) => Math.floor((TABLE_BOTTOM - top - HEADER_HEIGHT) / ROW_HEIGHT)
  return { infoTop, firstTableTop, firstRows: rowsOn(firstTableTop), otherRows: rowsOn(PAGE.margin) }
}

/** The report as a PDF stream; it is produced as fast as the reader takes it. */
export function pdfStream<T>(report: PdfReport<T>): Readable {
  const out = new PassThrough()
  render(report, out).catch((err) => out.destroy(err))
  return out
}

async function render<T>(report: PdfReport<T>, out: PassThrough): Promise<void> {
  const maxRows = report.maxRows ?? MAX_PDF_ROWS
  const shownAtMost = Math.min(report.total, maxRows)
  const leftOut = report.total - shownAtMost
  const one = report.noun.replace(/s$/, '')
  const filters = report.filters.length ? report.filters.map(([k, v]) => `${k}: ${v}`) : [`None (every ${one})`]
  const filterLines = filters.length > MAX_FILTER_LINES ? [...filters.slice(0, MAX_FILTER_LINES - 1), `... and ${filters.length - MAX_FILTER_LINES + 1} more`] : filters
  const { infoTop, firstTableTop, firstRows, otherRows } = layout(filterLines.length)
  // One line per row, plus the line saying that nothing matched or that rows were left out.
  const lines = shownAtMost + (shownAtMost === 0 || leftOut > 0 ? 1 : 0)
  const pages = lines <= firstRows ? 1 : 1 + Math.ceil((lines - firstRows) / otherRows)

  const PDFDocument = loadPdfKit()
  const doc = new PDFDocument({
    size: 'A4',
    layout: 'landscape',
    margin: PAGE.margin,
    autoFirstPage: false,
    info: { Title: printable(report.title), Creator: 'Prime', CreationDate: new Date(report.generatedMs) },
  })
  doc.on('data', (chunk: Buffer) => out.write(chunk))
  const ended = once(doc, 'end')

  const scale = CONTENT_WIDTH / report.columns.reduce((n, c) => n + c.width, 0)
  const columns = report.columns.map((c) => ({ ...c, width: c.width * scale }))

  const pen = pdfPen(doc, { font: FONT, size: CELL_SIZE })
  const { setFont, measure, draw } = pen
  /** The text cut to the cell's width less its padding, ending in "…" when cut. */
  const fit = (text: string, width: number) => pen.fit(text, width - 2 * PADDING)

  const cell = (text: string, x: number, width: number, y: number, align: 'left' | 'right' = 'left') => {
    const fitted = fit(text, width)
    const left = align === 'right' ? x + width - PADDING - measure(fitted) : x + PADDING
    draw(fitted, left, y)
  }

  let page = 0
  let y = 0
  const startPage = () => {
    doc.addPage()
    page++
    setFont(FONT, FOOTER_SIZE)
    doc.fillColor('#555555')
    const footerY = PAGE.height - PAGE.margin
    draw(fit(printable(`${report.title} - ${utcText(report.generatedMs)}`), CONTENT_WIDTH / 2), PAGE.margin, footerY)
    const number = `Page ${page} of ${pages}`
    doc.text(number, PAGE.width - PAGE.margin - measure(number), footerY, { lineBreak: false })
    if (page === 1) {
      setFont(BOLD, TITLE_SIZE)
      doc.fillColor('#000000')
      draw(pen.drawable(printable(report.title)), PAGE.margin, PAGE.margin)
      setFont(FONT, INFO_SIZE)
      const info: [string, string][] = [
        ['Generated:', utcText(report.generatedMs)],
        ['Records:', `${report.total.toLocaleString('en-US')} ${report.total === 1 ? one : report.noun}${leftOut > 0 ? ` (the first ${maxRows.toLocaleString('en-US')} are listed)` : ''}`],
        ['Sorted by:', report.sortedBy ?? 'the default order'],
        ...filterLines.map((f, i): [string, string] => [i === 0 ? 'Filters:' : '', f]),
      ]
      const valueX = PAGE.margin + Math.max(...info.map(([label]) => measure(label))) + 6
      info.forEach(([label, value], i) => {
        const top = infoTop + i * INFO_LINE
        doc.text(label, PAGE.margin, top, { lineBreak: false })
        draw(fit(printable(value), PAGE.width - PAGE.margin - valueX + 2 * PADDING), valueX, top)
      })
    }
    y = page === 1 ? firstTableTop : PAGE.margin
    doc.rect(PAGE.margin, y, CONTENT_WIDTH, HEADER_HEIGHT).fill('#2f4858')
    setFont(BOLD, CELL_SIZE)
    doc.fillColor('#ffffff')
    let x = PAGE.margin
    for (const c of columns) {
      cell(c.header, x, c.width, y + (HEADER_HEIGHT - CELL_SIZE) / 2, c.align)
      x += c.width
    }
    y += HEADER_HEIGHT
    setFont(FONT, CELL_SIZE)
    doc.fillColor('#000000')
  }
  let onPage = 0
  /** Draws one table line, on a new page (with its header) when this one is full. */
  const line = async (draw: (top: number) => void) => {
    if (page === 0 || onPage === (page === 1 ? firstRows : otherRows)) {
      // The pages so far have been written out: wait while the reader is behind, and let
      // other requests run between pages.
      if (out.writableNeedDrain) await once(out, 'drain')
      else await nextTurn()
      startPage()
      onPage = 0
    }
    draw(y)
    y += ROW_HEIGHT
    onPage++
  }

  let shown = 0
  for await (const row of report.rows) {
    if (shown === maxRows) break
    const stripe = shown % 2 === 1
    await line((top) => {
      if (stripe) doc.rect(PAGE.margin, top, CONTENT_WIDTH, ROW_HEIGHT).fill('#eef2f5').fillColor('#000000')
      let x = PAGE.margin
      for (const c of columns) {
        cell(cellText(c.value(row)), x, c.width, top + (ROW_HEIGHT - CELL_SIZE) / 2, c.align)
        x += c.width
      }
    })
    shown++
  }
  const closing = shown === 0 ? `No ${report.noun} match these filters.` : leftOut > 0 ? `${leftOut.toLocaleString('en-US')} more ${report.noun} were left out; the CSV export holds every one.` : null
  if (closing) {
    await line((top) => {
      setFont(BOLD, CELL_SIZE)
      doc.fillColor('#000000')
      doc.text(closing, PAGE.margin + PADDING, top + (ROW_HEIGHT - CELL_SIZE) / 2, { lineBreak: false })
    })
  }
  doc.end()
  await ended
  out.end()
}
