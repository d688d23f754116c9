// What the agent gateway reads and writes: enrollment, check-ins (agent state and
// peripherals), command delivery and results, and the sweeper's timeouts. Each concern is a
// module of its own (gateway-*.ts); this one puts them together as the gateway's repository.
import type { DB } from './index.js'
import type { CheckInTimeWrites } from './answer-cache.js'
import { enrolmentStore } from './gateway-enrolment.js'
import { checkInStore } from './gateway-check-ins.js'
import { peripheralStore } from './gateway-peripherals.js'
import { commandStore } from './gateway-commands.js'
import { sweeperStore } from './gateway-sweeper.js'

export { signatureOf, peripheralTexts, internPeripheralTexts, unchanged } from './gateway-peripherals.js'

export function gatewayRepo(db: DB, checkInTimes: CheckInTimeWrites) {
  // The agents' revision counter: a check-in's state update and a disconnect take one new rev
  // for all the rows of a statement (migration 032).
  const nextRev = db.prepare<[], number>(`UPDATE row_counts SET n = n + 1 WHERE name = 'agents.rev' RETURNING n`).pluck()
  return {
    ...enrolmentStore(db),
    ...checkInStore(db, checkInTimes, nextRev),
    ...peripheralStore(db),
    ...commandStore(db),
    ...sweeperStore(db, nextRev),
  }
}
export type GatewayRepo = ReturnType<typeof gatewayRepo>
