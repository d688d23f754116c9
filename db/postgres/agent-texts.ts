// The agents' latest three event texts on PostgreSQL, moved on by each recorder call (the
// recorder's `agentTexts` hook, db/postgres/events-write.ts): one statement for every agent
// of the call. The rev moves by the agents' trigger (migration 003).
import type { Postgres } from './connection.js'

/** Shifts each agent's texts by its new ones (up to three, oldest first), as db/events.ts does on SQLite. */
export function pgLatestEventTexts(db: Postgres) {
  return async (texts: Map<number, string[]>): Promise<void> => {
    if (texts.size === 0) return
    const ids: number[] = []
    const counts: number[] = []
    const newest: string[] = []
    const second: (string | null)[] = []
    const third: (string | null)[] = []
    for (const [id, list] of texts) {
      const [a, b = null, c = null] = [...list].reverse()
      ids.push(id)
      counts.push(list.length)
      newest.push(a)
      second.push(b)
      third.push(c)
    }
    await db.run(
      `UPDATE agents SET
         latest_minus2_event_text = CASE x.n WHEN 1 THEN agents.latest_minus1_event_text WHEN 2 THEN agents.latest_event_text ELSE x.third END,
         latest_minus1_event_text = CASE x.n WHEN 1 THEN agents.latest_event_text ELSE x.second END,
         latest_event_text = x.newest
       FROM unnest($1::bigint[], $2::int[], $3::text[], $4::text[], $5::text[]) AS x (id, n, newest, second, third)
       WHERE agents.id = x.id`,
      [ids, counts, newest, second, third],
    )
  }
}
