// The server's own status: uptime, agents and seats, accounts and the database's size.
import type { Config } from '../config.js'
import { iso } from '../time.js'
import type { SystemStore } from './ports.js'

export interface SystemDeps {
  system: SystemStore
  accounts: { counts(): Promise<{ total: number; active: number }> }
  license: Config['license']
  /** When this process started serving. */
  startedAt(): number
  /** The size of the write-ahead log file now (0: there is none). */
  walSizeBytes(): number
}

/** The license as the console shows it: Expired once its date has passed. */
export function licenseStatus(expiration: string | null, now = Date.now()): 'Activated' | 'Expired' {
  return expiration !== null && Date.parse(expiration) <= now ? 'Expired' : 'Activated'
}

export function systemService(deps: SystemDeps) {
  return {
    async status() {
      const agents = await deps.system.agentCounts()
      const { license } = deps
      const now = Date.now()
      const startedAt = deps.startedAt()
      return {
        serverTime: iso(now),
        startedTime: iso(startedAt),
        uptimeSeconds: Math.round((now - startedAt) / 1000),
        agents,
        license: {
          primeAccountName: license.accountName,
          licenseStatus: licenseStatus(license.expirationDate, now),
          seats: license.seats,
          used: agents.total,
          expirationDate: license.expirationDate,
        },
        accounts: await deps.accounts.counts(),
        database: { sizeBytes: await deps.system.sizeBytes(), walSizeBytes: deps.walSizeBytes(), schemaVersion: await deps.system.schemaVersion() },
      }
    },
  }
}
