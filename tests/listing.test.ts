// backend: none — pure functions: no app is built and no database opened
// Pins lib/listing.ts: the one place that reads paging, sorting and filter values of every list.
import t, { type Test } from 'tap'
import { Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { page, sort, bool, date, severity, contains, listAnswer, listAnswerJson, listAnswerOfBytes, MAX_PAGE_SIZE, DEFAULT_PAGE_SIZE } from '../lib/listing.js'
import { orderBy } from '../db/sql.js'
import { ProblemError } from '../lib/errors.js'
import type { Operation } from '../lib/contract.js'

/** A list operation as lib/contract.ts reads it from the contract. */
const fakeOp = (over: Partial<Operation> = {}): Operation => ({
  operationId: 'listThings',
  method: 'GET',
  path: '/prime/webui/things',
  access: { kind: 'user', minProfile: 10 },
  auditCategory: null,
  sortFields: ['name', 'creationTime', 'severity', 'id'],
  defaultSort: 'creationTime_desc',
  pageSizeMax: 1_000_000,
  requestTypes: [],
  bodyRequired: false,
  responseTypes: ['application/json', 'text/json', 'text/plain'],
  ...over,
})

/** Runs fn, which must throw a 400 problem naming `name` in the query; answers the problem. */
function invalid(t: Test, fn: () => unknown, name: string): ProblemError | undefined {
  try {
    fn()
  } catch (err) {
    t.type(err, ProblemError, 'a problem, not a plain error')
    const p = err as ProblemError
    t.equal(p.status, 400)
    t.equal(p.code, 'validation')
    t.equal(p.errors?.length, 1, 'one field error')
    t.equal(p.errors?.[0].location, 'query')
    t.equal(p.errors?.[0].name, name)
    t.match(p.message, name, 'detail names the field')
    return p
  }
  t.fail(`expected a 400 naming ${name}`)
  return undefined
}

t.test('page', async (t) => {
  t.equal(DEFAULT_PAGE_SIZE, 20)
  t.equal(MAX_PAGE_SIZE, 1_000_000)
  const list = { operationId: 'getList', pageSizeMax: 1_000_000 }
  const pg = (q: { PageNumber?: number; PageSize?: number }) => page(q, list)
  t.same(pg({}), { pageNumber: 1, pageSize: 20, offset: 0 }, 'defaults: page 1 of 20')
  t.same(pg({ PageNumber: 3 }), { pageNumber: 3, pageSize: 20, offset: 40 })
  t.same(pg({ PageNumber: 2, PageSize: 50 }), { pageNumber: 2, pageSize: 50, offset: 50 })
  t.same(pg({ PageSize: 1_000_000 }), { pageNumber: 1, pageSize: 1_000_000, offset: 0 }, 'the maximum is allowed')
  t.same(pg({ PageSize: 1 }), { pageNumber: 1, pageSize: 1, offset: 0 })

  const p = invalid(t, () => pg({ PageSize: 1_000_001 }), 'PageSize')
  t.match(p?.errors?.[0].reason, /1000000/, 'says what the maximum is')
  invalid(t, () => pg({ PageSize: 10_000_000 }), 'PageSize')
  invalid(t, () => pg({ PageSize: 0 }), 'PageSize')
  invalid(t, () => pg({ PageSize: 2.5 }), 'PageSize')
  invalid(t, () => pg({ PageNumber: 0 }), 'PageNumber')
  invalid(t, () => pg({ PageNumber: -1 }), 'PageNumber')
  invalid(t, () => pg({ PageNumber: 1.5 }), 'PageNumber')

  // A list's own, smaller maximum (the contract's PageSize parameter) is the one enforced.
  const small = { operationId: 'getAssets', pageSizeMax: 10_000 }
  t.same(page({ PageSize: 10_000 }, small), { pageNumber: 1, pageSize: 10_000, offset: 0 })
  const over = invalid(t, () => page({ PageSize: 10_001 }, small), 'PageSize')
  t.match(over?.errors?.[0].reason, /from 1 to 10000$/)
  t.throws(() => page({}, { operationId: 'getThing', pageSizeMax: null }), /getThing declares no PageSize parameter/)
})

t.test('sort', async (t) => {
  const op = fakeOp()
  t.same(sort(op, undefined), { field: 'creationTime', direction: 'desc' }, 'the default sort')
  t.same(sort(op, 'name_asc'), { field: 'name', direction: 'asc' })
  t.same(sort(op, 'severity_desc'), { field: 'severity', direction: 'desc' })
  t.same(sort(op, 'CREATIONTIME_ASC'), { field: 'creationTime', direction: 'asc' }, 'field and direction in any case, field in its contract spelling')
  t.same(sort(op, 'creationtime_Desc'), { field: 'creationTime', direction: 'desc' })

  const unknown = invalid(t, () => sort(op, 'password_asc'), 'SortBy')
  t.match(unknown?.errors?.[0].reason, 'name, creationTime, severity, id', 'lists the allowed fields')
  invalid(t, () => sort(op, 'name'), 'SortBy')
  invalid(t, () => sort(op, 'name_up'), 'SortBy')
  invalid(t, () => sort(op, '_asc'), 'SortBy')
  invalid(t, () => sort(op, 'name_asc; DROP TABLE users'), 'SortBy')
  invalid(t, () => sort(op, 'bogus_desc', 'sortBy'), 'sortBy')

  t.throws(() => sort(fakeOp({ defaultSort: null }), undefined), /declares no x-default-sort/, 'an operation without a default sort is a contract bug')
  t.same(sort(fakeOp({ defaultSort: null }), 'id_asc'), { field: 'id', direction: 'asc' })
})

t.test('orderBy', async (t) => {
  const columns = { name: 'user_name', creationTime: 'created_ms', severity: 'severity', id: 'id' }
  t.equal(orderBy({ field: 'name', direction: 'asc' }, columns, 'id'), 'user_name ASC, id ASC', 'ties broken by id in the same direction')
  t.equal(orderBy({ field: 'creationTime', direction: 'desc' }, columns, 'id'), 'created_ms DESC, id DESC')
  t.equal(orderBy({ field: 'id', direction: 'desc' }, columns, 'id'), 'id DESC', 'no duplicate tie-breaker when sorting by id')
  t.throws(() => orderBy({ field: 'missing', direction: 'asc' }, columns, 'id'), /no column for sort field missing/)
  // The whole chain: a client's SortBy can only ever become one of the mapped columns.
  t.equal(orderBy(sort(fakeOp(), 'NAME_DESC'), columns, 'id'), 'user_name DESC, id DESC')
})

t.test('bool', async (t) => {
  t.equal(bool(undefined, 'isActive'), undefined, 'absent stays absent')
  for (const v of ['True', 'true', 'TRUE', 'tRuE', '1']) t.equal(bool(v, 'isActive'), true, v)
  for (const v of ['False', 'false', 'FALSE', 'fAlSe', '0']) t.equal(bool(v, 'isActive'), false, v)
  for (const v of ['yes', 'no', '2', '', ' true', 'truee', 't']) invalid(t, () => bool(v, 'isActive'), 'isActive')
})

t.test('date', async (t) => {
  const utc = (s: string) => Date.parse(s)
  t.equal(date(undefined, 'FromDate'), undefined, 'absent stays absent')
  t.equal(date('2020-06-22T12:00:00.000Z', 'FromDate'), utc('2020-06-22T12:00:00.000Z'))
  t.equal(date('2020-03-01T14:11:06Z', 'FromDate'), utc('2020-03-01T14:11:06.000Z'))
  t.equal(date('2024-05-01 12:00:00.123456', 'FromDate'), utc('2024-05-01T12:00:00.123Z'), 'microseconds cut to milliseconds, no zone means UTC')
  t.equal(date('2024-05-01 12:00:00', 'FromDate'), utc('2024-05-01T12:00:00.000Z'), 'space separator, no zone means UTC')
  t.equal(date('2024-05-01T12:00:00', 'FromDate'), utc('2024-05-01T12:00:00.000Z'), 'ISO without zone means UTC')
  t.equal(date('2024-05-01', 'FromDate'), utc('2024-05-01T00:00:00.000Z'), 'a date alone is midnight UTC')
  t.equal(date('2024-05-01T12:00:00+02:00', 'FromDate'), utc('2024-05-01T10:00:00.000Z'), 'a positive offset is applied')
  t.equal(date('2024-05-01T12:00:00-05:30', 'FromDate'), utc('2024-05-01T17:30:00.000Z'), 'a negative offset is applied')
  t.equal(date('2024-05-01T12:00:00+0200', 'FromDate'), utc('2024-05-01T10:00:00.000Z'), 'offset without colon')
  t.equal(date('2024-05-01T12:00:00+02', 'FromDate'), utc('2024-05-01T10:00:00.000Z'), 'offset in hours')
  t.equal(date('2024-05-01t12:00:00z', 'FromDate'), utc('2024-05-01T12:00:00.000Z'), 'lower-case t and z')
  t.equal(date('2024-02-29', 'FromDate'), utc('2024-02-29T00:00:00.000Z'), 'a leap day')
  t.equal(date(' 2024-05-01 ', 'FromDate'), utc('2024-05-01T00:00:00.000Z'), 'surrounding blanks ignored')

  for (const v of ['2023-02-31', '2023-02-29', '2024-13-01', '2024-00-10', '2024-05-32', '2024-05-01T24:00:00Z', '2024-05-01T12:60:00Z', '2024-05-01T12:00:60Z']) {
    const p = invalid(t, () => date(v, 'FromDate'), 'FromDate')
    t.match(p?.message, /not a real date/, `${v}: says the date does not exist`)
  }
  for (const v of ['yesterday', '', '2024/05/01', '01-05-2024', '2024-5-1', '2024-05-01T12', '1714564800000']) invalid(t, () => date(v, 'FromDate'), 'FromDate')
  invalid(t, () => date('2024-05-01T12:00:00+15:00', 'ToDate'), 'ToDate')
})

t.test('severity', async (t) => {
  t.equal(severity(undefined, 'minimumSeverity'), undefined, 'absent stays absent')
  const names = ['Emergency', 'Alert', 'Critical', 'Error', 'Warning', 'Notice', 'Informational', 'Debug']
  names.forEach((n, i) => {
    t.equal(severity(n, 'minimumSeverity'), i, n)
    t.equal(severity(n.toLowerCase(), 'minimumSeverity'), i, n.toLowerCase())
    t.equal(severity(n.toUpperCase(), 'minimumSeverity'), i, n.toUpperCase())
    t.equal(severity(String(i), 'minimumSeverity'), i, String(i))
  })
  t.equal(severity('Warning', 'minimumSeverity'), 4, 'Warning is 4')
  t.equal(severity('Info', 'minimumSeverity'), 6, 'Info, the alias the contract names')
  for (const v of ['8', '-1', '10', '4.0', 'Warnings', 'Severe', '']) invalid(t, () => severity(v, 'minimumSeverity'), 'minimumSeverity')
})

t.test('contains', async (t) => {
  t.equal(contains('abc'), '%abc%')
  t.equal(contains(''), '%%')
  t.equal(contains('50%'), '%50\\%%', '% is literal')
  t.equal(contains('a_b'), '%a\\_b%', '_ is literal')
  t.equal(contains('C:\\temp'), '%C:\\\\temp%', 'backslash, the escape character, is escaped')
  t.equal(contains('\\%_'), '%\\\\\\%\\_%')
})

t.test('contains() against SQLite', async (t) => {
  const { default: Database } = await import('better-sqlite3')
  const db = new Database(':memory:')
  t.teardown(() => db.close())
  db.exec("CREATE TABLE x (v TEXT); INSERT INTO x VALUES ('50% off'), ('500 off'), ('a_b'), ('axb'), ('C:\\temp'), ('C:temp'), ('DESKTOP-9LR722S (192.168.100.128)')")
  const find = (text: string) =>
    db
      .prepare<[string], { v: string }>("SELECT v FROM x WHERE v LIKE ? ESCAPE '\\' ORDER BY v")
      .all(contains(text))
      .map((r) => r.v)
  t.same(find('50%'), ['50% off'], '% matches only itself')
  t.same(find('a_b'), ['a_b'], '_ matches only itself')
  t.same(find('C:\\'), ['C:\\temp'], 'backslash matches only itself')
  t.same(find('desktop-9lr'), ['DESKTOP-9LR722S (192.168.100.128)'], 'case-insensitive contains')
})

t.test('listAnswer', async (t) => {
  t.same(listAnswer(10, 3, [{ a: 1 }]), { recordsTotal: 10, recordsFiltered: 3, data: [{ a: 1 }] })
  t.equal(listAnswerJson(10, 3, '[{"a":1}]'), JSON.stringify(listAnswer(10, 3, [{ a: 1 }])), 'as text: the same answer')
})

t.test('a large answer is handed on over several turns of the loop, whole and in order', async (t) => {
  // 10,000 rows of about 400 bytes: a poller's page, 4 MB.
  const rows = Array.from({ length: 10_000 }, (_, i) => Buffer.from(`,${JSON.stringify({ eventID: i + 1, details: 'x'.repeat(380) })}`))
  const answer = listAnswerOfBytes(10_000, 10_000, rows)
  // A sink that takes everything at once, as a loopback socket does: only the answer's own
  // pauses spread it over turns (an immediate between two chunks marks a turn passed).
  let turn = 0
  let ticking = true
  const tick = () => {
    turn++
    if (ticking) setImmediate(tick)
  }
  setImmediate(tick)
  const turns = new Set<number>()
  const got: Buffer[] = []
  await pipeline(
    answer,
    new Writable({
      write(chunk: Buffer, _enc, done) {
        turns.add(turn)
        got.push(chunk)
        done()
      },
    }),
  )
  ticking = false
  const text = Buffer.concat(got).toString()
  t.equal(Buffer.byteLength(text), answer.bytes)
  t.same(
    JSON.parse(text).data.map((r: { eventID: number }) => r.eventID),
    Array.from({ length: 10_000 }, (_, i) => i + 1),
  )
  t.ok(turns.size >= 4, `over ${turns.size} turns (1 MiB a turn at most)`)
})
