// Alarm destinations: their definitions (settings sealed at rest), and the counts of the
// deliveries each has waiting or failed.
import type { DB } from './index.js'
import { type eventQueue, LAST_EVENT } from './alarm-queue.js'
import type { DeliveryCounts, DestinationInput, DestinationRow, SettingsSealer } from '../lib/alarms/ports.js'

/** A category list as the triggers match it: `,USB,Host,`, or '' for all. */
const list = (names: string[]) => (names.length ? `,${names.join(',')},` : '')

/** `queue`: the alarms' event queue (alarm-queue.ts), the one the repository drives. */
export function destinationStore(db: DB, queue: ReturnType<typeof eventQueue>, sealer?: SettingsSealer) {
  const all = db.prepare<[], DestinationRow>('SELECT * FROM alarm_destinations ORDER BY name_key, id')
  const byId = db.prepare<[string], DestinationRow>('SELECT * FROM alarm_destinations WHERE id = ?')
  const byNameKey = db.prepare<[string], DestinationRow>('SELECT * FROM alarm_destinations WHERE name_key = ?')
  const count = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM alarm_destinations')
  const insert = db.prepare(
    `INSERT INTO alarm_destinations (id, name, name_key, type, enabled, min_severity, categories, audit_categories,
       feed_events, feed_audit, feed_assets, settings, created_ms, created_by, updated_ms, updated_by, events_from)
     VALUES (@id, @name, @nameKey, @type, @enabled, @minSeverity, @categories, @auditCategories,
       @feedEvents, @feedAudit, @feedAssets, @settings, @ms, @user, @ms, @user, ${LAST_EVENT})`,
  )
  const update = db.prepare(
    `UPDATE alarm_destinations SET name = @name, name_key = @nameKey, type = @type, enabled = @enabled,
       min_severity = @minSeverity, categories = @categories, audit_categories = @auditCategories,
       feed_events = @feedEvents, feed_audit = @feedAudit, feed_assets = @feedAssets, settings = @settings,
       updated_ms = @ms, updated_by = @user,
       events_from = CASE WHEN (enabled = 0 OR feed_events = 0) AND @enabled = 1 AND @feedEvents = 1 THEN ${LAST_EVENT} ELSE events_from END
     WHERE id = @id`,
  )
  const remove = db.prepare<[string]>('DELETE FROM alarm_destinations WHERE id = ?')
  const setSettings = db.prepare<[string, string]>('UPDATE alarm_destinations SET settings = ? WHERE id = ?')
  function opened<R extends DestinationRow | undefined>(row: R): R {
    return row && sealer ? { ...row, settings: sealer.open(row.settings, row.id) } : row
  }
  const cancelPending = db.prepare<[number, string]>(`UPDATE alarm_outbox SET status = 'cancelled', done_ms = ? WHERE destination_id = ? AND status = 'pending'`)
  const pendingCount = db.prepare<[string], { n: number }>(`SELECT count(*) AS n FROM alarm_outbox WHERE destination_id = ? AND status = 'pending'`)
  const failedSince = db.prepare<[string, number], { n: number }>(`SELECT count(*) AS n FROM alarm_outbox WHERE destination_id = ? AND status = 'failed' AND done_ms >= ?`)

  const params = (d: DestinationInput, ms: number, user: string | null) => ({
    id: d.id,
    name: d.name,
    nameKey: d.name.toLowerCase(),
    type: d.type,
    enabled: d.enabled ? 1 : 0,
    minSeverity: d.minSeverity,
    categories: list(d.categories),
    auditCategories: list(d.auditCategories),
    feedEvents: d.feeds.includes('events') ? 1 : 0,
    feedAudit: d.feeds.includes('audit') ? 1 : 0,
    feedAssets: d.feeds.includes('assets') ? 1 : 0,
    settings: sealer ? sealer.seal(d.settings, d.id) : JSON.stringify(d.settings),
    ms,
    user,
  })

  return {
    all: () => all.all().map(opened),
    byId: (id: string) => opened(byId.get(id)),
    byName: (name: string) => opened(byNameKey.get(name.toLowerCase())),
    /** Seals the settings stored in the clear (before sealing existed); answers how many. */
    sealStored(): number {
      if (!sealer) return 0
      let n = 0
      db.transaction(() => {
        for (const row of all.all()) {
          if (!sealer.isPlain(row.settings)) continue
          setSettings.run(sealer.seal(JSON.parse(row.settings), row.id), row.id)
          n++
        }
      })()
      return n
    },
    count: () => count.get()!.n,
    insert: (d: DestinationInput, ms: number, user: string | null) => insert.run(params(d, ms, user)),
    /**
     * A change applies to the events stored after it: those stored before are queued first,
     * with the destinations as they were (all of them: an admin's change waits for a burst's).
     */
    update: (d: DestinationInput, ms: number, user: string | null) =>
      db.transaction(() => {
        queue.all()
        return update.run(params(d, ms, user)).changes
      })(),
    /** Deletes a destination and cancels its pending deliveries (their attempts stay). Answers how many were cancelled. */
    remove(id: string, ms: number): number {
      if (remove.run(id).changes === 0) return -1
      return cancelPending.run(ms, id).changes
    },
    /** Pending deliveries, those of the events stored and not queued yet included (up to 10,000 of these read). */
    counts(id: string, now: number): DeliveryCounts {
      const d = byId.get(id)
      let waiting = 0
      if (d?.enabled && d.feed_events) waiting = queue.unqueuedFor(d)
      return { pending: pendingCount.get(id)!.n + waiting, failedLast24h: failedSince.get(id, now - 24 * 3600_000)!.n }
    },
  }
}
