// The agent gateway's check-ins on the agent row: the state each one sets (a group's in one
// statement per set of changed columns), check-in times, and the errors agents report.
import type { Statement } from 'better-sqlite3'
import type { DB } from './index.js'
import type { CheckInTimeWrites } from './answer-cache.js'
import type { AgentRow, AgentState, StateWrite } from '../lib/gateway/ports.js'

/** The agent columns a check-in sets (AgentState's), bar its time and digest, which every one sets. */
const STATE_COLUMNS: [Exclude<keyof AgentState, 'lastUpdatedMs' | 'stateDigest'>, string][] = [
  ['hostIdentifier', 'host_identifier'],
  ['localIpAddress', 'local_ip_address'],
  ['osVersion', 'os_version'],
  ['manufacturer', 'manufacturer'],
  ['pcModel', 'pc_model'],
  ['nicsJson', 'nics_json'],
  ['nicsText', 'nics_text'],
  ['ipAddresses', 'ip_addresses'],
  ['operationalStatus', 'operational_status'],
  ['isSystemLocked', 'is_system_locked'],
  ['serviceVersion', 'service_version'],
  ['kbDriverVersion', 'kb_driver_version'],
  ['licenseStatus', 'license_status'],
  ['licenseAccountId', 'license_account_id'],
  ['modelTooltip', 'model_tooltip'],
  ['runningMode', 'running_mode'],
  ['switchIp', 'switch_ip'],
  ['switchName', 'switch_name'],
  ['portId', 'port_id'],
  ['portName', 'port_name'],
  ['ethernetsCount', 'ethernets_count'],
  ['hashtags', 'hashtags'],
  ['loggedOnUsers', 'logged_on_users'],
  ['checkInSeconds', 'check_in_interval_s'],
]

/** Check-ins' states per UPDATE statement (3 parameters and one per changed column each). */
const STATES_PER_UPDATE = 64

/** `nextRev`: the agents' revision counter, one new rev per statement's rows (gateway.ts). */
export function checkInStore(db: DB, checkInTimes: CheckInTimeWrites, nextRev: Statement<[], number>) {
  const agent = db.prepare<[number], AgentRow>('SELECT * FROM agents WHERE id = ?')
  const heartbeat = db.prepare<[number, number]>('UPDATE agents SET last_updated_ms = max(coalesce(last_updated_ms, 0), ?) WHERE id = ?')
  // A group's check-ins in one statement per set of changed columns (most groups: one). A
  // column left out of the SET keeps its indexes untouched (the agent row carries about twenty);
  // one new rev for the rows (migration 032), as the per-row trigger would give each.
  const agentsById = db.prepare<[string], AgentRow>('SELECT * FROM agents WHERE id IN (SELECT value FROM json_each(?))')
  // Bound VALUES (id, time, digest, then the changed columns), STATES_PER_UPDATE agents a
  // statement, OR FAIL, and no SQL function (the later time by CASE, not max()): a statement
  // of several rows on a table with triggers that calls a function makes SQLite keep a
  // statement journal of every page it rewrites (db/events.ts); an error undoes the caller's
  // transaction instead.
  const statesOf = new Map<string, Statement<unknown[]>>()
  const statesStatement = (columns: string[], rows: number) => {
    const key = `${rows}:${columns.join(',')}`
    let st = statesOf.get(key)
    if (st === undefined) {
      const row = `(${Array(3 + columns.length)
        .fill('?')
        .join(', ')})`
      st = db.prepare<unknown[]>(
        `UPDATE OR FAIL agents SET ${columns.map((c, i) => `${c} = x.column${i + 4}, `).join('')}
           last_updated_ms = CASE WHEN coalesce(last_updated_ms, 0) >= x.column2 THEN coalesce(last_updated_ms, 0) ELSE x.column2 END,
           state_digest = x.column3, rev = ?
         FROM (VALUES ${Array(rows).fill(row).join(', ')}) AS x
         WHERE agents.id = x.column1`,
      )
      // One statement per set of columns and number of rows: few sets in practice, but bounded.
      if (statesOf.size >= 256) statesOf.clear()
      statesOf.set(key, st)
    }
    return st
  }
  const insertError = db.prepare<[number, number, string | null, string]>('INSERT INTO agent_errors (agent_id, time_ms, code, message) VALUES (?, ?, ?, ?)')

  /** Writes each check-in's state: the columns that changed, its time and digest, a new rev. */
  function updateStates(writes: StateWrite[]): void {
    const bySet = new Map<string, { columns: string[]; rows: unknown[][] }>()
    for (const { id, before, state } of writes) {
      const row = before as unknown as Record<string, unknown>
      const columns: string[] = []
      const values: unknown[] = [id, state.lastUpdatedMs, state.stateDigest]
      for (const [key, column] of STATE_COLUMNS) {
        if (row[column] !== state[key]) {
          columns.push(column)
          values.push(state[key])
        }
      }
      if (before.connection_status !== 'Connected') {
        columns.push('connection_status')
        values.push('Connected')
      }
      const key = columns.join(',')
      const set = bySet.get(key) ?? { columns, rows: [] }
      set.rows.push(values)
      bySet.set(key, set)
    }
    for (const { columns, rows } of bySet.values()) {
      const rev = nextRev.get()!
      for (let at = 0; at < rows.length; at += STATES_PER_UPDATE) {
        const run = rows.slice(at, at + STATES_PER_UPDATE)
        statesStatement(columns, run.length).run(rev, ...run.flat())
      }
    }
  }

  // Their statements are OR FAIL (an error keeps what the statement wrote before it): outside
  // the caller's transaction each call is one of its own, so that a failed one leaves nothing.
  const updateStatesAlone = db.transaction(updateStates)

  return {
    agent: (id: number) => agent.get(id),
    /** Each check-in's state on its agent (one each), one statement per set of changed columns. */
    updateStates: (writes: StateWrite[]) => (db.inTransaction ? updateStates(writes) : updateStatesAlone(writes)),
    /** These agents' rows (every column), in no order. */
    agents: (ids: number[]) => agentsById.all(JSON.stringify(ids)),
    /** Check-in times noted in memory, written in one go. */
    heartbeats(times: Iterable<[number, number]>) {
      for (const [id, ms] of times) checkInTimes.rows += heartbeat.run(ms, id).changes
    },
    addErrors(agentId: number, errors: { time: number; code: string | null; message: string }[]): void {
      for (const e of errors) insertError.run(agentId, e.time, e.code, e.message)
    },
  }
}
