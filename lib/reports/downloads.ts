// Downloads of report files: one stored file, or several as one ZIP archive, each resolved
// (its report, its run, its file opened) before anything is recorded. The report service
// (service.ts) gives its state: the stores, the audit trail and where the files are.
import type { Readable } from 'node:stream'
import yazl from 'yazl'
import { problem, type FieldError } from '../errors.js'
import { visibleName } from '../file-names.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail } from '../platform/ports.js'
import { iso } from '../time.js'
import { MAX_FIELD_ERRORS, reportAsset } from './definitions.js'
import { fileStamp, type filesOf, type OpenedContent } from './files.js'
import type { ReportRow, ReportStore, RunRow } from './ports.js'
import { formats } from './types.js'

/** What the downloads read and record with (the report service's). */
export interface DownloadState {
  reports: ReportStore
  audit: AuditTrail
  files: ReturnType<typeof filesOf>
}

/** A file to download: a report's newest stored file, or the one of a run. */
export interface FileItem {
  reportId: string
  fileId?: string | null
}

/** A stored file, opened: in the data directory it reads to its end even if it is removed meanwhile. */
export interface OpenedFile {
  report: ReportRow
  run: RunRow
  content: OpenedContent
  size: number
  fileName: string
  mediaType: string
}

/** What a download answers: one file with its name and media type, or an archive. */
export interface FileDownload {
  fileName: string
  mediaType: string
  size: number
  rowCount: number
  truncated: boolean
  stream: Readable
}

export const NOT_FOUND = (id: string) => `No report with id ${id}.`

/** A file item resolved: the file opened, or why not. */
type Resolution = { ok: OpenedFile } | { status: 404 | 409; field: 'reportId' | 'fileId'; reason: string }

const fileDetails = (f: OpenedFile) => ({ reportId: f.report.id, reportName: f.report.name, fileId: f.run.id, fileName: f.fileName, sizeBytes: f.size })
const closeAll = (files: OpenedFile[]) => files.forEach((f) => f.content.close())

/** Finds an item's report, run and file, and opens the file. */
async function resolve(s: DownloadState, item: FileItem): Promise<Resolution> {
  const { reports, files } = s
  const report = await reports.byId(item.reportId.toLowerCase())
  if (!report) return { status: 404, field: 'reportId', reason: NOT_FOUND(item.reportId) }
  let run: RunRow | undefined
  if (item.fileId) {
    run = await reports.runById(item.fileId.toLowerCase())
    if (!run || run.report_id !== report.id) return { status: 404, field: 'fileId', reason: `Report "${report.name}" has no run or file ${item.fileId}.` }
  } else {
    run = await reports.newestFile(report.id)
    if (!run) {
      const open = await reports.openRunOf(report.id)
      if (open) return { status: 409, field: 'fileId', reason: `Report "${report.name}" has no stored file yet: run ${open.id} is ${open.status}.` }
      return { status: 404, field: 'fileId', reason: `Report "${report.name}" has no stored file.` }
    }
  }
  if (run.status === 'queued' || run.status === 'running') return { status: 409, field: 'fileId', reason: `Run ${run.id} of "${report.name}" is still ${run.status}: its file is not ready yet.` }
  if (run.status === 'failed') return { status: 409, field: 'fileId', reason: `Run ${run.id} of "${report.name}" failed and has no file: ${run.reason ?? 'no reason recorded'}` }
  if (run.file_deleted_ms !== null) return { status: 404, field: 'fileId', reason: `The file of run ${run.id} of "${report.name}" was removed by the retention rule on ${iso(run.file_deleted_ms)}.` }
  const content = await files.open(run)
  if (!content) return { status: 404, field: 'fileId', reason: `The file of run ${run.id} of "${report.name}" is missing from ${files.where}.` }
  // Names stored by an earlier version may hold invisible characters (bidi controls).
  return { ok: { report, run, content, size: content.size, fileName: visibleName(run.file_name!), mediaType: formats[run.format].mediaType } }
}

/**
 * One stored file, opened, and its download recorded. `accepts` says whether the caller
 * takes the file's media type (asked before anything is recorded).
 */
export async function downloadFile(s: DownloadState, ctx: Context, item: FileItem, accepts: (mediaType: string) => boolean): Promise<FileDownload> {
  const r = await resolve(s, item)
  if (!('ok' in r)) throw problem(r.status === 404 ? 'not-found' : 'conflict', r.reason, { errors: [{ location: 'body', name: r.field, reason: r.reason }] })
  const f = r.ok
  if (!accepts(f.mediaType)) {
    f.content.close()
    throw problem('not-acceptable', `This file is ${f.mediaType}, which Accept does not allow.`)
  }
  try {
    await s.audit.record(ctx, { description: `Downloaded report file ${f.fileName} of "${f.report.name}"`, details: fileDetails(f), asset: reportAsset(f.report) })
  } catch (err) {
    f.content.close()
    throw err
  }
  return { fileName: f.fileName, mediaType: f.mediaType, size: f.size, rowCount: f.run.row_count ?? 0, truncated: f.run.truncated === 1, stream: f.content.stream() }
}

/**
 * Several files as one ZIP archive, each once, names made unique. Every item is resolved
 * and its file opened before the archive starts: it is complete, or a problem names
 * every item that cannot be archived.
 */
export async function downloadArchive(s: DownloadState, ctx: Context, items: FileItem[]): Promise<{ fileName: string; stream: Readable }> {
  const opened: OpenedFile[] = []
  const errors: FieldError[] = []
  let status: 404 | 409 = 409
  const seen = new Set<string>()
  for (const [i, item] of items.entries()) {
    const r = await resolve(s, item)
    if (!('ok' in r)) {
      errors.push({ location: 'body', name: `items/${i}/${r.field}`, reason: r.reason })
      if (r.status === 404) status = 404
      continue
    }
    if (seen.has(r.ok.run.id)) {
      r.ok.content.close()
      continue
    }
    seen.add(r.ok.run.id)
    opened.push(r.ok)
  }
  if (errors.length) {
    closeAll(opened)
    const detail = `${errors.length} of ${items.length} item(s) cannot be archived: ${errors
      .slice(0, 5)
      .map((e) => `${e.name}: ${e.reason}`)
      .join(' ')}`
    throw problem(status === 404 ? 'not-found' : 'conflict', detail.slice(0, 2000), { errors: errors.slice(0, MAX_FIELD_ERRORS) })
  }
  const used = new Set<string>()
  const inArchive = opened.map((f) => {
    const dot = f.fileName.lastIndexOf('.')
    const [stem, ext] = dot > 0 ? [f.fileName.slice(0, dot), f.fileName.slice(dot)] : [f.fileName, '']
    let name = f.fileName
    for (let k = 2; used.has(name.toLowerCase()); k++) name = `${stem} (${k})${ext}`
    used.add(name.toLowerCase())
    return name
  })
  const fileName = `reports-${fileStamp(Date.now())}.zip`
  try {
    await s.audit.record(ctx, {
      description: `Downloaded ${opened.length} report file(s) as ${fileName}`,
      details: { archive: fileName, files: opened.map((f, i) => ({ ...fileDetails(f), nameInArchive: inArchive[i] })) },
      asset: opened.length === 1 ? reportAsset(opened[0].report) : { type: 'Report', detail: 'ReportDefinition' },
    })
  } catch (err) {
    closeAll(opened)
    throw err
  }
  const zip = new yazl.ZipFile()
  for (const [i, f] of opened.entries()) {
    zip.addReadStream(f.content.stream(), inArchive[i], { size: f.size, mtime: new Date(f.run.finished_ms ?? Date.now()), compress: f.run.format === 'CSV' })
  }
  zip.end()
  return { fileName, stream: zip.outputStream as Readable }
}
