// The agent gateway's sweeper: quiet agents disconnected (one by one, or a mass disconnect's
// passes over id ranges), delivered commands timed out, and license seats given and expired.
import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'
import type { OverdueCommand, SweptAgent } from '../lib/gateway/ports.js'

/** `nextRev`: the agents' revision counter, one new rev per statement's rows (gateway.ts). */
export function sweeperStore(db: DB, nextRev: Statement<[], number>) {
  const stale = db.prepare<[number, number], SweptAgent>(
    `SELECT id, uuid, host_identifier, local_ip_address, last_updated_ms FROM agents
     WHERE connection_status = 'Connected' AND last_updated_ms < ? ORDER BY last_updated_ms LIMIT ?`,
  )
  const disconnect = db.prepare<[number, number]>(`UPDATE agents SET connection_status = 'Disconnected' WHERE id = ? AND connection_status = 'Connected' AND last_updated_ms < ?`)
  // After an outage, most agents in a range of ids are quiet: taken in id order, the rows a
  // batch rewrites share their pages (and their entries in the agents' indexes, which end
  // with the id), and its commit writes about half the pages it did in check-in order.
  // By the rowid, not by agents_connection: that index would hand every quiet agent to a sort.
  // plan: query-plans "prepared at start"
  const staleAfter = db.prepare<[number, number, number, number], SweptAgent>(
    `SELECT id, uuid, host_identifier, local_ip_address, last_updated_ms FROM agents NOT INDEXED
     WHERE id > ? AND id <= ? AND connection_status = 'Connected' AND last_updated_ms < ? ORDER BY id LIMIT ?`,
  )
  const lastAgentId = db.prepare<[], number>('SELECT coalesce(max(id), 0) FROM agents').pluck()
  // The ids first (CROSS JOIN keeps that order): left to itself, the planner walks the
  // agents_connection index over every quiet agent, which after an outage is all of them.
  const quietOf = db.prepare<[string, number], SweptAgent>(
    `SELECT a.id, a.uuid, a.host_identifier, a.local_ip_address, a.last_updated_ms FROM json_each(?) j CROSS JOIN agents a ON a.id = j.value
     WHERE a.connection_status = 'Connected' AND a.last_updated_ms < ?`,
  )
  // One statement does what a disconnect changes in the row: the connection, the display
  // status it decides alone (agent-state.ts: Disconnected before anything else), and the
  // latest event texts moving down one place for the disconnect event. Nothing else a
  // status refresh computes depends on the connection, and each extra update of a row
  // rewrites it, its revision and its index entries again.
  // One new rev for all the rows (migration 032): the per-row trigger would rewrite each row
  // a second time and bump the counter once per agent.
  // The rows quietOf just read, in the same transaction: no RETURNING and OR FAIL, as the
  // latest texts' update in db/events.ts, so that SQLite keeps no statement journal of the
  // pages it rewrites (an error undoes the caller's whole transaction instead).
  const disconnectMany = db.prepare<[string, number, string]>(
    `UPDATE OR FAIL agents SET connection_status = 'Disconnected', display_status = 'Disconnected',
       latest_minus2_event_text = latest_minus1_event_text, latest_minus1_event_text = latest_event_text, latest_event_text = ?, rev = ?
     WHERE id IN (SELECT value FROM json_each(?))`,
  )
  const overdue = db.prepare<[number, number], OverdueCommand>(
    `SELECT c.id, c.type, c.agent_id, a.uuid, a.host_identifier, a.local_ip_address
     FROM agent_commands c JOIN agents a ON a.id = c.agent_id
     WHERE c.status = 'Delivered' AND c.delivered_ms < ? ORDER BY c.delivered_ms LIMIT ?`,
  )
  const timeOut = db.prepare<[number, string, number]>(`UPDATE agent_commands SET status = 'Failed', completed_ms = ?, result_message = ? WHERE id = ? AND status = 'Delivered'`)
  const waitingForSeat = db.prepare<[number], { id: number }>(`SELECT id FROM agents WHERE license_status = 'Pending' ORDER BY enrolled_ms, id LIMIT ?`)
  const activate = db.prepare<[number]>(`UPDATE agents SET license_status = 'Activated' WHERE id = ? AND license_status = 'Pending'`)
  // An expired license frees no seat: the agents keep counting until they are deleted.
  const expire = db.prepare<[number]>(`UPDATE agents SET license_status = 'Expired'
    WHERE license_status IN ('Activated', 'Pending') AND expiration_ms IS NOT NULL AND expiration_ms <= ?`)

  function disconnectQuiet(ids: number[], before: number, latestText: string): SweptAgent[] {
    const quiet = quietOf.all(JSON.stringify(ids), before)
    if (quiet.length) disconnectMany.run(latestText, nextRev.get()!, JSON.stringify(quiet.map((a) => a.id)))
    return quiet
  }
  const disconnectQuietAlone = db.transaction(disconnectQuiet)
  // A pass's batch: the quiet agents of an id range read in the transaction that disconnects
  // them, so that no second read of their rows checks them again.
  function disconnectRange(after: number, upTo: number, before: number, limit: number, latestText: string): SweptAgent[] {
    const quiet = staleAfter.all(after, upTo, before, limit)
    if (quiet.length) disconnectMany.run(latestText, nextRev.get()!, JSON.stringify(quiet.map((a) => a.id)))
    return quiet
  }
  const disconnectRangeAlone = db.transaction(disconnectRange)

  return {
    staleAgents: (before: number, limit: number) => stale.all(before, limit),
    /** Connected agents quiet since before `before` with ids in (after, upTo], in id order. */
    /**
     * disconnectMany for the first `limit` agents quiet since `before` with ids in (after, upTo],
     * in id order (a mass disconnect's pass): answers them.
     */
    disconnectRange: (after: number, upTo: number, before: number, limit: number, latestText: string): SweptAgent[] =>
      db.inTransaction ? disconnectRange(after, upTo, before, limit, latestText) : disconnectRangeAlone(after, upTo, before, limit, latestText),
    /** The highest agent id (0 without agents). */
    lastAgentId: () => lastAgentId.get() ?? 0,
    disconnect: (id: number, before: number) => disconnect.run(id, before).changes === 1,
    /**
     * Disconnects those of these agents still connected and quiet since before `before`;
     * answers them, in the order given. Their display status becomes Disconnected, and
     * `latestText` (the text of the disconnect event the caller records for each, without
     * an agent for its texts) becomes their latest event text, the others moving down.
     */
    disconnectMany(ids: number[], before: number, latestText: string): SweptAgent[] {
      if (ids.length === 0) return []
      // The read and the write in one transaction (no savepoint inside the caller's).
      const quiet = db.inTransaction ? disconnectQuiet(ids, before, latestText) : disconnectQuietAlone(ids, before, latestText)
      const gone = new Map(quiet.map((a) => [a.id, a]))
      return ids.flatMap((id) => gone.get(id) ?? [])
    },
    overdueCommands: (before: number, limit: number) => overdue.all(before, limit),
    timeOutCommand: (id: number, now: number, message: string) => timeOut.run(now, message, id).changes === 1,
    waitingForSeat: (limit: number) => waitingForSeat.all(limit).map((r) => r.id),
    activate: (id: number) => activate.run(id),
    /** Licenses whose expiration date has passed become Expired; answers how many. */
    expireLicenses: (now: number) => expire.run(now).changes,
  }
}
