// The storage accounts need; db/users.ts implements it on SQLite.

export interface UserRow {
  id: number
  user_name: string
  email: string
  first_name: string | null
  last_name: string | null
  phone: string | null
  image: string | null
  profile: number
  password_hash: string
  is_active: number
  created_ms: number
  updated_ms: number
  last_login_ms: number | null
  tokens_valid_after_ms: number
}

/** An account as shown: every column but the password hash and the token cut-off. */
export type AccountRow = Pick<UserRow, 'id' | 'user_name' | 'email' | 'first_name' | 'last_name' | 'phone' | 'image' | 'profile' | 'is_active' | 'created_ms' | 'updated_ms' | 'last_login_ms'>

export type NewUser = Pick<UserRow, 'user_name' | 'email' | 'first_name' | 'last_name' | 'phone' | 'image' | 'profile' | 'password_hash'> & { is_active: number }

/** Columns an account update may change. */
export type UserChanges = Partial<Pick<UserRow, 'user_name' | 'email' | 'first_name' | 'last_name' | 'phone' | 'image' | 'profile' | 'password_hash' | 'is_active'>>

export interface AccountStore {
  /** Every account as `view` maps it, written as JSON: kept until an account changes (every console page reads them). */
  allJson(view: (u: AccountRow) => unknown): Promise<string>
  accountJson(id: number, view: (u: AccountRow) => unknown): Promise<string | undefined>
  counts(): Promise<{ total: number; active: number }>
  byId(id: number): Promise<UserRow | undefined>
  /**
   * The account, held against changes to the end of the unit of work: a login reads it so,
   * so that a password reset or a disabling committing meanwhile either comes first (and is
   * seen) or waits (and then ends the session the login made).
   */
  byIdForChange(id: number): Promise<UserRow | undefined>
  /** By user name, case-insensitively. */
  byName(name: string): Promise<UserRow | undefined>
  /**
   * How many active Administrators there are; with `hold`, their accounts are held against
   * changes to the end of the unit of work (a change that could remove the last one counts so).
   */
  activeAdministrators(hold?: boolean): Promise<number>
  insert(user: NewUser, now: number): Promise<number>
  update(id: number, changes: UserChanges, now: number): Promise<void>
  remove(id: number): Promise<boolean>
  /** Voids the account's access tokens and ends its sessions (told to open streams at the commit). */
  revokeTokens(id: number, now: number): Promise<unknown>
  /** When the lock on logins with this name from this source ends, if one is in force. */
  loginLockedUntil(name: string, source: string, now: number): Promise<number | undefined>
  recordFailedLogin(name: string, source: string, threshold: number, lockMs: number, now: number): Promise<void>
  clearFailedLogins(name: string, source: string): Promise<void>
  recordLogin(id: number, now: number): Promise<void>
}
