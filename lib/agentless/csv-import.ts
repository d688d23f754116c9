// The CSV import of agentless connections: the file read as RFC 4180 with the line each
// row starts on, every row checked on its own, the valid ones applied in one transaction.
import type { components } from '../../generated/openapi.js'
import { problem } from '../errors.js'
import type { Context } from '../platform/context.js'
import type { AgentlessDeps } from './deps.js'
import { changedFields, checkDraft, type Draft, type RuleError } from './rules.js'
import { closeBatch, nocaseKey, openBatch, openCredentials, storeConnection, storeProblem } from './connections.js'

type Schemas = components['schemas']
type UploadRow = Schemas['AgentlessUploadRow']

export const MAX_FILE_BYTES = 5 * 1024 * 1024
export const MAX_ROWS = 10_000
const MAX_ROW_ERRORS = 20

/** The columns, in the order the export writes them. */
export const CSV_COLUMNS = [
  'name',
  'address',
  'protocol',
  'port',
  'useTls',
  'userName',
  'password',
  'privateKey',
  'privateKeyPassphrase',
  'isOverrideDefaults',
  'pollingIntervalSeconds',
  'timeoutSeconds',
  'pollerId',
] as const
type Column = (typeof CSV_COLUMNS)[number]
const REQUIRED: Column[] = ['name', 'address', 'protocol', 'userName']
const SECRET: Column[] = ['password', 'privateKey', 'privateKeyPassphrase']

export interface CsvRecord {
  /** The physical line the record starts on (1-based). */
  line: number
  cells: string[]
}

export class CsvSyntaxError extends Error {
  constructor(
    readonly line: number,
    reason: string,
  ) {
    super(`line ${line}: ${reason}`)
  }
}

/**
 * Parses RFC 4180 text (CRLF or LF; quoted fields may hold commas, quotes and line
 * breaks). Blank lines are skipped. Stops with a CsvSyntaxError at the first malformed
 * line, and after `maxRecords` records (answering one more, so that the caller can tell).
 */
export function parseCsv(text: string, maxRecords: number): CsvRecord[] {
  const records: CsvRecord[] = []
  let line = 1
  let i = 0
  const n = text.length
  while (i < n && records.length <= maxRecords) {
    const start = line
    const cells: string[] = []
    let quotedAny = false
    // One record: fields until a line break outside quotes, or the end.
    for (;;) {
      let cell = ''
      if (text[i] === '"') {
        quotedAny = true
        const opened = line
        i++
        for (;;) {
          if (i >= n) throw new CsvSyntaxError(opened, 'a quoted field is never closed')
          const ch = text[i]
          if (ch === '"') {
            if (text[i + 1] === '"') {
              cell += '"'
              i += 2
              continue
            }
            i++
            break
          }
          if (ch === '\n' || (ch === '\r' && text[i + 1] !== '\n')) line++
          cell += ch
          i++
        }
        if (i < n && text[i] !== ',' && text[i] !== '\n' && text[i] !== '\r') {
          throw new CsvSyntaxError(line, 'a closing quote must be followed by a comma or the end of the line')
        }
      } else {
        while (i < n && text[i] !== ',' && text[i] !== '\n' && text[i] !== '\r') {
          if (text[i] === '"') throw new CsvSyntaxError(line, 'a quote inside an unquoted field (quote the whole field and double the quote)')
          cell += text[i]
          i++
        }
      }
      cells.push(cell)
      if (i < n && text[i] === ',') {
        i++
        continue
      }
      // End of the record: a line break (CRLF, LF or a lone CR) or the end of the text.
      if (text[i] === '\r') i++
      if (text[i] === '\n') i++
      line++
      break
    }
    const blank = !quotedAny && cells.length === 1 && cells[0].trim() === ''
    if (!blank) records.push({ line: start, cells })
  }
  return records
}

/** The text of an uploaded file: UTF-8 (a BOM allowed); the first line that is not UTF-8 answers 400. */
export function decodeUtf8(data: Buffer): string {
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(data)
  } catch {
    let line = 1
    let from = 0
    for (let i = 0; i <= data.length; i++) {
      if (i === data.length || data[i] === 0x0a) {
        try {
          new TextDecoder('utf-8', { fatal: true }).decode(data.subarray(from, i))
        } catch {
          throw problem('validation', `The file is not valid UTF-8 (line ${line}); save it as UTF-8 CSV.`)
        }
        line++
        from = i + 1
      }
    }
    throw problem('validation', 'The file is not valid UTF-8; save it as UTF-8 CSV.')
  }
}

/** Which column each header cell names; an unknown, repeated or missing column answers 400. */
function readHeader(header: CsvRecord): Map<Column, number> {
  const at = new Map<Column, number>()
  header.cells.forEach((raw, i) => {
    const name = raw.trim()
    const column = CSV_COLUMNS.find((c) => c.toLowerCase() === name.toLowerCase())
    if (!column) throw problem('validation', `The header (line ${header.line}) has an unknown column "${name.slice(0, 64)}"; the columns are ${CSV_COLUMNS.join(', ')}.`)
    if (at.has(column)) throw problem('validation', `The header (line ${header.line}) names the column ${column} twice.`)
    at.set(column, i)
  })
  const missing = REQUIRED.filter((c) => !at.has(c))
  if (missing.length) throw problem('validation', `The header (line ${header.line}) lacks the required column(s) ${missing.join(', ')}.`)
  return at
}

type Cells = Partial<Record<Column, string>>

/**
 * A row's cells as a draft, with the cells that cannot be read (left out of the draft, so
 * that the rules still report the other cells). `storedPollerId`: the poller of the
 * connection the row updates (an empty cell keeps it); undefined for a new one.
 */
function rowDraft(cells: Cells, storedPollerId: string | null | undefined): { draft: Draft; errors: RuleError[] } {
  const errors: RuleError[] = []
  const cell = (c: Column) => (SECRET.includes(c) ? (cells[c] ?? '') : (cells[c] ?? '').trim())
  for (const c of REQUIRED) if (cell(c) === '') errors.push({ field: c, reason: 'is required' })
  const int = (c: Column): number | null => {
    const v = cell(c)
    if (v === '') return null
    if (!/^\d{1,9}$/.test(v)) {
      errors.push({ field: c, reason: `must be a whole number, got "${v.slice(0, 40)}"` })
      return null
    }
    return Number(v)
  }
  const flag = (c: Column): boolean | null => {
    const v = cell(c)
    if (v === '') return null
    if (/^(true|1)$/i.test(v)) return true
    if (/^(false|0)$/i.test(v)) return false
    errors.push({ field: c, reason: `must be true, false, 1 or 0, got "${v.slice(0, 40)}"` })
    return null
  }
  const secret = (c: Column) => (cell(c) === '' ? undefined : cell(c))
  const draft: Draft = {
    name: cell('name'),
    address: cell('address'),
    protocol: cell('protocol'),
    port: int('port'),
    useTls: flag('useTls'),
    userName: cell('userName'),
    password: secret('password'),
    privateKey: secret('privateKey'),
    privateKeyPassphrase: secret('privateKeyPassphrase'),
    isOverrideDefaults: flag('isOverrideDefaults') ?? false,
    pollingIntervalSeconds: int('pollingIntervalSeconds'),
    timeoutSeconds: int('timeoutSeconds'),
    pollerId: cell('pollerId') === '' ? (storedPollerId ?? null) : cell('pollerId'),
  }
  return { draft, errors }
}

export async function importConnections(deps: AgentlessDeps, ctx: Context, fileName: string | null, data: Buffer): Promise<Schemas['AgentlessUploadResult']> {
  const text = decodeUtf8(data)
  let records: CsvRecord[]
  try {
    records = parseCsv(text, MAX_ROWS + 1)
  } catch (err) {
    if (err instanceof CsvSyntaxError) throw problem('validation', `The file is not valid CSV: ${err.message}.`)
    throw err
  }
  if (records.length === 0) throw problem('validation', 'The file is empty: it needs a header row and at least one connection.')
  const [header, ...rows] = records
  if (rows.length > MAX_ROWS) throw problem('validation', `The file has more than ${MAX_ROWS} data rows; nothing was imported. Split it into smaller files.`)
  const columns = readHeader(header)
  const now = Date.now()

  const nameOf = (row: CsvRecord) => (row.cells[columns.get('name')!] ?? '').trim()
  // A name another request stored between the look-up and the insert (PostgreSQL's unique
  // index refused the row, and the whole unit with it): the import runs again and reads that
  // name as stored, so that its row updates that connection as it would have had the name
  // been stored before the file came. Bounded, for a file whose names keep being taken.
  for (let attempt = 1; ; attempt++) {
    try {
      return await importRows(deps, ctx, fileName, data, header, rows, columns, nameOf, now)
    } catch (err) {
      if ((err as { code?: string }).code !== 'duplicate-key') throw err
      if (attempt < NAME_RACE_ATTEMPTS) continue
      const reason = 'is already used by a connection another request stored while the file was imported; nothing was imported, import it again'
      throw problem('conflict', `name ${reason}.`, { errors: [{ location: 'body', name: 'name', reason }] })
    }
  }
}

/** Tries of an import whose names other requests take meanwhile. */
const NAME_RACE_ATTEMPTS = 3

/** The rows applied in one unit of work (see importConnections). */
async function importRows(
  deps: AgentlessDeps,
  ctx: Context,
  fileName: string | null,
  data: Buffer,
  header: CsvRecord,
  rows: CsvRecord[],
  columns: Map<Column, number>,
  nameOf: (row: CsvRecord) => string,
  now: number,
): Promise<Schemas['AgentlessUploadResult']> {
  const { uow, audit } = deps
  return uow.run(async () => {
    const out: UploadRow[] = []
    const seen = new Map<string, number>()
    const batch = await openBatch(deps, [...new Set(rows.map(nameOf).filter((n) => n !== ''))])
    const audited: { line: number; name: string | null; result: string; id?: number; changed?: string[]; errors?: RuleError[] }[] = []
    for (const row of rows) {
      const nameCell = nameOf(row)
      const name = nameCell === '' ? null : nameCell.slice(0, 256)
      const reject = (errors: { column: string | null; reason: string }[]) => {
        const kept = errors.slice(0, MAX_ROW_ERRORS).map((e) => ({ column: e.column, reason: e.reason.slice(0, 500) }))
        out.push({ line: row.line, name, result: 'rejected', connectionId: null, errors: kept })
        audited.push({ line: row.line, name, result: 'rejected', errors: kept.map((e) => ({ field: e.column ?? '(row)', reason: e.reason })) })
      }
      if (row.cells.length !== header.cells.length) {
        reject([{ column: null, reason: `has ${row.cells.length} cell(s) where the header has ${header.cells.length}` }])
        continue
      }
      const firstLine = name === null ? undefined : seen.get(name.toLowerCase())
      if (firstLine !== undefined) {
        reject([{ column: 'name', reason: `repeats the name of line ${firstLine}` }])
        continue
      }
      if (name !== null) seen.set(name.toLowerCase(), row.line)
      const cells: Cells = {}
      for (const [column, index] of columns) cells[column] = row.cells[index]
      // A name repeated in the file was refused above, so the batch's row is still the stored one.
      const stored = name === null ? undefined : (batch.named.get(nocaseKey(nameCell)) ?? undefined)
      const { draft, errors: cellErrors } = rowDraft(cells, stored?.poller_id)
      const credentials = stored ? openCredentials(deps, stored) : undefined
      const { errors, checked } = checkDraft(draft, stored && credentials ? { row: stored, credentials } : undefined)
      const unread = new Set(cellErrors.map((e) => e.field))
      const all = [...cellErrors, ...errors.filter((e) => !unread.has(e.field))]
      if (!checked || all.length > 0) {
        reject(all.map((e) => ({ column: e.field, reason: e.reason })))
        continue
      }
      const blocked = await storeProblem(deps, checked, stored, batch)
      if (blocked) {
        reject([{ column: blocked.field, reason: blocked.reason }])
        continue
      }
      if (!stored) {
        const id = await storeConnection(deps, checked, undefined, now, batch)
        out.push({ line: row.line, name, result: 'imported', connectionId: id, errors: [] })
        audited.push({ line: row.line, name, result: 'imported', id })
        continue
      }
      const changed = changedFields(stored, checked, credentials)
      if (changed.length) await storeConnection(deps, checked, stored, now, batch)
      const result = changed.length ? 'updated' : 'unchanged'
      out.push({ line: row.line, name, result, connectionId: stored.id, errors: [] })
      audited.push({ line: row.line, name, result, id: stored.id, changed })
    }
    await closeBatch(deps, batch)
    const count = (r: UploadRow['result']) => out.filter((o) => o.result === r).length
    const answer = {
      fileName: fileName === null ? null : fileName.slice(0, 255),
      totalRows: out.length,
      imported: count('imported'),
      updated: count('updated'),
      unchanged: count('unchanged'),
      rejected: count('rejected'),
      rows: out,
    }
    await audit.record(ctx, {
      description: `Imported agentless connections from ${fileName ? `"${fileName.slice(0, 100)}"` : 'a file'}: ${answer.imported} imported, ${answer.updated} updated, ${answer.unchanged} unchanged, ${answer.rejected} rejected`,
      details: { fileName: answer.fileName, bytes: data.length, totalRows: answer.totalRows, rows: audited.slice(0, 1000) },
      outcome: answer.rejected === answer.totalRows ? 'Failed' : 'Succeeded',
      asset: { type: 'AgentlessHost' },
    })
    return answer
  })
}
