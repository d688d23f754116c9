// The answer shapes of agentless connections and worker pollers, made in one place from the
// rows: the connection as users see it, its status, the import format's row, and what a
// poller fetches with its credentials.
import type { components } from '../../generated/openapi.js'
import { iso } from '../time.js'
import type { Credentials } from '../vault.js'
import type { ConnectionRow, PollerWithCounts, PollingDefaults, PreviousError } from './ports.js'

type Schemas = components['schemas']

export function connectionView(r: ConnectionRow, d: PollingDefaults): Schemas['AgentlessConnection'] {
  return {
    id: r.id,
    name: r.name,
    address: r.address,
    protocol: r.protocol,
    port: r.port,
    useTls: r.use_tls === 1,
    userName: r.user_name,
    credentialType: r.credential_type,
    credentialsUpdatedTime: iso(r.credentials_updated_ms),
    isOverrideDefaults: r.is_override_defaults === 1,
    pollingIntervalSeconds: r.polling_interval_s ?? d.intervalSeconds,
    timeoutSeconds: r.timeout_s ?? d.timeoutSeconds,
    pollerId: r.poller_id,
    pollerName: r.poller_name,
    statusString: r.status,
    createdTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    updatedTime: iso(r.updated_ms),
  }
}

function previousErrors(json: string): PreviousError[] {
  try {
    const v = JSON.parse(json)
    return Array.isArray(v) ? v.slice(0, 10) : []
  } catch {
    return []
  }
}

export function statusView(r: ConnectionRow, d: PollingDefaults): Schemas['AgentlessConnectionStatus'] {
  return {
    id: r.id,
    computerName: r.name,
    address: r.address,
    protocol: r.protocol,
    port: r.port,
    userName: r.user_name,
    isOverrideDefaults: r.is_override_defaults === 1,
    pollingIntervalSeconds: r.polling_interval_s ?? d.intervalSeconds,
    timeoutSeconds: r.timeout_s ?? d.timeoutSeconds,
    pollerId: r.poller_id,
    pollerName: r.poller_name,
    statusString: r.status,
    statusDescription: r.status_description,
    statusErrorDescription: r.status_error,
    startTime: r.start_ms === null ? null : iso(r.start_ms),
    endTime: r.end_ms === null ? null : iso(r.end_ms),
    durationMs: r.start_ms === null || r.end_ms === null ? null : Math.max(0, r.end_ms - r.start_ms),
    lastReachableTime: r.last_reachable_ms === null ? null : iso(r.last_reachable_ms),
    prevRunningErrors: previousErrors(r.prev_errors),
    createdTime: iso(r.created_ms),
    creationTimeEpoch: r.created_ms,
    updatedTime: iso(r.updated_ms),
  }
}

/** A connection as a row of the import's CSV format: its own polling options only, credential cells empty. */
export function importRowView(r: ConnectionRow) {
  const own = r.is_override_defaults === 1
  return {
    name: r.name,
    address: r.address,
    protocol: r.protocol,
    port: r.port,
    useTls: r.use_tls === 1,
    userName: r.user_name,
    password: null,
    privateKey: null,
    privateKeyPassphrase: null,
    isOverrideDefaults: own,
    pollingIntervalSeconds: own ? r.polling_interval_s : null,
    timeoutSeconds: own ? r.timeout_s : null,
    pollerId: r.poller_id,
  }
}

/** A connection as its worker poller fetches it: with the credentials opened and the options in force. */
export function assignmentView(r: ConnectionRow, c: Credentials, d: PollingDefaults): Schemas['PollerAssignments']['connections'][number] {
  return {
    id: r.id,
    name: r.name,
    address: r.address,
    protocol: r.protocol,
    port: r.port,
    useTls: r.use_tls === 1,
    userName: r.user_name,
    credentialType: r.credential_type,
    password: c.password,
    privateKey: c.privateKey,
    privateKeyPassphrase: c.privateKeyPassphrase,
    pollingIntervalSeconds: r.polling_interval_s ?? d.intervalSeconds,
    timeoutSeconds: r.timeout_s ?? d.timeoutSeconds,
    lastStartTime: r.start_ms === null ? null : iso(r.start_ms),
  }
}

export function pollerView(p: PollerWithCounts, offlineAfterSeconds: number, now: number): Schemas['WorkerPoller'] {
  return {
    id: p.id,
    name: p.name,
    hostName: p.host_name,
    ipAddress: p.ip_address,
    version: p.version,
    isActivated: p.is_activated === 1,
    connectionStatus: p.last_heartbeat_ms !== null && now - p.last_heartbeat_ms <= offlineAfterSeconds * 1000 ? 'Online' : 'Offline',
    activationChangedTime: p.activation_changed_ms === null ? null : iso(p.activation_changed_ms),
    activationChangedBy: p.activation_changed_by,
    lastHeartbeatTime: p.last_heartbeat_ms === null ? null : iso(p.last_heartbeat_ms),
    createdTime: iso(p.created_ms),
    creationTimeEpoch: p.created_ms,
    connectionsAssigned: p.assigned,
    connectionsReachable: p.reachable,
    connectionsFailing: p.failing,
    connectionsPending: p.pending,
  }
}
