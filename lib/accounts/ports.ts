// The storage accounts need; db/users.ts implements it on SQLite.
import type { AccountRow, NewUser, UserChanges, UserRow } from '../../db/users.js'

export interface AccountStore {
  /** Every account as `view` maps it, written as JSON: kept until an account changes (every console page reads them). */
  allJson(view: (u: AccountRow) => unknown): Promise<string>
  accountJson(id: number, view: (u: AccountRow) => unknown): Promise<string | undefined>
  counts(): Promise<{ total: number; active: number }>
  byId(id: number): Promise<UserRow | undefined>
  /** By user name, case-insensitively. */
  byName(name: string): Promise<UserRow | undefined>
  activeAdministrators(): Promise<number>
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
