// The storage integration tokens need; db/integration-tokens.ts implements it on SQLite.

export interface IntegrationTokenRow {
  id: string
  name: string
  token_hash: string
  profile: number
  created_by: string
  created_ms: number
  expires_ms: number | null
  last_used_ms: number | null
  revoked_ms: number | null
  created_by_user_id: number | null
}

/** A token with what its creator may do now: the token works with at most that. */
export interface IntegrationPrincipalRow extends IntegrationTokenRow {
  creator_profile: number | null
  creator_active: number | null
}

export interface IntegrationTokenStore {
  all(): Promise<IntegrationTokenRow[]>
  byId(id: string): Promise<IntegrationTokenRow | undefined>
  byName(name: string): Promise<IntegrationTokenRow | undefined>
  insert(row: Omit<IntegrationTokenRow, 'last_used_ms' | 'revoked_ms'>): Promise<unknown>
  /** Answers whether an active token was revoked; open notification streams of it end when the revocation commits. */
  revoke(id: string, now: number): Promise<boolean>
}
