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
 * The fonts of one document: `fontFor(base, text)` is the font a text is drawn in (the
 * standard one, or its Unicode counterpart), and `drawable(text)` the text with the
 * characters no font has as "?".
 */
export function pdfFonts(doc: PDFKit.PDFDocument) {
  const registered = new Set<string>()
  return {
    fontFor(base: string, text: string): string {
      if (!NOT_WIN_ANSI.test(text)) return base
      const u = UNICODE[base] ?? UNICODE[FONT]
      if (!registered.has(u.name)) {
        doc.registerFont(u.name, require.resolve(u.file))
        registered.add(u.name)
      }
      return u.name
    },
    /**
     * `fn` run with the text's own font set (`current`, or its Unicode counterpart), given
     * how far to raise the text at `size` points to keep the baseline; `current` again after.
     */
    inFaceOf<R>(current: string, text: string, fn: (raise: number) => R, size = 0): R {
      const face = this.fontFor(current, text)
      if (face === current) return fn(0)
      doc.font(face)
      try {
        return fn(((unicode().ascender - HELVETICA_ASCENDER) * size) / 1000)
      } finally {
        doc.font(current)
      }
    },
    drawable(text: string): string {
      if (!NOT_WIN_ANSI.test(text)) return text
      let out = ''
      // Beyond the Basic Multilingual Plane too: widths are kept per UTF-16 unit.
      for (const ch of text) out += ch.length === 1 && unicode().covers(ch.charCodeAt(0)) ? ch : '?'
      return out
    },
  }
}
