// Text in the PDFs. Helvetica, a standard font (nothing embedded, the fastest to lay out),
// draws WinAnsi only; a text with any other character (a host, user or device name in
// Polish, Greek, Cyrillic, ...) is drawn in DejaVu Sans Condensed instead (about as wide as
// Helvetica), embedded with just the glyphs used. A character it has no glyph for either
// prints as "?". (DejaVu for every text looked more even and cost 14% more time.)
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)

export const FONT = 'Helvetica'
export const BOLD = 'Helvetica-Bold'
const UNICODE: Record<string, { name: string; file: string }> = {
  [FONT]: { name: 'DejaVuSansCondensed', file: 'dejavu-fonts-ttf/ttf/DejaVuSansCondensed.ttf' },
  [BOLD]: { name: 'DejaVuSansCondensed-Bold', file: 'dejavu-fonts-ttf/ttf/DejaVuSansCondensed-Bold.ttf' },
}

const NOT_WIN_ANSI = /[^\u0020-\u007e\u00a0-\u00ff\u0152\u0153\u0160\u0161\u0178\u017d\u017e\u0192\u02c6\u02dc\u2013\u2014\u2018-\u201a\u201c-\u201e\u2020-\u2022\u2026\u2030\u2039\u203a\u20ac\u2122]/
// Controls, and halves of a surrogate pair without the other half.
const UNDRAWABLE = /[\u0000-\u001f\u007f-\u009f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g

/** One line of text: line breaks and tabs as spaces, other control characters as "?". */
export const printable = (s: string) => s.replace(/[\r\n\t]+/g, ' ').replace(UNDRAWABLE, '?')

// pdfkit puts a text's baseline at its y plus the font's ascender: Helvetica's (both faces)
// is 718 per 1000, DejaVu's higher, so DejaVu text is raised by the difference to share
// the line's baseline.
const HELVETICA_ASCENDER = 718
/** Helvetica's ascender (per 1000 units): where pdfkit puts a line's baseline below its top. */
export const HELVETICA_ASCENT = HELVETICA_ASCENDER

let unicodeFont: { covers: (codePoint: number) => boolean; ascender: number } | null = null
/** DejaVu Sans Condensed: which characters it has (its bold face has every one below U+2000 too), and its ascender per 1000. */
function unicode() {
  if (!unicodeFont) {
    const font = require('fontkit').openSync(require.resolve(UNICODE[FONT].file))
    const known = new Map<number, boolean>()
    unicodeFont = {
      covers: (cp) => {
        let has = known.get(cp)
        if (has === undefined) known.set(cp, (has = font.hasGlyphForCodePoint(cp) as boolean))
        return has
      },
      ascender: (font.ascent * 1000) / font.unitsPerEm,
    }
  }
  return unicodeFont
}

/**
 * What draws text on one document: the current font and size, widths, cutting to a width
 * and drawing, each text in its own face (the standard font, or its Unicode counterpart).
 * pdfkit measures a string glyph by glyph with kerning, which made measuring most of the
 * time spent on a large report; widths of single characters (per face, at 1 pt) are kept
 * instead. Kerning changes a width by a fraction of a point, and a cut string is checked
 * exactly once.
 */
export function pdfPen(doc: PDFKit.PDFDocument, start = { font: FONT, size: 10 }) {
  let font = start.font
  let size = start.size
  const registered = new Set<string>()
  const widths = new Map<string, Map<number, number>>()
  /** The face a text is drawn in. */
  const faceOf = (text: string): string => {
    if (!NOT_WIN_ANSI.test(text)) return font
    const u = UNICODE[font] ?? UNICODE[FONT]
    if (!registered.has(u.name)) {
      doc.registerFont(u.name, require.resolve(u.file))
      registered.add(u.name)
    }
    return u.name
  }
  /**
   * `fn` run with the text's own face set, given how far to raise the text to keep the
   * line's baseline; the current font again after.
   */
  const inFaceOf = <R>(text: string, fn: (raise: number) => R): R => {
    const face = faceOf(text)
    if (face === font) return fn(0)
    doc.font(face)
    try {
      return fn(((unicode().ascender - HELVETICA_ASCENDER) * size) / 1000)
    } finally {
      doc.font(font)
    }
  }
  const measure = (text: string): number => {
    const face = faceOf(text)
    let w = widths.get(face)
    if (!w) widths.set(face, (w = new Map()))
    let total = 0
    for (let i = 0; i < text.length; i++) {
      const code = text.charCodeAt(i)
      let cw = w.get(code)
      if (cw === undefined) w.set(code, (cw = inFaceOf(text, () => doc.widthOfString(text[i])) / size))
      total += cw
    }
    return total * size
  }
  /** The text with the characters no font has as "?". */
  const drawable = (text: string): string => {
    if (!NOT_WIN_ANSI.test(text)) return text
    let out = ''
    // Beyond the Basic Multilingual Plane too: widths are kept per UTF-16 unit.
    for (const ch of text) out += ch.length === 1 && unicode().covers(ch.charCodeAt(0)) ? ch : '?'
    return out
  }
  return {
    setFont(name: string, points: number) {
      font = name
      size = points
      doc.font(name).fontSize(points)
    },
    inFaceOf,
    measure,
    drawable,
    /** The text, drawable, cut to `room` points and ending in "…" when cut. */
    fit(raw: string, room: number): string {
      const text = drawable(raw)
      if (measure(text) <= room) return text
      let lo = 0
      let hi = text.length
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1
        if (measure(text.slice(0, mid) + '…') <= room) lo = mid
        else hi = mid - 1
      }
      const exact = (n: number) => {
        const cut = text.slice(0, n) + '…'
        return inFaceOf(cut, () => doc.widthOfString(cut))
      }
      while (lo > 0 && exact(lo) > room) lo--
      return text.slice(0, lo) + '…'
    },
    /** One line of text at (x, y), in its own face. */
    draw(text: string, x: number, y: number) {
      inFaceOf(text, (raise) => doc.text(text, x, y - raise, { lineBreak: false }))
    },
  }
}
