// The storage integration tokens need; db/integration-tokens.ts implements it on SQLite.
import type { IntegrationTokenRow } from '../../db/integration-tokens.js'

export interface IntegrationTokenStore {
  all(): Promise<IntegrationTokenRow[]>
  byId(id: string): Promise<IntegrationTokenRow | undefined>
  byName(name: string): Promise<IntegrationTokenRow | undefined>
  insert(row: Omit<IntegrationTokenRow, 'last_used_ms' | 'revoked_ms'>): Promise<unknown>
  /** Answers whether an active token was revoked; open notification streams of it end when the revocation commits. */
  revoke(id: string, now: number): Promise<boolean>
}
