// npm run bench -- ports: what the asynchronous storage ports and the unit of work cost over
// calling the SQLite repository directly, in process (no HTTP), in one run. Each case is
// run in rounds; the table gives the median round's time per operation and its ratio.
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { openDatabase } from '../db/index.js'
import { alarmsRepo } from '../db/alarms.js'
import { asyncPort, sqliteUnitOfWork } from '../db/unit-of-work.js'
import { median } from './bench-support.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7)
const N = Number(process.env.BENCH_PORT_CALLS ?? 20_000)

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'prime-bench-ports-'))
const db = openDatabase(path.join(dir, 'prime.sqlite'))
const repo = alarmsRepo(db)
const uow = sqliteUnitOfWork(db)
const port = asyncPort(repo, uow)
const input = (i: number) => ({
  id: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`,
  name: `dest-${i}`,
  type: 'syslog' as const,
  enabled: true,
  minSeverity: 2,
  categories: [],
  auditCategories: [],
  feeds: ['events' as const],
  settings: { host: '127.0.0.1', port: 514, protocol: 'udp', format: 'rfc5424', facility: 'local0' },
})
for (let i = 0; i < 50; i++) repo.insert(input(i), Date.now(), 'bench')
const ids = Array.from({ length: 50 }, (_, i) => input(i).id)

async function time(run: () => Promise<void> | void): Promise<number> {
  const rounds: number[] = []
  for (let r = 0; r < ROUNDS; r++) {
    const t0 = performance.now()
    await run()
    rounds.push(((performance.now() - t0) * 1000) / N)
  }
  return median(rounds)
}

const cases: [string, () => Promise<void> | void, () => Promise<void> | void][] = [
  [
    'read one row by id',
    () => {
      for (let i = 0; i < N; i++) repo.byId(ids[i % 50])
    },
    async () => {
      for (let i = 0; i < N; i++) await port.byId(ids[i % 50])
    },
  ],
  [
    'a write transaction: read, count, update',
    () => {
      for (let i = 0; i < N; i++)
        db.transaction(() => {
          const d = repo.byId(ids[i % 50])
          repo.count()
          repo.update(input(i % 50), Date.now(), d!.created_by)
        })()
    },
    async () => {
      for (let i = 0; i < N; i++)
        await uow.run(async () => {
          const d = await port.byId(ids[i % 50])
          await port.count()
          await port.update(input(i % 50), Date.now(), d!.created_by)
        })
    },
  ],
]

console.log(`| case (${N} operations, median of ${ROUNDS} rounds) | repository, µs/op | port, µs/op | port / repository |`)
console.log('|---|---|---|---|')
for (const [name, direct, ported] of cases) {
  const a = await time(direct)
  const b = await time(ported)
  console.log(`| ${name} | ${a.toFixed(2)} | ${b.toFixed(2)} | ${(b / a).toFixed(2)} |`)
}
db.close()
fs.rmSync(dir, { recursive: true, force: true })
