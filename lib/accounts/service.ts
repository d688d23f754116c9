// Accounts: logging in, creating, changing and deleting them. Takes the request's context
// and the parsed body, so it runs without Fastify.
import type { AccountStore, UserChanges, UserRow } from './ports.js'
import type { components } from '../../generated/openapi.js'
import { invalidField, problem } from '../errors.js'
import { passwordProblem } from '../passwords.js'
import type { Context } from '../platform/context.js'
import type { AuditTrail, UnitOfWork } from '../platform/ports.js'
import { limitKey } from '../rate-limit.js'
import { accountView, userAsset, type AccountView } from './views.js'

type ItemResult = components['schemas']['ItemResult']
const ADMINISTRATOR = 30

export interface AccountDeps {
  accounts: AccountStore
  uow: UnitOfWork
  audit: AuditTrail
  passwords: {
    hash(password: string): Promise<string>
    verify(password: string, hash: string): Promise<boolean>
    /** A hash no password matches, checked for unknown names so that they take as long. */
    dummy(): Promise<string>
  }
  /** Failed logins in a row (per name and source) that lock, and for how long. */
  lockout: { threshold: number; ms: number }
  /** Starts a session for the account (inside the login's unit of work): its tokens. */
  startSession(userId: number, now: number): Promise<{ token: string; expiresAt: string; refreshToken: string; refreshTokenExpiresAt: string }>
}

/** Who calls: a user's session or an integration token. */
export interface Caller {
  kind: 'session' | 'integration'
  id: number | string
}

type NewAccount = AccountView & { userName: string; email: string; userProfile: number; password: string }
type ContactFields = { email?: string; firstName?: string | null; lastName?: string | null; phone?: string | null; image?: string | null }

function checkPassword(password: string, userName: string, field: string) {
  const reason = passwordProblem(password, userName)
  if (reason) throw invalidField('body', field, reason)
}

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

/**
 * A name taken by a concurrent unit of work between the check and the write: a database
 * server's unique index refuses it (an error with code `duplicate-name`), answered as the
 * check would have answered.
 */
async function sameName<T>(work: Promise<T>, name: string): Promise<T> {
  try {
    return await work
  } catch (err) {
    if ((err as { code?: string }).code === 'duplicate-name') throw problem('conflict', `A user named "${name}" already exists.`)
    throw err
  }
}

export function accountService(deps: AccountDeps) {
  const { accounts, uow, audit, passwords } = deps

  /** The last active Administrator may not be demoted, disabled or deleted. */
  async function wouldLoseLastAdmin(target: UserRow, next: { profile: number; active: boolean }) {
    const losesAdmin = target.profile === ADMINISTRATOR && target.is_active === 1 && (next.profile !== ADMINISTRATOR || !next.active)
    return losesAdmin && (await accounts.activeAdministrators(true)) <= 1
  }

  return {
    /** Every account's answer, as JSON text. */
    listJson: () => accounts.allJson(accountView),
    /** The caller's own account's answer, as JSON text; undefined when it no longer exists. */
    ownJson: (userId: number) => accounts.accountJson(userId, accountView),
    counts: () => accounts.counts(),

    async login(ctx: Context, userName: string, password: string) {
      // Failures count per user name and source address: failures from elsewhere cannot lock
      // a user out. A name without an account goes exactly the same way (counted, locked, its
      // password checked against a stand-in hash), so that neither the answers nor the time
      // they take tell which names exist.
      const source = limitKey(ctx.sourceAddress ?? '')
      // The attempt counts as a failure before the password is checked, so that parallel
      // guesses cannot outrun the lock; a success takes it back.
      const attempt = await uow.run(async () => {
        const user = await accounts.byName(userName)
        const now = Date.now()
        const lockedUntil = await accounts.loginLockedUntil(userName, source, now)
        if (lockedUntil !== undefined) return { user, lockedSeconds: Math.ceil((lockedUntil - now) / 1000) }
        await accounts.recordFailedLogin(userName, source, deps.lockout.threshold, deps.lockout.ms, now)
        return { user, lockedSeconds: undefined }
      })
      const checked = attempt.user
      if (attempt.lockedSeconds !== undefined) {
        await audit.record(ctx, {
          description: `Login refused for ${checked ? `"${checked.user_name}"` : 'an unknown user name'}: locked after too many failed logins from this address`,
          user: checked?.user_name ?? null,
          outcome: 'Failed',
          details: { userName, reason: 'locked' },
          asset: checked ? userAsset(checked) : undefined,
        })
        throw problem('account-locked', `Too many failed logins with this user name from this address; try again in ${attempt.lockedSeconds} seconds.`, {
          headers: { 'retry-after': String(attempt.lockedSeconds) },
        })
      }
      const ok = await passwords.verify(password, checked?.password_hash ?? (await passwords.dummy()))
      const outcome = await uow.run(async () => {
        const now = Date.now()
        // The account may have changed while the password was being checked; held from here
        // on, so that a change committing meanwhile also ends the session made below.
        const user = checked ? await accounts.byIdForChange(checked.id) : undefined
        const reason = !user
          ? checked
            ? 'account deleted'
            : 'unknown user'
          : !ok
            ? 'wrong password'
            : user.password_hash !== checked!.password_hash
              ? 'password changed meanwhile'
              : !user.is_active
                ? 'disabled'
                : null
        if (reason) {
          await audit.record(ctx, {
            description: `Login failed for ${user ? `"${user.user_name}"` : 'an unknown user name'}`,
            user: user?.user_name ?? null,
            outcome: 'Failed',
            details: { userName, reason },
            asset: user ? userAsset(user) : undefined,
          })
          return { failed: true as const }
        }
        await accounts.clearFailedLogins(userName, source)
        await accounts.recordLogin(user!.id, now)
        await audit.record(ctx, { description: `Login of "${user!.user_name}"`, user: user!.user_name, details: { userName: user!.user_name }, asset: userAsset(user!) })
        return { failed: false as const, session: await deps.startSession(user!.id, now), user: accountView({ ...user!, last_login_ms: now }) }
      })
      // Thrown after the commit, so that the failure's audit record is kept.
      if (outcome.failed) throw problem('invalid-credentials', 'The user name or password is incorrect.')
      return { ...outcome.session, user: outcome.user }
    },

    async create(ctx: Context, body: NewAccount): Promise<AccountView> {
      checkPassword(body.password, body.userName, 'password')
      const hash = await passwords.hash(body.password)
      return sameName(
        uow.run(async () => {
          if (await accounts.byName(body.userName)) throw problem('conflict', `A user named "${body.userName}" already exists.`)
          const id = await accounts.insert(
            {
              user_name: body.userName,
              email: body.email,
              first_name: body.firstName ?? null,
              last_name: body.lastName ?? null,
              phone: body.phone ?? null,
              image: body.image ?? null,
              profile: body.userProfile,
              password_hash: hash,
              is_active: body.isActive === false ? 0 : 1,
            },
            Date.now(),
          )
          const row = (await accounts.byId(id))!
          const view = accountView(row)
          await audit.record(ctx, { description: `Created account "${row.user_name}" with profile ${row.profile}`, details: { ...view, image: view.image ? '(image)' : null }, asset: userAsset(row) })
          return view
        }),
        body.userName,
      )
    },

    /** An Administrator changes an account, named by id or user name. */
    async update(ctx: Context, body: AccountView): Promise<AccountView> {
      if (body.id === undefined && body.userName === undefined) throw invalidField('body', 'id', 'or userName is required to name the account')
      const target = body.id !== undefined ? await accounts.byId(body.id) : await accounts.byName(body.userName!)
      if (!target) throw problem('not-found', `No account ${body.id !== undefined ? `with id ${body.id}` : `named "${body.userName}"`}.`)
      const newName = body.userName ?? target.user_name
      if (body.password !== undefined && body.password !== null) checkPassword(body.password, newName, 'password')
      const hash = body.password ? await passwords.hash(body.password) : undefined
      return sameName(
        uow.run(async () => {
          const current = await accounts.byIdForChange(target.id)
          if (!current) throw problem('not-found', `No account with id ${target.id}.`)
          const changes = contactChanges(body)
          if (body.userName !== undefined && body.userName !== current.user_name) {
            const other = await accounts.byName(body.userName)
            if (other && other.id !== current.id) throw problem('conflict', `A user named "${body.userName}" already exists.`)
            changes.user_name = body.userName
          }
          if (body.userProfile !== undefined) changes.profile = body.userProfile
          if (body.isActive !== undefined) changes.is_active = body.isActive ? 1 : 0
          if (hash) changes.password_hash = hash
          const next = { profile: changes.profile ?? current.profile, active: (changes.is_active ?? current.is_active) === 1 }
          if (await wouldLoseLastAdmin(current, next)) throw problem('conflict', 'The last active Administrator cannot be demoted or disabled.')
          const now = Date.now()
          await accounts.update(current.id, changes, now)
          const revoke = hash !== undefined || (changes.profile !== undefined && changes.profile !== current.profile) || (changes.is_active === 0 && current.is_active === 1)
          if (revoke) await accounts.revokeTokens(current.id, now)
          const before = accountView(current)
          const after = accountView((await accounts.byId(current.id))!)
          const changed = Object.fromEntries(
            Object.keys(after)
              .filter((k) => !['updatedTime'].includes(k) && JSON.stringify((before as any)[k]) !== JSON.stringify((after as any)[k]))
              .map((k) => [k, { from: k === 'image' ? '(image)' : (before as any)[k], to: k === 'image' ? '(image)' : (after as any)[k] }]),
          )
          if (hash) changed.password = { from: '***', to: '***' }
          await audit.record(ctx, { description: `Changed account "${after.userName}"${revoke ? ' and revoked its tokens' : ''}`, details: changed, asset: userAsset(current) })
          return after
        }),
        newName,
      )
    },

    /**
     * A user changes their own account. `stillValid` checks the caller's credential again
     * inside the change: while the password was hashed, the session may have been revoked.
     */
    async updateOwn(ctx: Context, caller: Caller, body: ContactFields & { currentPassword?: string; newPassword?: string }, stillValid: (now: number) => unknown): Promise<AccountView> {
      if (caller.kind !== 'session') throw problem('validation', 'An integration token has no account of its own to change.')
      const me = await accounts.byId(caller.id as number)
      if (!me) throw problem('not-found', 'Your account no longer exists.')
      let hash: string | undefined
      if (body.newPassword !== undefined) {
        if (body.currentPassword === undefined) throw invalidField('body', 'currentPassword', 'is required to set a new password')
        if (!(await passwords.verify(body.currentPassword, me.password_hash))) throw invalidField('body', 'currentPassword', 'is incorrect')
        checkPassword(body.newPassword, me.user_name, 'newPassword')
        hash = await passwords.hash(body.newPassword)
      } else if (body.currentPassword !== undefined) {
        throw invalidField('body', 'newPassword', 'is required with currentPassword')
      }
      return uow.run(async () => {
        const now = Date.now()
        // While the password was hashed the session may have been revoked, the account
        // deleted or its password reset by an Administrator: none of that may be undone here.
        // The row is held first, so that a reset committing meanwhile is either seen below
        // or waits for this change and then overrides it.
        const current = await accounts.byIdForChange(me.id)
        await stillValid(now)
        if (!current) throw problem('not-found', 'Your account no longer exists.')
        if (hash && current.password_hash !== me.password_hash) throw problem('conflict', 'The password was changed meanwhile; log in again.')
        const changes = contactChanges(body)
        if (hash) changes.password_hash = hash
        await accounts.update(me.id, changes, now)
        if (hash) await accounts.revokeTokens(me.id, now)
        const after = accountView((await accounts.byId(me.id))!)
        const fields = Object.keys(body).filter((k) => k !== 'currentPassword' && k !== 'newPassword')
        await audit.record(ctx, {
          description: `Changed own account "${me.user_name}"${hash ? ' including the password (tokens revoked)' : ''}`,
          details: { changed: fields, passwordChanged: Boolean(hash) },
          asset: userAsset(me),
        })
        return after
      })
    },

    /** Deletes accounts by user name or id; one result per item. Nobody deletes themselves or the last Administrator. */
    async remove(ctx: Context, caller: Caller, ids: string[]) {
      return uow.run(async () => {
        const results: ItemResult[] = []
        const deleted: string[] = []
        for (const id of ids) {
          // A user name first (names may be all digits), then a numeric id.
          const target = (await accounts.byName(id)) ?? (/^\d{1,15}$/.test(id) ? await accounts.byId(Number(id)) : undefined)
          if (!target) {
            results.push({ id, status: 'failed', reason: `No account "${id}".`, code: 'not-found' })
          } else if (caller.kind === 'session' && target.id === caller.id) {
            results.push({ id, status: 'failed', reason: 'You cannot delete your own account.', code: 'not-allowed' })
          } else if (await wouldLoseLastAdmin(target, { profile: 0, active: false })) {
            results.push({ id, status: 'failed', reason: 'The last active Administrator cannot be deleted.', code: 'not-allowed' })
          } else {
            await accounts.remove(target.id)
            deleted.push(target.user_name)
            results.push({ id, status: 'done', reason: null, code: null })
          }
        }
        const failed = results.filter((r) => r.status === 'failed')
        await audit.record(ctx, {
          description: deleted.length ? `Deleted accounts: ${deleted.join(', ')}` : 'Deleted no account',
          details: { deleted, failed: failed.map((f) => ({ id: f.id, reason: f.reason })) },
          outcome: deleted.length ? 'Succeeded' : 'Failed',
          asset: deleted.length === 1 ? { name: deleted[0], type: 'User', detail: 'Account' } : { type: 'User', detail: 'Account' },
        })
        return { succeeded: results.length - failed.length, failed: failed.length, results }
      })
    },
  }
}

export type AccountService = ReturnType<typeof accountService>
