// Accounts as the contract shows them (never a password or its hash), and as audit records name them.
import type { AccountRow, UserRow } from './ports.js'
import type { components } from '../../generated/openapi.js'
import { iso } from '../time.js'

export type AccountView = components['schemas']['AccountViewResource']

export function accountView(u: AccountRow): AccountView {
  return {
    id: u.id,
    userName: u.user_name,
    email: u.email,
    firstName: u.first_name,
    lastName: u.last_name,
    phone: u.phone,
    image: u.image,
    userProfile: u.profile as AccountView['userProfile'],
    password: null,
    isActive: u.is_active === 1,
    createdTime: iso(u.created_ms),
    updatedTime: iso(u.updated_ms),
    lastLoginTime: u.last_login_ms === null ? null : iso(u.last_login_ms),
  }
}

export const userAsset = (u: Pick<UserRow, 'id' | 'user_name'>) => ({ key: String(u.id), name: u.user_name, type: 'User', subType: 'None', detail: 'Account' })
