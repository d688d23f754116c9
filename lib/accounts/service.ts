import crypto from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { AccountRow, UserChanges, UserRow } from '../db/users.js'
import { problem, invalidField } from './errors.js'
import { dummyHash, hashPassword, passwordProblem, verifyPassword } from './passwords.js'
import { audit } from './audit.js'
import type { components } from '../generated/openapi.js'
import { iso } from './time.js'
import { bearerToken } from './auth.js'
import { limitKey } from './rate-limit.js'

type AccountView = components['schemas']['AccountViewResource']
type ItemResult = components['schemas']['ItemResult']
const ADMINISTRATOR = 30

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

const userAsset = (u: Pick<UserRow, 'id' | 'user_name'>) => ({ key: String(u.id), name: u.user_name, type: 'User', subType: 'None', detail: 'Account' })

function checkPassword(password: string, userName: string, field: string) {
  const reason = passwordProblem(password, userName)
  if (reason) throw invalidField('body', field, reason)
}

/** First start: an `admin` account with PRIME_ADMIN_PASSWORD, or a random password logged once. */
export async function bootstrapAdmin(app: FastifyInstance) {
  const { users } = app.repos
  // Made now, so that the first login with an unknown name does not take a second scrypt run.
  await dummyHash()
  if (users.counts().total > 0) return
  let password = app.config.adminPassword
  if (password) {
    const reason = passwordProblem(password, 'admin')
    if (reason) throw new Error(`PRIME_ADMIN_PASSWORD ${reason}`)
  } else {
    password = crypto.randomBytes(15).toString('base64url')
  }
  const now = Date.now()
  const hash = await hashPassword(password)
  app.db.transaction(() => {
    if (users.counts().total > 0) return
    const id = users.insert({ user_name: 'admin', email: 'admin@prime.local', first_name: null, last_name: null, phone: null, image: null, profile: ADMINISTRATOR, password_hash: hash, is_active: 1 }, now)
    app.repos.audit.insert({
      createdMs: now, severity: 5, category: 'Users', user: null, sourceIp: null, operationId: null, outcome: 'Succeeded',
      description: 'Created the first Administrator account "admin" at first start',
      details: JSON.stringify({ userName: 'admin', userProfile: ADMINISTRATOR, passwordFrom: app.config.adminPassword ? 'PRIME_ADMIN_PASSWORD' : 'generated' }),
      asset: userAsset({ id, user_name: 'admin' }),
    })
  })()
  if (!app.config.adminPassword) {
    // Printed once, on the one start that creates the account; it is not kept anywhere.
    app.log.warn(`Created account "admin" with the generated password: ${password}  (change it with admin/updateuserdetails)`)
  } else {
    app.log.info('Created account "admin" with PRIME_ADMIN_PASSWORD')
  }
}

export async function login(req: FastifyRequest, userName: string, password: string) {
  const { users } = req.server.repos
  const { config, db } = req.server
  // Failures count per user name and source address: failures from elsewhere cannot lock
  // a user out. A name without an account goes exactly the same way (counted, locked, its
  // password checked against a stand-in hash), so that neither the answers nor the time
  // they take tell which names exist.
  const source = limitKey(req.ip)
  // The attempt counts as a failure before the password is checked, so that parallel
  // guesses cannot outrun the lock; a success takes it back.
  const attempt = db.transaction(() => {
    const user = users.byName(userName)
    const now = Date.now()
    const lockedUntil = users.loginLockedUntil(userName, source, now)
    if (lockedUntil !== undefined) return { user, lockedSeconds: Math.ceil((lockedUntil - now) / 1000) }
    users.recordFailedLogin(userName, source, config.lockoutThreshold, config.lockoutMs, now)
    return { user }
  })()
  const checked = attempt.user
  if (attempt.lockedSeconds !== undefined) {
    audit(req, {
      description: `Login refused for ${checked ? `"${checked.user_name}"` : 'an unknown user name'}: locked after too many failed logins from this address`,
      user: checked?.user_name ?? null,
      outcome: 'Failed',
      details: { userName, reason: 'locked' },
      asset: checked ? userAsset(checked) : undefined,
    })
    throw problem('account-locked', `Too many failed logins with this user name from this address; try again in ${attempt.lockedSeconds} seconds.`, { headers: { 'retry-after': String(attempt.lockedSeconds) } })
  }
  const ok = await verifyPassword(password, checked?.password_hash ?? (await dummyHash()))
  const outcome = db.transaction(() => {
    const now = Date.now()
    // The account may have changed while the password was being checked.
    const user = checked ? users.byId(checked.id) : undefined
    const reason = !user ? (checked ? 'account deleted' : 'unknown user') : !ok ? 'wrong password' : user.password_hash !== checked!.password_hash ? 'password changed meanwhile' : !user.is_active ? 'disabled' : null
    if (reason) {
      audit(req, {
        description: `Login failed for ${user ? `"${user.user_name}"` : 'an unknown user name'}`,
        user: user?.user_name ?? null,
        outcome: 'Failed',
        details: { userName, reason },
        asset: user ? userAsset(user) : undefined,
      })
      return { failed: true as const }
    }
    users.clearFailedLogins(userName, source)
    users.recordLogin(user!.id, now)
    audit(req, { description: `Login of "${user!.user_name}"`, user: user!.user_name, details: { userName: user!.user_name }, asset: userAsset(user!) })
    return { failed: false as const, session: req.server.tokens.startSession(user!.id, now), user: accountView({ ...user!, last_login_ms: now }) }
  })()
  // Thrown after the commit, so that the failure's audit record is kept.
  if (outcome.failed) throw problem('invalid-credentials', 'The user name or password is incorrect.')
  return { ...outcome.session, user: outcome.user }
}

export async function createAccount(req: FastifyRequest, body: AccountView & { userName: string; email: string; userProfile: number; password: string }) {
  checkPassword(body.password, body.userName, 'password')
  const hash = await hashPassword(body.password)
  const { users } = req.server.repos
  return req.server.db.transaction(() => {
    if (users.byName(body.userName)) throw problem('conflict', `A user named "${body.userName}" already exists.`)
    const id = users.insert(
      {
        user_name: body.userName, email: body.email, first_name: body.firstName ?? null, last_name: body.lastName ?? null,
        phone: body.phone ?? null, image: body.image ?? null, profile: body.userProfile, password_hash: hash, is_active: body.isActive === false ? 0 : 1,
      },
      Date.now(),
    )
    const row = users.byId(id)!
    const view = accountView(row)
    audit(req, { description: `Created account "${row.user_name}" with profile ${row.profile}`, details: { ...view, image: view.image ? '(image)' : null }, asset: userAsset(row) })
    return view
  })()
}

type ContactFields = { email?: string; firstName?: string | null; lastName?: string | null; phone?: string | null; image?: string | null }

/** The contact fields sent, as column changes (null clears one). */
function contactChanges(body: ContactFields): UserChanges {
  const changes: UserChanges = {}
  if (body.email !== undefined) changes.email = body.email
  if (body.firstName !== undefined) changes.first_name = body.firstName
  if (body.lastName !== undefined) changes.last_name = body.lastName
  if (body.phone !== undefined) changes.phone = body.phone
  if (body.image !== undefined) changes.image = body.image
  return changes
}

/** The last active Administrator may not be demoted, disabled or deleted. */
function wouldLoseLastAdmin(req: FastifyRequest, target: UserRow, next: { profile: number; active: boolean }) {
  const losesAdmin = target.profile === ADMINISTRATOR && target.is_active === 1 && (next.profile !== ADMINISTRATOR || !next.active)
  return losesAdmin && req.server.repos.users.activeAdministrators() <= 1
}

export async function updateAccount(req: FastifyRequest, body: AccountView) {
  const { users } = req.server.repos
  const target = body.id !== undefined ? users.byId(body.id) : body.userName !== undefined ? users.byName(body.userName) : undefined
  if (body.id === undefined && body.userName === undefined) throw invalidField('body', 'id', 'or userName is required to name the account')
  if (!target) throw problem('not-found', `No account ${body.id !== undefined ? `with id ${body.id}` : `named "${body.userName}"`}.`)
  const newName = body.userName ?? target.user_name
  if (body.password !== undefined && body.password !== null) checkPassword(body.password, newName, 'password')
  const hash = body.password ? await hashPassword(body.password) : undefined
  return req.server.db.transaction(() => {
    const current = users.byId(target.id)
    if (!current) throw problem('not-found', `No account with id ${target.id}.`)
    const changes = contactChanges(body)
    if (body.userName !== undefined && body.userName !== current.user_name) {
      const other = users.byName(body.userName)
      if (other && other.id !== current.id) throw problem('conflict', `A user named "${body.userName}" already exists.`)
      changes.user_name = body.userName
    }
    if (body.userProfile !== undefined) changes.profile = body.userProfile
    if (body.isActive !== undefined) changes.is_active = body.isActive ? 1 : 0
    if (hash) changes.password_hash = hash
    const next = { profile: changes.profile ?? current.profile, active: (changes.is_active ?? current.is_active) === 1 }
    if (wouldLoseLastAdmin(req, current, next)) throw problem('conflict', 'The last active Administrator cannot be demoted or disabled.')
    const now = Date.now()
    users.update(current.id, changes, now)
    const revoke = hash !== undefined || (changes.profile !== undefined && changes.profile !== current.profile) || (changes.is_active === 0 && current.is_active === 1)
    if (revoke) users.revokeTokens(current.id, now)
    const before = accountView(current)
    const after = accountView(users.byId(current.id)!)
    const changed = Object.fromEntries(
      Object.keys(after)
        .filter((k) => !['updatedTime'].includes(k) && JSON.stringify((before as any)[k]) !== JSON.stringify((after as any)[k]))
        .map((k) => [k, { from: k === 'image' ? '(image)' : (before as any)[k], to: k === 'image' ? '(image)' : (after as any)[k] }]),
    )
    if (hash) changed.password = { from: '***', to: '***' }
    audit(req, { description: `Changed account "${after.userName}"${revoke ? ' and revoked its tokens' : ''}`, details: changed, asset: userAsset(current) })
    return after
  })()
}

export async function updateOwnAccount(req: FastifyRequest, body: ContactFields & { currentPassword?: string; newPassword?: string }) {
  const principal = req.principal!
  if (principal.kind !== 'session') throw problem('validation', 'An integration token has no account of its own to change.')
  const { users } = req.server.repos
  const me = users.byId(principal.id as number)
  if (!me) throw problem('not-found', 'Your account no longer exists.')
  let hash: string | undefined
  if (body.newPassword !== undefined) {
    if (body.currentPassword === undefined) throw invalidField('body', 'currentPassword', 'is required to set a new password')
    if (!(await verifyPassword(body.currentPassword, me.password_hash))) throw invalidField('body', 'currentPassword', 'is incorrect')
    checkPassword(body.newPassword, me.user_name, 'newPassword')
    hash = await hashPassword(body.newPassword)
  } else if (body.currentPassword !== undefined) {
    throw invalidField('body', 'newPassword', 'is required with currentPassword')
  }
  return req.server.db.transaction(() => {
    const now = Date.now()
    // While the password was hashed the session may have been revoked, the account
    // deleted or its password reset by an Administrator: none of that may be undone here.
    req.server.tokens.authenticate(bearerToken(req), now)
    const current = users.byId(me.id)
    if (!current) throw problem('not-found', 'Your account no longer exists.')
    if (hash && current.password_hash !== me.password_hash) throw problem('conflict', 'The password was changed meanwhile; log in again.')
    const changes = contactChanges(body)
    if (hash) changes.password_hash = hash
    users.update(me.id, changes, now)
    if (hash) users.revokeTokens(me.id, now)
    const after = accountView(users.byId(me.id)!)
    const fields = Object.keys(body).filter((k) => k !== 'currentPassword' && k !== 'newPassword')
    audit(req, {
      description: `Changed own account "${me.user_name}"${hash ? ' including the password (tokens revoked)' : ''}`,
      details: { changed: fields, passwordChanged: Boolean(hash) },
      asset: userAsset(me),
    })
    return after
  })()
}

export function deleteAccounts(req: FastifyRequest, ids: string[]) {
  const { users } = req.server.repos
  const principal = req.principal!
  return req.server.db.transaction(() => {
    const results: ItemResult[] = []
    const deleted: string[] = []
    for (const id of ids) {
      // A user name first (names may be all digits), then a numeric id.
      const target = users.byName(id) ?? (/^\d{1,15}$/.test(id) ? users.byId(Number(id)) : undefined)
      if (!target) {
        results.push({ id, status: 'failed', reason: `No account "${id}".`, code: 'not-found' })
      } else if (principal.kind === 'session' && target.id === principal.id) {
        results.push({ id, status: 'failed', reason: 'You cannot delete your own account.', code: 'not-allowed' })
      } else if (wouldLoseLastAdmin(req, target, { profile: 0, active: false })) {
        results.push({ id, status: 'failed', reason: 'The last active Administrator cannot be deleted.', code: 'not-allowed' })
      } else {
        users.remove(target.id)
        deleted.push(target.user_name)
        results.push({ id, status: 'done', reason: null, code: null })
      }
    }
    const failed = results.filter((r) => r.status === 'failed')
    audit(req, {
      description: deleted.length ? `Deleted accounts: ${deleted.join(', ')}` : 'Deleted no account',
      details: { deleted, failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
      outcome: deleted.length ? 'Succeeded' : 'Failed',
      asset: deleted.length === 1 ? { name: deleted[0], type: 'User', detail: 'Account' } : { type: 'User', detail: 'Account' },
    })
    return { succeeded: results.length - failed.length, failed: failed.length, results }
  })()
}
