// Report PDFs: a cover block (title, what the report is, period, filters, schedule, when
// it was generated), summary figures, then one or more tables, each with its header on
// every page it spans, and "Page n of m" on every page. Drawn the way lib/pdf.ts draws
// exports (one line per row, cached glyph widths, WinAnsi text, each page written out as
// the next starts). A table's rows (at most 5000) are read before drawing starts, so the
// page count is exact.
import { once } from 'node:events'
import type { Writable } from 'node:stream'
import { loadPdfKit } from '../pdf.js'
import { FONT, BOLD, printable, pdfPen } from '../pdf-text.js'
import { setImmediate as pause } from 'node:timers/promises'

export interface PdfColumn<T> {
  header: string
  /** Relative width: the columns are scaled to the width of the page. */
  width: number
  align?: 'left' | 'right'
  value: (row: T) => string | number | boolean | null | undefined
}

export interface PdfTable<T = any> {
  title: string
  /** What a row is, plural ("agents"). */
  noun: string
  columns: PdfColumn<T>[]
  /** Rows that match (the table shows at most `maxRows` of them). */
  total: number
  rows: AsyncIterable<T> | Iterable<T>
  maxRows: number
  /** Said under the table when it is cut ("the CSV format holds every one"). */
  cutNote?: string
  /** Whether its rows count as the report's rows (not for tables of counts); default true. */
  counted?: boolean
  /** Its share of the page width (a narrow table of counts reads better); default 1. */
  width?: number
  /** Said when it has no rows; default "No <noun>." */
  empty?: string
}

export interface PdfFigure {
  label: string
  value: string
}

export interface PdfReport {
  title: string
  /** The report type and anything else said under the title. */
  subtitle: string
  description: string | null
  info: [string, string][]
  figures: PdfFigure[]
  tables: PdfTable[]
  /** Left of every page's footer. */
  footer: string
}

export interface PdfResult {
  /** Data rows drawn (rows of count tables left out). */
  rows: number
  /** Whether a table was cut at its row cap. */
  truncated: boolean
  pages: number
}

// A4 landscape, in points.
const PAGE = { width: 841.89, height: 595.28, margin: 36 }
const CONTENT_WIDTH = PAGE.width - 2 * PAGE.margin
const DARK = '#2f4858'
const GREY = '#5b6770'
const STRIPE = '#eef2f5'
const CELL_SIZE = 8
const ROW_HEIGHT = 13
const HEADER_HEIGHT = 17
const HEADING_HEIGHT = 16
const TABLE_GAP = 12
/** Table lines drawn between two turns of the event loop. */
const LINES_PER_TURN = 12
const PADDING = 4
const FOOTER_Y = PAGE.height - PAGE.margin + 6
const TABLE_BOTTOM = PAGE.height - PAGE.margin - 6
const MAX_INFO_LINES = 10
const FIGURES_PER_ROW = 6
const FIGURE_HEIGHT = 46

const cellText = (v: string | number | boolean | null | undefined) =>
  v === null || v === undefined ? '' : typeof v === 'boolean' ? (v ? 'Yes' : 'No') : typeof v === 'number' ? v.toLocaleString('en-US') : printable(String(v))

/** "1 agent", "2 agents" ("categories" and "severities" become "category" and "severity"). */
const counting = (n: number, noun: string) => `${n.toLocaleString('en-US')} ${n === 1 ? noun.replace(/ies$/, 'y').replace(/s$/, '') : noun}`

/** Draws the report into `out` (ended when the PDF is complete; destroyed when drawing fails). */
export async function writePdf(report: PdfReport, out: Writable, generatedMs: number, signal?: AbortSignal): Promise<PdfResult> {
  try {
    return await draw(report, out, generatedMs, signal)
  } catch (err) {
    out.destroy()
    throw err
  }
}

async function draw(report: PdfReport, out: Writable, generatedMs: number, signal?: AbortSignal): Promise<PdfResult> {
  const PDFDocument = loadPdfKit()
  const doc = new PDFDocument({
    size: 'A4',
    layout: 'landscape',
    margin: PAGE.margin,
    autoFirstPage: false,
    info: { Title: printable(report.title), Subject: printable(report.subtitle), Creator: 'Prime', CreationDate: new Date(generatedMs) },
  })
  doc.pipe(out)
  const finished = new Promise<void>((resolve, reject) => {
    out.on('finish', resolve)
    out.on('error', reject)
  })
  // Awaited at the end; a write error meanwhile must not count as unhandled.
  finished.catch(() => {})

  const pen = pdfPen(doc, { font: FONT, size: CELL_SIZE })
  const { measure, fit, inFaceOf } = pen
  const setFont = (name: string, points: number, color = '#000000') => {
    pen.setFont(name, points)
    doc.fillColor(color)
  }
  const put = (s: string, x: number, y: number, width: number, align: 'left' | 'right' = 'left') => {
    const fitted = fit(s, width)
    pen.draw(fitted, align === 'right' ? x + width - measure(fitted) : x, y)
  }

  let y = 0
  const newPage = () => {
    doc.addPage()
    y = PAGE.margin
  }

  // ---- cover ----
  newPage()
  doc.rect(0, 0, PAGE.width, 6).fill(DARK)
  setFont(BOLD, 18)
  put(printable(report.title), PAGE.margin, y, CONTENT_WIDTH)
  y += 24
  setFont(FONT, 10, GREY)
  put(printable(report.subtitle), PAGE.margin, y, CONTENT_WIDTH)
  y += 16
  if (report.description) {
    setFont(FONT, 9, '#000000')
    const description = pen.drawable(printable(report.description))
    const h = Math.min(
      inFaceOf(description, () => doc.heightOfString(description, { width: CONTENT_WIDTH })),
      3 * 12,
    )
    inFaceOf(description, (raise) => doc.text(description, PAGE.margin, y - raise, { width: CONTENT_WIDTH, height: h, ellipsis: true }))
    y += h + 6
  }
  const info = report.info.length > MAX_INFO_LINES ? [...report.info.slice(0, MAX_INFO_LINES - 1), ['', `... and ${report.info.length - MAX_INFO_LINES + 1} more`] as [string, string]] : report.info
  setFont(BOLD, 9)
  const labelWidth = Math.max(60, ...info.map(([label]) => measure(label))) + 10
  for (const [label, value] of info) {
    setFont(BOLD, 9, GREY)
    put(printable(label), PAGE.margin, y, labelWidth)
    setFont(FONT, 9)
    put(printable(value), PAGE.margin + labelWidth, y, CONTENT_WIDTH - labelWidth)
    y += 13
  }
  y += 8

  // ---- figures ----
  for (let i = 0; i < report.figures.length; i += FIGURES_PER_ROW) {
    const row = report.figures.slice(i, i + FIGURES_PER_ROW)
    const gap = 8
    const w = (CONTENT_WIDTH - gap * (FIGURES_PER_ROW - 1)) / FIGURES_PER_ROW
    row.forEach((fig, k) => {
      const x = PAGE.margin + k * (w + gap)
      doc.rect(x, y, w, FIGURE_HEIGHT).fill(STRIPE)
      doc.rect(x, y, 3, FIGURE_HEIGHT).fill(DARK)
      setFont(BOLD, 16, DARK)
      put(printable(fig.value), x + 10, y + 8, w - 14)
      setFont(FONT, 7.5, GREY)
      put(printable(fig.label), x + 10, y + 30, w - 14)
    })
    y += FIGURE_HEIGHT + gap
  }
  y += 6

  // ---- tables ----
  // Their rows are read first (at most maxRows + 1 each), so that the page count is known
  // exactly before the first footer is drawn; then every page is written out as soon as
  // the next one starts, with other work and the reader's pace between pages.
  const tables: Laid[] = []
  for (const table of report.tables) {
    const rows: unknown[] = []
    for await (const row of table.rows) {
      rows.push(row)
      if (rows.length > table.maxRows) break
      if (rows.length % 1000 === 0) signal?.throwIfAborted()
    }
    const shown = Math.min(rows.length, table.maxRows)
    // Beyond the cap, `total` counts them; below it, the rows read are all there is (some may have gone meanwhile).
    const total = rows.length > table.maxRows ? Math.max(table.total, rows.length) : rows.length
    const closing =
      shown === 0
        ? (table.empty ?? `No ${table.noun}.`)
        : total > shown
          ? `${(total - shown).toLocaleString('en-US')} more ${table.noun} not listed here${table.cutNote ? `; ${table.cutNote}.` : '.'}`
          : null
    tables.push({ table, rows: rows.slice(0, shown), total, closing })
  }
  const pages = countPages(y, tables)
  let page = 1
  const footer = () => {
    doc
      .moveTo(PAGE.margin, FOOTER_Y - 4)
      .lineTo(PAGE.width - PAGE.margin, FOOTER_Y - 4)
      .lineWidth(0.5)
      .strokeColor('#c8d0d6')
      .stroke()
    setFont(FONT, 8, GREY)
    const number = `Page ${page} of ${pages}`
    put(printable(report.footer), PAGE.margin, FOOTER_Y, CONTENT_WIDTH - measure(number) - 20)
    put(number, PAGE.width - PAGE.margin - measure(number), FOOTER_Y, measure(number) + 1)
  }
  footer()
  const nextPage = async () => {
    // The finished page goes out when the next one starts: wait while the file is behind.
    if (out.writableNeedDrain) await once(out, 'drain')
    else await pause()
    signal?.throwIfAborted()
    newPage()
    page++
    footer()
  }

  let drawn = 0
  let truncated = false
  let sincePause = 0
  for (const { table, rows, total, closing } of tables) {
    const width = CONTENT_WIDTH * (table.width ?? 1)
    const scale = width / table.columns.reduce((n, c) => n + c.width, 0)
    const columns = table.columns.map((c) => ({ ...c, width: c.width * scale }))
    const heading = (continued: boolean) => {
      setFont(BOLD, 11, DARK)
      const count = `${counting(total, table.noun)}${total > rows.length && rows.length === table.maxRows ? `, the first ${table.maxRows.toLocaleString('en-US')} listed` : ''}`
      put(printable(table.title + (continued ? ' (continued)' : '')), PAGE.margin, y, width * 0.6)
      setFont(FONT, 8.5, GREY)
      put(count, PAGE.margin + width * 0.6, y + 2, width * 0.4, 'right')
      y += HEADING_HEIGHT
    }
    const header = () => {
      doc.rect(PAGE.margin, y, width, HEADER_HEIGHT).fill(DARK)
      setFont(BOLD, CELL_SIZE, '#ffffff')
      let x = PAGE.margin
      for (const c of columns) {
        put(c.header, x + PADDING, y + (HEADER_HEIGHT - CELL_SIZE) / 2, c.width - 2 * PADDING, c.align)
        x += c.width
      }
      y += HEADER_HEIGHT
      setFont(FONT, CELL_SIZE)
    }
    if (!startsHere(y)) await nextPage()
    heading(false)
    header()
    /** One line of the table, on a new page (with heading and header) when this one is full. */
    const line = async (draw: (top: number) => void) => {
      if (!fitsLine(y)) {
        await nextPage()
        heading(true)
        header()
      } else if (++sincePause === LINES_PER_TURN) {
        // A page of text takes several milliseconds to draw: other requests run in between.
        sincePause = 0
        await pause()
      }
      draw(y)
      y += ROW_HEIGHT
    }
    for (const [i, row] of rows.entries()) {
      await line((top) => {
        if (i % 2 === 1) doc.rect(PAGE.margin, top, width, ROW_HEIGHT).fill(STRIPE)
        setFont(FONT, CELL_SIZE)
        let x = PAGE.margin
        for (const c of columns) {
          put(cellText(c.value(row)), x + PADDING, top + (ROW_HEIGHT - CELL_SIZE) / 2, c.width - 2 * PADDING, c.align)
          x += c.width
        }
      })
    }
    if (table.counted !== false) {
      drawn += rows.length
      if (total > rows.length) truncated = true
    }
    if (closing) {
      await line((top) => {
        setFont(BOLD, CELL_SIZE, GREY)
        put(closing, PAGE.margin + PADDING, top + (ROW_HEIGHT - CELL_SIZE) / 2, Math.max(width, CONTENT_WIDTH * 0.6) - 2 * PADDING)
      })
    }
    y += TABLE_GAP
  }
  doc.end()
  await finished
  return { rows: drawn, truncated, pages: page }
}

interface Laid {
  table: PdfTable
  rows: unknown[]
  total: number
  closing: string | null
}

/** Whether a table may start at `y`: its heading, header and a few rows fit. */
const startsHere = (y: number) => y + HEADING_HEIGHT + HEADER_HEIGHT + 4 * ROW_HEIGHT <= TABLE_BOTTOM
const fitsLine = (y: number) => y + ROW_HEIGHT <= TABLE_BOTTOM

/** The pages the tables take from `y` on the first page, by the rules the drawing follows. */
function countPages(y: number, tables: Laid[]): number {
  let pages = 1
  for (const { rows, closing } of tables) {
    if (!startsHere(y)) {
      pages++
      y = PAGE.margin
    }
    y += HEADING_HEIGHT + HEADER_HEIGHT
    const lines = rows.length + (closing ? 1 : 0)
    for (let i = 0; i < lines; i++) {
      if (!fitsLine(y)) {
        pages++
        y = PAGE.margin + HEADING_HEIGHT + HEADER_HEIGHT
      }
      y += ROW_HEIGHT
    }
    y += TABLE_GAP
  }
  return pages
}
