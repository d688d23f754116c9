// Where report files live (the data directory, one folder per report), their names, the
// retention rule, and the Content-Disposition that names them in a download.
import fs from 'node:fs'
import path from 'node:path'
import { visibleName } from '../file-names.js'
import type { UnitOfWork } from '../platform/ports.js'
import type { ReportStore, RunRow } from './ports.js'

export const REPORTS_DIR = 'reports'

/** The folder of a report's files, relative to the data directory. */
export const reportFolder = (reportId: string) => path.join(REPORTS_DIR, reportId)
export const absolute = (dataDir: string, relative: string) => path.join(dataDir, relative)

/** What the file rules need: the runs' records and the data directory the files are in. */
export interface FileStore {
  reports: ReportStore
  uow: UnitOfWork
  dataDir: string
}

/**
 * `20250113T063000Z`: a UTC time as every file name of the service carries it (exports,
 * reports, archives, debug logs: `<name>-<time>.<ext>`).
 */
export const fileStamp = (ms: number) =>
  new Date(ms)
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replace(/[-:]/g, '')

/**
 * `<report name>-<run time>.<ext>`, with spaces and characters no file system takes
 * replaced by `_`, and invisible ones (bidi controls...) removed.
 */
export function fileNameFor(reportName: string, ms: number, ext: string): string {
  const base = visibleName(reportName.trim().replace(/[\s\u0000-\u001f\u007f/\\:*?"<>|]+/g, '_'))
    .replace(/_+/g, '_')
    .replace(/^[._]+|[._]+$/g, '')
  // Cut by code points: a character outside the BMP is never cut in half.
  return `${[...base].slice(0, 150).join('') || 'report'}-${fileStamp(ms)}.${ext}`
}

/**
 * `attachment; filename="..."`, with an RFC 6266 / RFC 5987 `filename*` when the name is
 * not ASCII. Invisible characters are removed here too: a name stored by an earlier version
 * may hold them.
 */
export function contentDisposition(stored: string): string {
  const fileName = visibleName(stored)
  const ascii = fileName.replace(/[^\x20-\x7e]/g, '_').replace(/["\\]/g, '_')
  if (ascii === fileName) return `attachment; filename="${fileName}"`
  const encoded = encodeURIComponent(fileName).replace(/['()*]/g, (c) => '%' + c.charCodeAt(0).toString(16).toUpperCase())
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encoded}`
}

const unlink = (file: string) => fs.promises.rm(file, { force: true })

/**
 * Removes the oldest stored files of a report beyond its retention (a count and a total
 * size); the newest file is always kept. The records stay, with `file_deleted_ms` set.
 */
export async function applyRetention(store: FileStore, reportId: string, maxFiles: number, maxBytes: number, now = Date.now()): Promise<number> {
  const { reports } = store
  const files = await reports.storedFiles(reportId)
  let kept = 0
  let bytes = 0
  const doomed: RunRow[] = []
  for (const run of files) {
    const size = run.size_bytes ?? 0
    // Newest first: once a file does not fit, every older one goes too.
    if (doomed.length === 0 && (kept === 0 || (kept < maxFiles && bytes + size <= maxBytes))) {
      kept++
      bytes += size
    } else {
      doomed.push(run)
    }
  }
  if (!doomed.length) return 0
  await store.uow.run(async () => {
    for (const run of doomed) await reports.fileDeleted(run.id, now)
  })
  // The records say "removed" first: a download that starts now answers 404, not a broken file.
  await Promise.all(doomed.map((run) => unlink(absolute(store.dataDir, run.file_path!))))
  return doomed.length
}

/** Removes every file of a deleted report. */
export async function removeReportFiles(dataDir: string, reportId: string): Promise<void> {
  await fs.promises.rm(absolute(dataDir, reportFolder(reportId)), { recursive: true, force: true })
}

/** Removes the partial files of runs a stopped server left unfinished (at start, before any run). */
export function removePartFiles(dataDir: string): number {
  const root = absolute(dataDir, REPORTS_DIR)
  let removed = 0
  if (!fs.existsSync(root)) return 0
  for (const dir of fs.readdirSync(root, { withFileTypes: true })) {
    if (!dir.isDirectory()) continue
    for (const f of fs.readdirSync(path.join(root, dir.name))) {
      if (!f.endsWith('.part')) continue
      fs.rmSync(path.join(root, dir.name, f), { force: true })
      removed++
    }
  }
  return removed
}
