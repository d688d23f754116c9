// The agent gateway's enrollment: what a credential resolves to, new agents, rotated
// credentials, re-enrollments held for an Administrator, and the seats taken.
import type { DB } from './index.js'
import type { AgentRow, GatewayAgent, NewAgent } from '../lib/gateway/ports.js'
import type { HeldReEnrollment } from '../lib/agents/ports.js'

export function enrolmentStore(db: DB) {
  const byCredential = db.prepare<[string], GatewayAgent>('SELECT id, uuid, host_identifier, local_ip_address, connection_status, state_digest FROM agents WHERE credential_hash = ?')
  const byMachineId = db.prepare<[string], { id: number; uuid: string; credential_hash: string | null }>('SELECT id, uuid, credential_hash FROM agents WHERE machine_id = ?')
  const byUuid = db.prepare<[string], AgentRow>('SELECT * FROM agents WHERE uuid = ?')
  const hold = db.prepare(
    `INSERT INTO agent_reenrollments (agent_id, id, credential_hash, host_identifier, source_ip, requested_ms)
     VALUES (@agentId, @id, @credentialHash, @hostIdentifier, @sourceIp, @requestedMs)
     ON CONFLICT (agent_id) DO UPDATE SET id = excluded.id, credential_hash = excluded.credential_hash, host_identifier = excluded.host_identifier,
       source_ip = excluded.source_ip, requested_ms = excluded.requested_ms`,
  )
  const held = db.prepare<[number], HeldReEnrollment>('SELECT * FROM agent_reenrollments WHERE agent_id = ?')
  const heldByCredential = db.prepare<[string], HeldReEnrollment>('SELECT * FROM agent_reenrollments WHERE credential_hash = ?')
  const dropHeld = db.prepare<[number]>('DELETE FROM agent_reenrollments WHERE agent_id = ?')
  // The agents less the others (migration 014: only they are indexed).
  // plan: query-plans "prepared at start" (tests/query-plans.test.ts)
  const activated = db.prepare<[], { n: number }>(
    `SELECT (SELECT n FROM row_counts WHERE name = 'agents')
       - (SELECT count(*) FROM agents INDEXED BY agents_license_unactivated WHERE license_status <> 'Activated') AS n`,
  )
  const insertAgent = db.prepare(
    `INSERT INTO agents (uuid, machine_id, credential_hash, enrolled_ms, host_identifier, license_status, expiration_ms,
       license_account_name, check_in_interval_s)
     VALUES (@uuid, @machineId, @credentialHash, @enrolledMs, @hostIdentifier, @licenseStatus, @expirationMs,
       @licenseAccountName, @checkInSeconds)`,
  )
  // A re-enrolled agent goes through the full comparison at its next check-in.
  const rotate = db.prepare<[string, string, number]>('UPDATE agents SET credential_hash = ?, host_identifier = ?, state_digest = NULL WHERE id = ?')

  return {
    byCredential: (hash: string) => byCredential.get(hash),
    byMachineId: (machineId: string) => byMachineId.get(machineId),
    agentByUuid: (uuid: string) => byUuid.get(uuid.toLowerCase()),
    /** Keeps a re-enrollment aside for an Administrator (the latest per agent). */
    holdReEnrollment: (h: { agentId: number; id: string; credentialHash: string; hostIdentifier: string; sourceIp: string | null; requestedMs: number }) => hold.run(h),
    heldReEnrollment: (agentId: number) => held.get(agentId),
    heldReEnrollmentByCredential: (hash: string) => heldByCredential.get(hash),
    dropReEnrollment: (agentId: number) => dropHeld.run(agentId),
    activatedCount: () => activated.get()!.n,
    insertAgent: (a: NewAgent) => Number(insertAgent.run(a).lastInsertRowid),
    rotateCredential: (id: number, hash: string, hostIdentifier: string) => rotate.run(hash, hostIdentifier, id),
  }
}
