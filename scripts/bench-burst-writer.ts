// The burst's writer (scripts/bench-delivery.ts): a thread of its own, so that the receivers
// in the benchmark's process do not share its event loop, as a server's sweeper would not.
// Writes `events` events to the database `file` in transactions of `slice`, letting other
// work in between, and answers their ids and the time taken.
import { parentPort, workerData } from 'node:worker_threads'
import { openDatabase } from '../db/index.js'
import { eventsRepo } from '../db/events.js'
import { hostEvent } from '../lib/gateway/events.js'

const { file, events: total, slice } = workerData as { file: string; events: number; slice: number }
const db = openDatabase(file)
const events = eventsRepo(db)
const ids: number[] = []
const t0 = performance.now()
for (let i = 0; i < total; i += slice) {
  const k = Math.min(slice, total - i)
  db.transaction(() => {
    ids.push(
      ...events.record(
        Date.now(),
        // As the sweeper builds a disconnect's events (lib/gateway/events.ts).
        Array.from({ length: k }, (_, j) => hostEvent('disconnected', { uuid: `bench-agent-${i + j}`, host_identifier: `BENCH-PC-${i + j}`, local_ip_address: '10.0.0.1' }, `burst event ${i + j}`)),
      ),
    )
  })()
  await new Promise((r) => setImmediate(r))
}
const ms = performance.now() - t0
db.close()
parentPort!.postMessage({ ids, ms })
