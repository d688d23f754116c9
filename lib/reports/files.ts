// Where report files live (SQLite: the data directory, one folder per report; PostgreSQL:
// the database, so that any node serves them), their names, the retention rule, and the
// Content-Disposition that names them in a download.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { Readable } from 'node:stream'
import { visibleName } from '../file-names.js'
import type { UnitOfWork } from '../platform/ports.js'
import type { ReportFileStore, ReportStore, RunRow } from './ports.js'
import { formats } from './types.js'

export const REPORTS_DIR = 'reports'

/** The folder of a report's files, relative to the data directory. */
export const reportFolder = (reportId: string) => path.join(REPORTS_DIR, reportId)
export const absolute = (dataDir: string, relative: string) => path.join(dataDir, relative)

/** What the file rules need: the runs' records and where their files are. */
export interface FileStore {
  reports: ReportStore
  uow: UnitOfWork
  dataDir: string
  /** Where the files are kept: the data directory's when not given. */
  files?: RunFiles
}

/** A run's file while the run writes it. */
export interface FileDraft {
  /** Where the run writes the file (a local file either way). */
  path: string
  /** What the run's record says of it (`file_path`). */
  recorded: string
  /** Called once the file is written, before its run is recorded. */
  complete(): Promise<void>
  /** Called in the unit of work that records the run succeeded (it fails with the unit). */
  keep(): Promise<void>
  /** Ends the draft: `kept` says whether the run's record now holds the file (else nothing stays behind). */
  close(kept: boolean): Promise<void>
}

/** A stored file, opened: it is read to its end, or the read fails (never a short file). */
export interface OpenedContent {
  size: number
  stream(): Readable
  close(): void
}

/** Where the runs' files are kept. */
export interface RunFiles {
  /** Where a file is kept, as a problem names it ("the data directory"). */
  readonly where: string
  /** A place for a run to write its file. */
  draft(run: RunRow): Promise<FileDraft>
  /** A run's stored file, opened; undefined when it is missing. */
  open(run: RunRow): Promise<OpenedContent | undefined>
  /** A run's file for an e-mail: with its content when `attach`; undefined when it is missing. */
  forMail(run: RunRow, attach: boolean): Promise<{ path?: string; content?: Buffer } | undefined>
  /** Removes the files of runs whose records now say they were removed (the retention rule). */
  removed(runs: RunRow[]): Promise<void>
  /** Removes every file of a deleted report. */
  removeReport(reportId: string): Promise<void>
  /** At start, before any run: removes what runs a stopped server left unfinished. */
  tidy(): void
}

/** The files in the data directory (SQLite: one process owns it). */
export function diskFiles(dataDir: string): RunFiles {
  return {
    where: 'the data directory',
    async draft(run) {
      const recorded = path.join(reportFolder(run.report_id), `${run.id}.${formats[run.format].fileExtension}`)
      const file = absolute(dataDir, recorded)
      const part = `${file}.part`
      await fs.promises.mkdir(path.dirname(file), { recursive: true, mode: 0o700 })
      return {
        // Under a temporary name until it is complete.
        path: part,
        recorded,
        complete: () => fs.promises.rename(part, file),
        keep: async () => {},
        async close(kept) {
          if (kept) return
          await fs.promises.rm(part, { force: true }).catch(() => {})
          await fs.promises.rm(file, { force: true }).catch(() => {})
        },
      }
    },
    async open(run) {
      try {
        const fd = fs.openSync(absolute(dataDir, run.file_path!), 'r')
        return { size: fs.fstatSync(fd).size, stream: () => fs.createReadStream('', { fd }), close: () => fs.closeSync(fd) }
      } catch {
        return undefined
      }
    },
    async forMail(run) {
      const file = absolute(dataDir, run.file_path!)
      return fs.existsSync(file) ? { path: file } : undefined
    },
    async removed(runs) {
      await Promise.all(runs.map((run) => unlink(absolute(dataDir, run.file_path!))))
    },
    removeReport: (reportId) => removeReportFiles(dataDir, reportId),
    tidy: () => void removePartFiles(dataDir),
  }
}

/**
 * The files in the database (PostgreSQL): a run writes its file to a temporary folder of
 * the machine (not the data directory), and it is stored in the unit of work that records
 * the run succeeded; downloads and e-mails read it from the database, on any node. Its
 * content goes with its record (the retention rule, a deleted report).
 */
export function databaseFiles(store: ReportFileStore): RunFiles {
  return {
    where: 'the database',
    async draft(run) {
      const { fileExtension, mediaType } = formats[run.format]
      const dir = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'prime-report-'))
      const file = path.join(dir, `${run.id}.${fileExtension}`)
      return {
        path: file,
        // The name it would have in a data directory: the column says the run holds a file.
        recorded: path.join(reportFolder(run.report_id), `${run.id}.${fileExtension}`),
        complete: async () => {},
        async keep() {
          if (!(await store.storeFile(run.id, mediaType, fs.createReadStream(file)))) throw new Error('the run was removed while its file was stored')
        },
        close: () => fs.promises.rm(dir, { recursive: true, force: true }).catch(() => {}),
      }
    },
    async open(run) {
      const head = await store.fileOf(run.id)
      if (!head) return undefined
      return { size: head.size_bytes, stream: () => Readable.from(store.fileContent(run.id)), close: () => {} }
    },
    async forMail(run, attach) {
      if (!attach) return (await store.fileOf(run.id)) ? {} : undefined
      const file = await store.fileBytes(run.id)
      return file && { content: file.content }
    },
    // Removed with their records (`fileDeleted`, the report's foreign keys).
    removed: async () => {},
    removeReport: async () => {},
    tidy: () => {},
  }
}

/** Where the runs' files are kept on this backend. */
export const runFiles = (storage: { files?: ReportFileStore }, dataDir: string): RunFiles => (storage.files ? databaseFiles(storage.files) : diskFiles(dataDir))

/** Where a store's files are. */
export const filesOf = (store: { dataDir: string; files?: RunFiles }): RunFiles => store.files ?? diskFiles(store.dataDir)

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
  await filesOf(store).removed(doomed)
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
