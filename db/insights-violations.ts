// Risk insights on whitelist violations: by model, read in slices of the events through
// the event index, with other work let in between.
import { setImmediate as nextTurn } from 'node:timers/promises'
import type { DB } from './index.js'
import { MAX_MODELS } from './insights-models.js'
import type { HostRow, ViolationRows } from '../lib/insights/ports.js'

const VIOLATION_HOSTS = 20
/** Ids of events above the index's mark read at a time (a level 0 block of the index). */
const RANGE_SLICE = 4096

/** `whitelistViolationCodes`: checked by insightsRepo (insights.ts). */
export function violationStore(db: DB, whitelistViolationCodes: readonly string[]) {
  const WHITELIST_VIOLATIONS = whitelistViolationCodes.map((c) => `'${c}'`).join(', ')
  // ---- whitelist violations ----
  // One row per model and host, summed over slices of the events, with other requests
  // answered between slices (at 5 million events the window held 450,000 violations: one
  // statement over all of them held the server for 4.5 s). The indexed violations are found
  // through the event index (migration 012): the level 0 blocks (2^12 ids) whose cells of
  // the violation kinds meet the window, their events from event_kind_ids; the events above the
  // indexer's mark (all of them while it starts over) are read a range of ids at a time.
  type ViolationRow = { vid: string; pid: string; asset_key: string | null; asset_name: string | null; icon: number; n: number; first: number; last: number }
  const violationKinds = `SELECT id FROM event_kinds WHERE event_code IN (${WHITELIST_VIOLATIONS})`
  const violationGroups = (ids: string) =>
    `SELECT upper(peripheral_vid) AS vid, upper(peripheral_pid) AS pid, asset_key, max(asset_name) AS asset_name,
       max(peripheral_icon) AS icon, count(*) AS n, min(created_ms) AS first, max(created_ms) AS last
     FROM events ${ids}
       AND event_code IN (${WHITELIST_VIOLATIONS}) AND created_ms BETWEEN @from AND @to
       AND peripheral_vid IS NOT NULL AND peripheral_pid IS NOT NULL
     GROUP BY 1, 2, 3`
  const violationMark = db.prepare<[], number>("SELECT CASE WHEN stale THEN 0 ELSE indexed END FROM record_index_state WHERE name = 'events'").pluck()
  const eventsTop = db.prepare<[], number | null>('SELECT max(id) FROM events').pluck()
  const violationBlocks = db
    .prepare<{ from: number; to: number }, number>(
      `SELECT DISTINCT block FROM event_rollup
     WHERE level = 0 AND kind IN (${violationKinds}) AND max_ms >= @from AND min_ms <= @to ORDER BY block`,
    )
    .pluck()
  const violationsInBlock = db.prepare<{ from: number; to: number; block: number; mark: number }, ViolationRow>(
    violationGroups(`WHERE id IN (SELECT id FROM event_kind_ids WHERE blk = @block >> 4 AND kind IN (${violationKinds})
       AND id BETWEEN @block << 12 AND min(@mark, (@block << 12) + 4095))`),
  )
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const violationsInRange = db.prepare<{ from: number; to: number; lo: number; hi: number }, ViolationRow>(violationGroups('NOT INDEXED WHERE id > @lo AND id <= @hi'))
  const agentByUuid = db.prepare<[string], HostRow>('SELECT uuid, host_identifier, local_ip_address FROM agents WHERE uuid = ?')
  const modelLook = db.prepare<[string, string], { gui_vid: string | null; gui_pid: string | null; dev_icon: number }>(
    'SELECT gui_vid, gui_pid, dev_icon FROM peripherals WHERE vid = ? AND pid = ? LIMIT 1',
  )

  return {
    /**
     * The whitelist violations between two times, by model: their count, first and last
     * time, hosts (up to 20 listed, by asset key). Read a slice at a time, awaiting `pause`
     * once slices have run for `turnMs`; the records of the moment it starts (the index up
     * to its mark then, and the events above it up to the newest then).
     */
    async whitelistViolations(from: number, to: number, pause: () => Promise<unknown> = nextTurn, turnMs = 20): Promise<ViolationRows> {
      type Model = { vid: string; pid: string; icon: number; n: number; first: number; last: number; hosts: Map<string, string | null> }
      const models = new Map<string, Model>()
      const add = (rows: ViolationRow[]) => {
        for (const r of rows) {
          const key = `${r.vid}:${r.pid}`
          let m = models.get(key)
          if (!m) models.set(key, (m = { vid: r.vid, pid: r.pid, icon: r.icon, n: 0, first: r.first, last: r.last, hosts: new Map() }))
          m.n += r.n
          m.first = Math.min(m.first, r.first)
          m.last = Math.max(m.last, r.last)
          m.icon = Math.max(m.icon, r.icon)
          // A host is its asset key (events without one count as one host); its name is the greatest its events gave.
          const hostKey = r.asset_key ?? ''
          const name = m.hosts.get(hostKey)
          m.hosts.set(hostKey, name == null || (r.asset_name !== null && r.asset_name > name) ? r.asset_name : name)
        }
      }
      const { mark, top, blocks } = db.transaction(() => ({ mark: violationMark.get() ?? 0, top: eventsTop.get() ?? 0, blocks: violationBlocks.all({ from, to }) }))()
      // Slices for about 20 ms, then other work: a pause after each slice (a few ms) let
      // the other work of a busy server stretch the whole to minutes.
      let turn = performance.now()
      const next = async () => {
        if (performance.now() - turn < turnMs) return
        await pause()
        turn = performance.now()
      }
      for (const block of blocks) {
        add(violationsInBlock.all({ from, to, block, mark }))
        await next()
      }
      for (let lo = mark; lo < top; lo += RANGE_SLICE) {
        add(violationsInRange.all({ from, to, lo, hi: Math.min(top, lo + RANGE_SLICE) }))
        await next()
      }
      const sorted = [...models.values()].sort((a, b) => b.n - a.n || b.last - a.last || a.vid.localeCompare(b.vid) || a.pid.localeCompare(b.pid))
      return {
        total: sorted.length,
        models: sorted.slice(0, MAX_MODELS).map((m) => ({
          vid: m.vid,
          pid: m.pid,
          known: modelLook.get(m.vid, m.pid),
          icon: m.icon,
          n: m.n,
          first: m.first,
          last: m.last,
          hostsCount: m.hosts.size,
          // Events outlive deleted agents: such a host is named as the event named it.
          hosts: [...m.hosts.keys()]
            .filter((k) => k !== '')
            .sort()
            .slice(0, VIOLATION_HOSTS)
            .map((uuid) => agentByUuid.get(uuid) ?? { uuid, host_identifier: m.hosts.get(uuid) ?? uuid, local_ip_address: null }),
        })),
      }
    },
  }
}
