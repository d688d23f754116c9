import type { DB } from './index.js'

export function systemRepo(db: DB) {
  const pageInfo = db.prepare<[], { page_count: number; page_size: number }>(
    'SELECT (SELECT page_count FROM pragma_page_count()) AS page_count, (SELECT page_size FROM pragma_page_size()) AS page_size',
  )
  const tableExists = db.prepare<[string], { n: number }>("SELECT count(*) AS n FROM sqlite_master WHERE type = 'table' AND name = ?")
  type AgentCounts = { total: number; connected: number; disconnected: number; armed: number; free: number }
  let agentCounts: { get(): unknown } | undefined
  return {
    sizeBytes: () => {
      const r = pageInfo.get()!
      return r.page_count * r.page_size
    },
    schemaVersion: () => db.pragma('user_version', { simple: true }) as number,
    /** Agent counts; zero until the agents table exists (its migration comes with the agents). */
    agentCounts() {
      if (!agentCounts) {
        if (tableExists.get('agents')!.n === 0) return { total: 0, connected: 0, disconnected: 0, armed: 0, free: 0 }
        agentCounts = db.prepare(
          `SELECT count(*) AS total,
             coalesce(sum(connection_status = 'Connected'), 0) AS connected,
             coalesce(sum(connection_status <> 'Connected'), 0) AS disconnected,
             coalesce(sum(operational_status = 'Armed'), 0) AS armed,
             coalesce(sum(operational_status = 'Free'), 0) AS free
           FROM agents`,
        )
      }
      return agentCounts.get() as AgentCounts
    },
    /** A read and a write in a transaction that is rolled back (the quick check is db/integrity.ts). */
    probe(): void {
      const probe = db.transaction(() => {
        db.prepare('CREATE TEMP TABLE IF NOT EXISTS health_probe (x INTEGER)').run()
        db.prepare('INSERT INTO health_probe (x) VALUES (1)').run()
        db.prepare('SELECT count(*) FROM users').get()
        throw new RollBack()
      })
      try {
        probe()
      } catch (err) {
        if (!(err instanceof RollBack)) throw err
      }
    },
  }
}

class RollBack extends Error {}
export type SystemRepo = ReturnType<typeof systemRepo>
