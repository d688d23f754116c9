// Downloads of report files: one file as is, or several as one ZIP archive. Every item is
// resolved and its file opened before anything is sent, so that an archive is either
// complete or not sent at all, and a file removed meanwhile still reads to its end.
import fs from 'node:fs'
import type { FastifyReply, FastifyRequest } from 'fastify'
import yazl from 'yazl'
import type { ReportRow, RunRow } from '../../db/reports.js'
import { audit } from '../audit.js'
import { problem, type FieldError } from '../errors.js'
import { chooseResponseType } from '../negotiate.js'
import { iso } from '../time.js'
import { MAX_FIELD_ERRORS, reportAsset } from './definitions.js'
import { absolute, contentDisposition, fileStamp } from './files.js'
import { visibleName } from '../file-names.js'
import { formats } from './types.js'

export interface FileItem {
  reportId: string
  fileId?: string | null
}

interface Opened {
  report: ReportRow
  run: RunRow
  fd: number
  size: number
  fileName: string
  mediaType: string
}

type Resolution = { ok: Opened } | { status: 404 | 409; field: 'reportId' | 'fileId'; reason: string }

function resolve(req: FastifyRequest, item: FileItem): Resolution {
  const { reports } = req.server.repos
  const report = reports.byId(item.reportId.toLowerCase())
  if (!report) return { status: 404, field: 'reportId', reason: `No report with id ${item.reportId}.` }
  let run: RunRow | undefined
  if (item.fileId) {
    run = reports.runById(item.fileId.toLowerCase())
    if (!run || run.report_id !== report.id) return { status: 404, field: 'fileId', reason: `Report "${report.name}" has no run or file ${item.fileId}.` }
  } else {
    run = reports.newestFile(report.id)
    if (!run) {
      const open = reports.openRunOf(report.id)
      if (open) return { status: 409, field: 'fileId', reason: `Report "${report.name}" has no stored file yet: run ${open.id} is ${open.status}.` }
      return { status: 404, field: 'fileId', reason: `Report "${report.name}" has no stored file.` }
    }
  }
  if (run.status === 'queued' || run.status === 'running') return { status: 409, field: 'fileId', reason: `Run ${run.id} of "${report.name}" is still ${run.status}: its file is not ready yet.` }
  if (run.status === 'failed') return { status: 409, field: 'fileId', reason: `Run ${run.id} of "${report.name}" failed and has no file: ${run.reason ?? 'no reason recorded'}` }
  if (run.file_deleted_ms !== null) return { status: 404, field: 'fileId', reason: `The file of run ${run.id} of "${report.name}" was removed by the retention rule on ${iso(run.file_deleted_ms)}.` }
  try {
    const fd = fs.openSync(absolute(req.server, run.file_path!), 'r')
    // Names stored by an earlier version may hold invisible characters (bidi controls).
    return { ok: { report, run, fd, size: fs.fstatSync(fd).size, fileName: visibleName(run.file_name!), mediaType: formats[run.format].mediaType } }
  } catch {
    return { status: 404, field: 'fileId', reason: `The file of run ${run.id} of "${report.name}" is missing from the data directory.` }
  }
}

const closeAll = (files: Opened[]) => files.forEach((f) => fs.closeSync(f.fd))
const fileDetails = (f: Opened) => ({ reportId: f.report.id, reportName: f.report.name, fileId: f.run.id, fileName: f.fileName, sizeBytes: f.size })

/** One file, streamed with its media type and name. */
export function sendFile(req: FastifyRequest, reply: FastifyReply, item: FileItem) {
  const r = resolve(req, item)
  if (!('ok' in r)) throw problem(r.status === 404 ? 'not-found' : 'conflict', r.reason, { errors: [{ location: 'body', name: r.field, reason: r.reason }] })
  const f = r.ok
  if (!chooseResponseType(req, [f.mediaType])) {
    fs.closeSync(f.fd)
    throw problem('not-acceptable', `This file is ${f.mediaType}, which Accept does not allow.`)
  }
  audit(req, { description: `Downloaded report file ${f.fileName} of "${f.report.name}"`, details: fileDetails(f), asset: reportAsset(f.report) })
  // An export like the others: how many records it holds, and whether the format's row limit cut it.
  return reply
    .header('content-disposition', contentDisposition(f.fileName))
    .header('x-records-filtered', String(f.run.row_count ?? 0))
    .header('x-export-truncated', f.run.truncated ? 'true' : 'false')
    .header('content-length', f.size)
    .type(f.mediaType === 'text/csv' ? 'text/csv; charset=utf-8' : f.mediaType)
    .send(fs.createReadStream('', { fd: f.fd }))
}

/** Several files as one ZIP archive, each once, names made unique. */
export function sendArchive(req: FastifyRequest, reply: FastifyReply, items: FileItem[]) {
  const opened: Opened[] = []
  const errors: FieldError[] = []
  let status: 404 | 409 = 409
  const seen = new Set<string>()
  for (const [i, item] of items.entries()) {
    const r = resolve(req, item)
    if (!('ok' in r)) {
      errors.push({ location: 'body', name: `items/${i}/${r.field}`, reason: r.reason })
      if (r.status === 404) status = 404
      continue
    }
    if (seen.has(r.ok.run.id)) {
      fs.closeSync(r.ok.fd)
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
  const zip = new yazl.ZipFile()
  const used = new Set<string>()
  const names: string[] = []
  for (const f of opened) {
    const dot = f.fileName.lastIndexOf('.')
    const [stem, ext] = dot > 0 ? [f.fileName.slice(0, dot), f.fileName.slice(dot)] : [f.fileName, '']
    let name = f.fileName
    for (let k = 2; used.has(name.toLowerCase()); k++) name = `${stem} (${k})${ext}`
    used.add(name.toLowerCase())
    names.push(name)
    zip.addReadStream(fs.createReadStream('', { fd: f.fd }), name, { size: f.size, mtime: new Date(f.run.finished_ms ?? Date.now()), compress: f.run.format === 'CSV' })
  }
  zip.end()
  const archive = `reports-${fileStamp(Date.now())}.zip`
  audit(req, {
    description: `Downloaded ${opened.length} report file(s) as ${archive}`,
    details: { archive, files: opened.map((f, i) => ({ ...fileDetails(f), nameInArchive: names[i] })) },
    asset: opened.length === 1 ? reportAsset(opened[0].report) : { type: 'Report', detail: 'ReportDefinition' },
  })
  return reply.header('content-disposition', `attachment; filename="${archive}"`).type('application/zip').send(zip.outputStream)
}
