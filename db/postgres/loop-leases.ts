// The leases of singleton loops (lib/platform/loops.ts) in migration 001's `leases` table,
// named `loop:<name>`: one process at a time runs such a loop. A lease is taken when free or
// expired, renewed by its holder, and its fence grows with every change of holder.
import crypto from 'node:crypto'
import type { Postgres } from './connection.js'

/** `holder`: who this process is (a fresh id by default). */
export function pgLoopLeases(db: Postgres, holder: string = crypto.randomUUID()) {
  return {
    holder,
    async hold(name: string, ms: number): Promise<number | null> {
      const fence = await db.value<number>(
        `INSERT INTO leases AS l (name, holder, fence, expires_at) VALUES ($1, $2, 1, now() + $3 * interval '1 millisecond')
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_at = excluded.expires_at,
           fence = l.fence + CASE WHEN l.holder = excluded.holder THEN 0 ELSE 1 END
         WHERE l.holder = excluded.holder OR l.expires_at <= now()
         RETURNING fence`,
        [name, holder, ms],
      )
      return fence ?? null
    },
    /** Expired rather than deleted: the fence keeps growing with every change of holder. */
    async release(name: string, fence: number): Promise<void> {
      await db.run(`UPDATE leases SET expires_at = '-infinity' WHERE name = $1 AND holder = $2 AND fence = $3`, [name, holder, fence])
    },
  }
}
export type PgLoopLeases = ReturnType<typeof pgLoopLeases>
