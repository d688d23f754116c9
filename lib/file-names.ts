// Text a client gave (a report's name, an uploaded file's name) that becomes a file name:
// in a download's Content-Disposition, a ZIP entry, a mail attachment, the audit trail.

/**
 * Unicode controls (Cc), format characters (Cf: the bidi controls U+200E/F, U+202A-202E
 * and U+2066-2069, zero-width characters) and line and paragraph separators (Zl, Zp). With
 * them a name shows other than it is (U+202E makes `report_fdp.exe` read `report_exe.pdf`)
 * or breaks the header or archive it is written into. Lone surrogates (Cs) too: they have no
 * UTF-8 form, and encodeURIComponent throws on them.
 */
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}]/gu

/** The name without its invisible characters. */
export const visibleName = (name: string): string => name.replace(INVISIBLE, '')
