// What the agentless service is made of: its storage, the unit of work, the audit trail,
// the credential vault and the settings.
import type { AuditTrail, Log, UnitOfWork } from '../platform/ports.js'
import type { Vault } from '../vault.js'
import type { AgentlessEvents, AgentlessStore, AssetFeed, PollingDefaults } from './ports.js'
import type { AgentlessSettings } from './settings.js'

export interface AgentlessDeps {
  store: AgentlessStore
  events: AgentlessEvents
  assets: AssetFeed
  uow: UnitOfWork
  audit: AuditTrail
  log: Log
  /** Seals connection credentials for storage and opens them for their poller. */
  vault: Pick<Vault, 'seal' | 'open'>
  settings: AgentlessSettings
}

export const defaultsOf = (settings: AgentlessSettings): PollingDefaults => ({
  intervalSeconds: settings.defaultIntervalSeconds,
  timeoutSeconds: settings.defaultTimeoutSeconds,
})
