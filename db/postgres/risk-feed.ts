// The risk notifications of events on PostgreSQL, raised behind the writes (migration 021): a
// consumer of the events' feed reads the events after its mark, a slice of ids at a time,
// raises or repeats their notifications (db/postgres/risk.ts) and moves the mark, all in one
// transaction. Event ids become visible in id order (migration 004's feed lock), so the mark
// never passes over an event still being written; the mark's row lock makes the consumers of
// several processes take turns, and a slice rolled back is read again by the next.
//
// A background loop keeps it caught up (lib/notifications/index.ts); every read of the
// notifications catches up first (lib/repos-postgres.ts), so that a reader sees the
// notifications of every event written before it asked, as on SQLite, where they are raised
// in the writing transaction.
import type { Postgres } from './connection.js'
import { pgEventDaysAfter } from './alarm-queue.js'
import type { PgRiskRaiser } from './risk.js'

/** Event ids read at most in one slice (a transaction). */
const RISK_SLICE_IDS = 5000

export function pgRiskFeed(db: Postgres, risk: PgRiskRaiser, sliceIds = RISK_SLICE_IDS) {
  /** The newest event id written, and the mark, when events wait to be raised (null: none waits). */
  const waiting = async (): Promise<{ upTo: number; top: number } | null> => {
    const r = await db.one<{ up_to: number; top: number }>(`SELECT up_to, (SELECT top FROM record_counts WHERE name = 'events') AS top FROM risk_raised WHERE id = 1`)
    return r && r.top > r.up_to ? { upTo: r.up_to, top: r.top } : null
  }

  /** One slice after the mark, under its lock; answers where the mark is now and whether events still wait after it. */
  const slice = (): Promise<{ upTo: number; more: boolean }> =>
    db.uow.run(async () => {
      const upTo = (await db.value<number>('SELECT up_to FROM risk_raised WHERE id = 1 FOR UPDATE')) ?? 0
      const days = await pgEventDaysAfter(db, upTo)
      if (!days || days.top <= upTo) return { upTo, more: false }
      const to = Math.min(days.top, upTo + sliceIds)
      await risk.raiseAfter(upTo, to, days.fromMs, days.toMs)
      await db.run('UPDATE risk_raised SET up_to = $1 WHERE id = 1', [to])
      return { upTo: to, more: to < days.top }
    })

  return {
    waiting,
    /**
     * Raises the notifications of every event written before it was called. Outside any unit
     * of work (each slice commits its own); answers how many slices it took (0: none waited).
     */
    async catchUp(): Promise<number> {
      const w = await waiting()
      if (!w) return 0
      let slices = 0
      // Up to the newest event of when it was asked: a writer faster than the slices does not hold the asker forever.
      for (let s = { upTo: w.upTo, more: true }; s.more && s.upTo < w.top; slices++) s = await slice()
      return slices
    },
  }
}
export type PgRiskFeed = ReturnType<typeof pgRiskFeed>
