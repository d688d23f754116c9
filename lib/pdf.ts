// PDF reports as streams, for every export and scheduled report: a title, the filters
// applied, when it was generated, how many records, then a landscape table with its
// header on every page and "Page n of m" on each.
//
// Long cells wrap: a row grows to its tallest cell (at most MAX_CELL_LINES lines, the last
// ending in "…" when even that is not enough) and pages break between rows. The pages are
// written as they are filled, never held in memory (pdfkit's bufferPages would keep every
// page until the end), so the page count is not known while they are written: each page
// draws "of m" from one small form object whose text is written at the end.
import { once } from 'node:events'
import { PassThrough, type Readable } from 'node:stream'
import { createRequire } from 'node:module'
import type PDFKit from 'pdfkit'
import { setImmediate as nextTurn } from 'node:timers/promises'
import { FONT, BOLD, HELVETICA_ASCENT, printable, pdfPen } from './pdf-text.js'

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
/** Each further line of a wrapped cell adds this much to its row. */
const LINE_STEP = 9
/** A cell wraps to at most this many lines, so that a row always fits on a page. */
const MAX_CELL_LINES = 30
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
export const utcText = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC')

/** Page layout of a report: where the information and the table start. */
function layout(filterLines: number) {
  const infoTop = PAGE.margin + TITLE_SIZE + 10
  const firstTableTop = infoTop + (3 + filterLines) * INFO_LINE + 8
  return { infoTop, firstTableTop }
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
  const { infoTop, firstTableTop } = layout(filterLines.length)

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
  /** The text in lines that fit the cell, broken between words where it can be. */
  const wrap = (raw: string, width: number): string[] => {
    const room = width - 2 * PADDING
    const text = pen.drawable(raw)
    if (measure(text) <= room) return [text]
    const lines: string[] = []
    let rest = text
    while (rest.length > 0) {
      if (lines.length === MAX_CELL_LINES - 1 || measure(rest) <= room) {
        lines.push(measure(rest) <= room ? rest : pen.fit(rest, room))
        break
      }
      // The longest start that fits, then back to the last space in it when there is one.
      let lo = 1
      let hi = rest.length
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1
        if (measure(rest.slice(0, mid)) <= room) lo = mid
        else hi = mid - 1
      }
      const space = rest.lastIndexOf(' ', lo)
      const cut = space > 0 && rest[lo] !== undefined ? (rest[lo] === ' ' ? lo : space) : lo
      lines.push(rest.slice(0, cut).trimEnd())
      rest = rest.slice(cut).trimStart()
    }
    return lines
  }

  // "of m" on every page: one form object, its text written once the count is known.
  setFont(FONT, FOOTER_SIZE)
  const footerFont = (doc as any)._font as { id: string; ref(): unknown }
  const pageTotal = (doc as any).ref({ Type: 'XObject', Subtype: 'Form', BBox: [0, -3, 60, FOOTER_SIZE + 2], Resources: { Font: { [footerFont.id]: footerFont.ref() } } })
  const footerAscent = (HELVETICA_ASCENT * FOOTER_SIZE) / 1000

  let page = 0
  let y = 0
  const startPage = () => {
    doc.addPage()
    page++
    setFont(FONT, FOOTER_SIZE)
    doc.fillColor('#555555')
    const footerY = PAGE.height - PAGE.margin
    draw(fit(printable(`${report.title} - ${utcText(report.generatedMs)}`), CONTENT_WIDTH / 2), PAGE.margin, footerY)
    const number = `Page ${page} of `
    // Room for the largest count a report reaches (100,000 rows).
    const numberX = PAGE.width - PAGE.margin - measure(`Page ${page} of 00000`)
    doc.text(number, numberX, footerY, { lineBreak: false })
    doc.page.xobjects.PageTotal = pageTotal
    // Back to PDF coordinates (pdfkit draws top-down), at the baseline after "of ".
    doc.addContent(`q 1 0 0 -1 0 ${PAGE.height} cm 1 0 0 1 ${(numberX + measure(number)).toFixed(2)} ${(PAGE.height - footerY - footerAscent).toFixed(2)} cm /PageTotal Do Q`)
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
  /** Draws one table row of `height`, on a new page (with its header) when this one is full. */
  const line = async (height: number, draw: (top: number) => void) => {
    if (page === 0 || y + height > TABLE_BOTTOM) {
      // The pages so far have been written out: wait while the reader is behind, and let
      // other requests run between pages.
      if (out.writableNeedDrain) await once(out, 'drain')
      else await nextTurn()
      startPage()
    }
    draw(y)
    y += height
  }

  let shown = 0
  for await (const row of report.rows) {
    if (shown === maxRows) break
    const stripe = shown % 2 === 1
    const cells = columns.map((c) => wrap(cellText(c.value(row)), c.width))
    const height = ROW_HEIGHT + (Math.max(...cells.map((l) => l.length)) - 1) * LINE_STEP
    await line(height, (top) => {
      if (stripe) doc.rect(PAGE.margin, top, CONTENT_WIDTH, height).fill('#eef2f5').fillColor('#000000')
      let x = PAGE.margin
      columns.forEach((c, i) => {
        cells[i].forEach((text, k) => cell(text, x, c.width, top + (ROW_HEIGHT - CELL_SIZE) / 2 + k * LINE_STEP, c.align))
        x += c.width
      })
    })
    shown++
  }
  const closing = shown === 0 ? `No ${report.noun} match these filters.` : leftOut > 0 ? `${leftOut.toLocaleString('en-US')} more ${report.noun} were left out; the CSV export holds every one.` : null
  if (closing) {
    await line(ROW_HEIGHT, (top) => {
      setFont(BOLD, CELL_SIZE)
      doc.fillColor('#000000')
      doc.text(closing, PAGE.margin + PADDING, top + (ROW_HEIGHT - CELL_SIZE) / 2, { lineBreak: false })
    })
  }
  // The page count, now known, into the form every page shows.
  pageTotal.write(`BT 0.333 g /${footerFont.id} ${FOOTER_SIZE} Tf 0 0 Td [<${Buffer.from(String(page), 'latin1').toString('hex')}>] TJ ET`)
  pageTotal.end()
  doc.end()
  await ended
  out.end()
}
